"""Offsets: partition discovery, resolution of starting/ending options, canonical offset JSON.

Spark keeps a source's offsets as JSON and compares them **as strings**, so every offset dict
this module returns is canonical: ``{"<stream>/<topic>": {"<partition id>": next_offset}}``
with keys sorted at both levels (as ``json.dumps(sort_keys=True)`` would order them). Values
are exclusive ends ("the next offset to read"), as with Kafka. Iggy names cannot contain "/",
so the key is unambiguous.

Owns: ``discover`` (partitions and their bounds: oldest stored offset, next offset), and
``resolve`` (earliest / latest / JSON with -2 and -1 / a start timestamp -> concrete offsets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rill.client import Client, Consumer, PollingStrategy

from pyspark_rill.options import RillOptionError

EARLIEST, LATEST = -2, -1

Offsets = dict[str, dict[str, int]]


@dataclass(frozen=True)
class Bounds:
    first: int  # oldest stored offset
    next: int  # offset the next message will get


Discovered = dict[str, dict[str, Bounds]]  # "stream/topic" -> partition id -> bounds


def topic_key(stream: str, topic: str) -> str:
    return f"{stream}/{topic}"


def split_key(key: str) -> tuple[str, str]:
    stream, topic = key.split("/")
    return stream, topic


def canonical(offsets: Offsets) -> Offsets:
    """The same offsets with keys sorted at both levels (Spark compares offsets as JSON text)."""
    return {key: {p: int(offsets[key][p]) for p in sorted(offsets[key])} for key in sorted(offsets)}


def discover(client: Client, stream: str, topics: tuple[str, ...],
             bounds_of: Callable[[str, str, int], Bounds] | None = None) -> Discovered:
    """Every partition of ``topics`` with its bounds; a missing stream or topic is an error
    naming the option. ``bounds_of(stream, topic, partition)``: where a partition's bounds are
    asked (a cluster: its leader); else ``client``, every partition's request in flight."""
    if client.get_stream(stream) is None:
        raise RillOptionError(f"option 'stream': stream {stream!r} does not exist (or this "
                              "user may not read it)")
    pending = []
    for topic in topics:
        details = client.get_topic(stream, topic)
        if details is None:
            raise RillOptionError(f"option 'topic': topic {topic!r} does not exist in stream "
                                  f"{stream!r} (or this user may not read it)")
        for partition in details.partitions:
            if bounds_of is not None:
                pending.append((topic_key(stream, topic), str(partition.id),
                                bounds_of(stream, topic, partition.id)))
                continue
            future = client.submit(client.async_client.poll_messages_columnar(
                stream, topic, partition.id, 0, 0))
            pending.append((topic_key(stream, topic), str(partition.id), future))
    found: Discovered = {topic_key(stream, topic): {} for topic in topics}
    for key, partition, future in pending:
        if isinstance(future, Bounds):
            found[key][partition] = future
            continue
        bounds = future.result()
        found[key][partition] = Bounds(bounds.first_offset, bounds.next_offset)
    return found


def latest(discovered: Discovered) -> Offsets:
    return canonical({key: {p: b.next for p, b in parts.items()} for key, parts in discovered.items()})


def earliest(discovered: Discovered) -> Offsets:
    return canonical({key: {p: b.first for p, b in parts.items()} for key, parts in discovered.items()})


def resolve(
    spec: str | Offsets,
    discovered: Discovered,
    option: str,
    default: int,
) -> Offsets:
    """Concrete offsets for an option value: ``earliest``, ``latest`` or JSON; partitions the
    JSON leaves out get ``default`` (EARLIEST or LATEST)."""
    if spec == "earliest":
        return earliest(discovered)
    if spec == "latest":
        return latest(discovered)
    assert isinstance(spec, dict)
    for key, partitions in spec.items():
        if key not in discovered:
            raise RillOptionError(f"option {option!r}: {key!r} is not one of the query's topics "
                                  f"({', '.join(sorted(discovered))})")
        for partition in partitions:
            if partition not in discovered[key]:
                raise RillOptionError(f"option {option!r}: {key} has no partition {partition}")
    resolved: Offsets = {}
    for key, parts in discovered.items():
        resolved[key] = {}
        for partition, bounds in parts.items():
            wanted = spec.get(key, {}).get(partition, default)
            if wanted == EARLIEST:
                wanted = bounds.first
            elif wanted == LATEST:
                wanted = bounds.next
            resolved[key][partition] = wanted
    return canonical(resolved)


def at_timestamp(client: Client, discovered: Discovered, timestamp_us: int) -> Offsets:
    """For each partition, the first offset whose timestamp is >= ``timestamp_us`` (the next
    offset when there is none)."""
    pending = []
    for key, parts in discovered.items():
        stream, topic = split_key(key)
        for partition in parts:
            future = client.submit(client.async_client.poll_messages(
                stream, topic, Consumer.regular(1), int(partition),
                PollingStrategy.timestamp(timestamp_us), 1, False))
            pending.append((key, partition, future))
    resolved: Offsets = {key: {} for key in discovered}
    for key, partition, future in pending:
        polled = future.result()
        messages = polled.messages
        resolved[key][partition] = (
            messages[0].offset if messages else discovered[key][partition].next
        )
    return canonical(resolved)


def clamp_ending(ending: Offsets, discovered: Discovered) -> Offsets:
    """Batch reads stop at what exists: an explicit end beyond the next offset is cut to it."""
    return canonical({
        key: {p: min(offset, discovered[key][p].next) for p, offset in parts.items()}
        for key, parts in ending.items()
    })
