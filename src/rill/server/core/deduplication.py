"""Message deduplication by id within a partition (wire §6.4, ``[system.message_deduplication]``).

Owns: the per-partition window of recently seen message ids and the rewrite of a SEND message
region without the duplicates. When deduplication is enabled, ``MessageDeduplicator.append``
replaces the plain ``partition.log.append``: it walks the region once, drops every message
whose id is in the partition's window (or appeared earlier in the same batch), appends what is
left as one batch (so offsets stay dense) and only then remembers the new ids, so a batch the
log rejects (too big, malformed) leaves the window untouched. A batch made only of duplicates
appends nothing and still succeeds.

Rules:
  * id 0 means "server assigns a fresh UUIDv7": such messages are never duplicates and are not
    remembered (their new id is unique by construction).
  * An id is remembered for ``expiry`` seconds from its first acceptance; a duplicate does not
    refresh it. At most ``max_entries`` ids are kept per partition; the oldest go first
    (``max_entries`` 0 remembers nothing across batches).
  * A region the walk cannot parse is passed to the log unchanged, which rejects it with the
    proper status; nothing is remembered.

The window lives in memory only: a restart (or a deleted and recreated partition) forgets it.
When deduplication is disabled, no deduplicator exists and the send path does not call in here
at all, so it costs nothing per message.
"""

from __future__ import annotations

import struct
import time
import weakref
from collections import OrderedDict
from typing import Callable

from rill.server.config import MessageDeduplicationConfig
from rill.server.core.model import Partition

_SEND_HEAD = struct.Struct("<16sI")  # id, headers_length
_U32 = struct.Struct("<I")
_ZERO_ID = bytes(16)


def split_region(raw: bytes | bytearray | memoryview) -> list[tuple[bytes, int, int]] | None:
    """``(id, start, stop)`` of every message of a SEND region, or None if it is malformed."""
    view = memoryview(raw)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    end = len(view)
    read_head = _SEND_HEAD.unpack_from
    read_u32 = _U32.unpack_from
    messages: list[tuple[bytes, int, int]] = []
    position = 0
    try:
        while position < end:
            message_id, headers_length = read_head(view, position)
            payload_length_position = position + 20 + headers_length
            (payload_length,) = read_u32(view, payload_length_position)
            stop = payload_length_position + 4 + payload_length
            if payload_length == 0 or stop > end:
                return None
            messages.append((message_id, position, stop))
            position = stop
    except struct.error:
        return None
    return messages


class IdWindow:
    """The ids accepted recently in one partition, oldest first, with their acceptance time."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: OrderedDict[bytes, float] = OrderedDict()

    def forget_expired(self, now: float, expiry: float) -> None:
        seen = self.seen
        # insertion order is time order and the expiry is the same for all: expired ids are a prefix
        while seen:
            first_id, accepted_at = next(iter(seen.items()))
            if now - accepted_at < expiry:
                return
            del seen[first_id]

    def remember(self, ids: list[bytes], now: float, max_entries: int) -> None:
        seen = self.seen
        for message_id in ids:
            seen[message_id] = now
        while len(seen) > max(max_entries, 0):
            seen.popitem(last=False)


class MessageDeduplicator:
    """Drops messages whose id a partition accepted within the window; one per server."""

    def __init__(
        self,
        max_entries: int,
        expiry: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.expiry = expiry  # seconds; infinity = never forget (except by max_entries)
        self.clock = clock
        # keyed by the Partition object: a deleted partition takes its window with it
        self._windows: weakref.WeakKeyDictionary[Partition, IdWindow] = weakref.WeakKeyDictionary()

    @classmethod
    def from_config(cls, config: MessageDeduplicationConfig) -> MessageDeduplicator | None:
        """A deduplicator when enabled, else None (the send path then skips deduplication)."""
        if not config.enabled:
            return None
        return cls(config.max_entries, config.expiry)

    def window(self, partition: Partition) -> IdWindow:
        window = self._windows.get(partition)
        if window is None:
            window = self._windows[partition] = IdWindow()
        return window

    def filter(
        self, partition: Partition, raw: bytes | bytearray | memoryview
    ) -> tuple[bytes | bytearray | memoryview | None, list[bytes]]:
        """``(region without duplicates or None if nothing is left, ids to remember)``.

        The region is returned as given when nothing was dropped (no copy) or when it cannot be
        parsed (the log then rejects it). Remember the ids only once the append succeeded.
        """
        messages = split_region(raw)
        if messages is None:
            return raw, []
        window = self.window(partition)
        window.forget_expired(self.clock(), self.expiry)
        seen = window.seen
        new_ids: list[bytes] = []
        in_batch: set[bytes] = set()
        kept: list[tuple[int, int]] = []
        for message_id, start, stop in messages:
            if message_id != _ZERO_ID:
                if message_id in seen or message_id in in_batch:
                    continue
                in_batch.add(message_id)
                new_ids.append(message_id)
            kept.append((start, stop))
        if len(kept) == len(messages):
            return raw, new_ids
        if not kept:
            return None, []
        view = memoryview(raw)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        return b"".join(_merged_slices(view, kept)), new_ids

    def append(
        self, partition: Partition, raw: bytes | bytearray | memoryview, now_us: int
    ) -> int:
        """Append ``raw`` less its duplicates to the partition; returns the messages appended."""
        region, new_ids = self.filter(partition, raw)
        if region is None:
            return 0
        first, last = partition.log.append(region, now_us)
        if new_ids:
            self.window(partition).remember(new_ids, self.clock(), self.max_entries)
        return last - first + 1


def _merged_slices(view: memoryview, kept: list[tuple[int, int]]) -> list[memoryview]:
    """Slices of ``view`` covering the kept messages, adjacent messages joined into one slice."""
    slices: list[memoryview] = []
    run_start, run_stop = kept[0]
    for start, stop in kept[1:]:
        if start == run_stop:
            run_stop = stop
            continue
        slices.append(view[run_start:run_stop])
        run_start, run_stop = start, stop
    slices.append(view[run_start:run_stop])
    return slices
