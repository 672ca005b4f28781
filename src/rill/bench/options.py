"""What a benchmark run is asked to do: ``BenchOptions``, its checks, and the actor layout.

Owns: the options of ``rill bench`` (one dataclass, shared by the CLI, ``run_scenario`` and
``rill bench compare``), their validation (``validate`` raises ``OptionsError`` with one line a
person can act on), and the layout every scenario derives from them -- which stream, partitions
and consumer group each actor uses -- so the setup (``rill.bench.scenarios``) and the actors
(``rill.bench.actors``) agree by construction.

Layout, in the spirit of iggy-bench (wire reference §10.1): streams ``start_stream_id + 1 ...
start_stream_id + streams`` each hold topic 1 with ``partitions`` partitions. Producer ``i``
(0-based) writes to stream ``start + 1 + (i mod streams)``, to partition 1 when there is one
partition, else balanced. Consumer ``i`` reads stream ``start + 1 + (i mod streams)``; the
consumers of one stream split its partitions between them (rank ``r`` of ``k`` reads the
partitions ``p`` with ``(p - 1) mod k == r``), so a lone consumer reads every partition.
Consumer-group members: consumer ``i`` joins group ``1 + (i mod consumer_groups)``; group ``g``
lives on topic 1 of stream ``start + 1 + ((g - 1) mod streams)``.

Invariant: several actors share a stream only when it has a partition for each of them, or
when ``shared_streams`` says so explicitly (iggy's ``--disable-parallel-*``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

SCENARIOS = ("send", "poll", "send-and-poll", "consumer-group-poll", "round-trip")
TRANSPORTS = ("tcp", "quic", "http")
FSYNC_POLICIES = ("never", "interval", "always")
MAX_STREAM_ID = 0xFFFF_FFFF
MAX_PARTITIONS = 1000  # CREATE_TOPIC's limit (wire reference §3.7)


class OptionsError(ValueError):
    """A benchmark option that cannot work; the message is one line for the person."""


@dataclass
class BenchOptions:
    producers: int = 1
    consumers: int = 1
    streams: int = 1
    partitions: int = 1
    consumer_groups: int = 1
    messages_per_batch: int = 1000
    message_size: int = 1000
    batches: int | None = 1000  # per actor
    duration: float | None = None  # seconds per actor; when set it wins over batches
    warmup: float = 0.0  # seconds of untimed sending/polling before the measured part
    transport: str = "tcp"  # "tcp" | "quic" | "http"
    server_address: str | None = None  # an existing server; None = start one
    fsync: str = "interval"  # "never" | "interval" | "always" (for a server the tool starts)
    username: str = "iggy"
    password: str = "iggy"
    start_stream_id: int = 3_000_000
    cleanup: bool = True  # delete the bench streams at the end (existing server)
    progress: bool = True
    # --- rill additions (after the fields above, all with defaults) ---
    shared_streams: bool = False  # let several actors share a stream without a partition each
    request_timeout: float = 60.0  # seconds one round trip may take before the run fails
    ca_file: str | None = None  # trust this certificate (QUIC); a server the tool starts: its own
    verify_certificate: bool = True  # False: accept any certificate (--insecure)
    target: str = "rill"  # what the report says was measured (``rill bench compare`` names peers)
    server_pid: int | None = None  # the process of ``server_address``, to meter its CPU (a server
    # the tool starts is metered anyway)

    # -- derived --------------------------------------------------------------------------------

    @property
    def by_duration(self) -> bool:
        return self.duration is not None

    @property
    def messages_per_actor(self) -> int | None:
        """Messages each actor moves in batches mode (None in duration mode)."""
        if self.by_duration or self.batches is None:
            return None
        return self.batches * self.messages_per_batch

    def stream_ids(self) -> list[int]:
        return [self.start_stream_id + 1 + index for index in range(self.streams)]

    def client_options(self) -> dict[str, Any]:
        """The certificate options of every client the run makes (``AsyncClient(**...)``)."""
        return {"ca_file": self.ca_file, "verify_certificate": self.verify_certificate}

    def report_options(self) -> dict[str, Any]:
        """The options as the JSON report shows them (never the password)."""
        values = dataclasses.asdict(self)
        values["password"] = "***"
        return values


# --- the layout ------------------------------------------------------------------------------


def actor_stream(options: BenchOptions, index: int) -> int:
    """The stream of producer or consumer ``index`` (0-based)."""
    return options.start_stream_id + 1 + (index % options.streams)


def producer_partition(options: BenchOptions) -> int | None:
    """The partition id producers name, or None for balanced partitioning."""
    return 1 if options.partitions == 1 else None


def consumer_partitions(options: BenchOptions, index: int, consumers: int) -> list[int]:
    """The partitions consumer ``index`` of ``consumers`` reads on its stream."""
    streams = options.streams
    rank = index // streams
    sharing = len(range(index % streams, consumers, streams))  # consumers on this stream
    partitions = options.partitions
    if sharing > partitions:  # only with shared_streams: several consumers read one partition
        return [1 + rank % partitions]
    return [partition for partition in range(1, partitions + 1) if (partition - 1) % sharing == rank]


def consumer_group_of(options: BenchOptions, index: int) -> int:
    """The consumer group (1-based id) member ``index`` joins."""
    return 1 + index % options.consumer_groups


def group_stream(options: BenchOptions, group_id: int) -> int:
    return options.start_stream_id + 1 + ((group_id - 1) % options.streams)


def group_members(options: BenchOptions, group_id: int) -> list[int]:
    """Indexes of the consumers that join ``group_id``."""
    return [index for index in range(options.consumers) if consumer_group_of(options, index) == group_id]


def actors_of(scenario: str, options: BenchOptions) -> tuple[int, int]:
    """(producers, consumers) a scenario runs."""
    producers = options.producers if scenario in ("send", "send-and-poll") else 0
    consumers = options.consumers if scenario in ("poll", "send-and-poll", "consumer-group-poll") else 0
    return producers, consumers


# --- validation ------------------------------------------------------------------------------


def _positive(name: str, value: Any, flag: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise OptionsError(f"{flag} must be a positive whole number (got {value!r})")


def validate(scenario: str, options: BenchOptions) -> None:
    """Raise ``OptionsError`` when ``options`` cannot run ``scenario``."""
    if scenario not in SCENARIOS:
        raise OptionsError(f"unknown scenario {scenario!r} (known: {', '.join(SCENARIOS)})")
    for name, flag in (("producers", "--producers"), ("consumers", "--consumers"),
                       ("streams", "--streams"), ("partitions", "--partitions"),
                       ("consumer_groups", "--consumer-groups"),
                       ("messages_per_batch", "--messages-per-batch"),
                       ("message_size", "--message-size")):
        _positive(name, getattr(options, name), flag)
    if options.duration is None:
        if options.batches is None:
            raise OptionsError("give --batches or --duration")
        _positive("batches", options.batches, "--batches")
    elif not (isinstance(options.duration, (int, float)) and options.duration > 0
              and math.isfinite(options.duration)):
        raise OptionsError(f"--duration must be a positive number of seconds (got {options.duration!r})")
    if not (isinstance(options.warmup, (int, float)) and 0 <= options.warmup < math.inf):
        raise OptionsError(f"--warmup must be zero or a positive number of seconds (got {options.warmup!r})")
    if options.transport not in TRANSPORTS:
        raise OptionsError(f"unknown transport {options.transport!r} (known: {', '.join(TRANSPORTS)})")
    if options.fsync not in FSYNC_POLICIES:
        raise OptionsError(f"unknown fsync policy {options.fsync!r} (known: {', '.join(FSYNC_POLICIES)})")
    if options.partitions > MAX_PARTITIONS:
        raise OptionsError(f"--partitions must be at most {MAX_PARTITIONS} (got {options.partitions})")
    if not 0 <= options.start_stream_id or options.start_stream_id + options.streams > MAX_STREAM_ID:
        raise OptionsError(f"stream ids {options.start_stream_id + 1}..{options.start_stream_id + options.streams} "
                           "do not fit in 32 bits")
    if options.transport == "http" and options.messages_per_batch * options.message_size > 1_000_000:
        raise OptionsError("over http a batch must stay under 1 MB (--messages-per-batch × --message-size): "
                           "the server refuses request bodies over 2 MB and JSON grows payloads by a third")
    if options.transport == "quic" and options.messages_per_batch * (options.message_size + 24) > 9_900_000:
        raise OptionsError("over quic a batch must stay under 10 MB (--messages-per-batch × --message-size)")
    if options.server_pid is not None and (not isinstance(options.server_pid, int) or options.server_pid < 1):
        raise OptionsError(f"--server-pid must be a process id (got {options.server_pid!r})")
    if options.request_timeout <= 0:
        raise OptionsError("request timeout must be positive")
    if scenario == "round-trip":
        if options.duration is not None:
            raise OptionsError("round-trip counts round trips: give --batches (one message each), not --duration")
        if options.transport == "http":
            raise OptionsError("round-trip needs --transport tcp or quic: the HTTP API has no long poll")
        return
    producers, consumers = actors_of(scenario, options)
    if scenario == "consumer-group-poll":
        if options.transport == "http":
            raise OptionsError("consumer-group-poll needs --transport tcp or quic: "
                               "the HTTP API has no endpoint to join a consumer group")
        if options.consumer_groups > consumers:
            raise OptionsError(f"--consumer-groups {options.consumer_groups} needs at least as many "
                               f"--consumers (got {consumers})")
        return
    for kind, count, flag in (("producers", producers, "--producers"), ("consumers", consumers, "--consumers")):
        per_stream = math.ceil(count / options.streams) if count else 0
        if per_stream > 1 and per_stream > options.partitions and not options.shared_streams:
            raise OptionsError(
                f"{flag} {count} over --streams {options.streams} puts {per_stream} {kind} on one stream: "
                f"give --streams {count}, or --partitions {per_stream} (one per {kind[:-1]}), "
                "or --shared-streams"
            )
