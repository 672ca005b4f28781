"""Peers for ``rill bench compare``: other servers run side by side with rill on one workload.

Owns: the one small interface every peer driver implements (``Peer``), the workload they all
run (``Workload``), ``PeerUnavailable`` (a peer that cannot be found or started: ``compare``
reports it as a row, never drops it), and the helpers the drivers share (free ports, waiting
for a port, stopping a child process, uvloop).

A peer's life: ``start(workdir)`` launches its server on 127.0.0.1 (a child process of ours,
its files under ``workdir``) with the workload's fsync policy; ``publish()`` sends every
message in batches (pipelines) and returns the producer's ``ActorResult``; ``consume()`` reads
every message back in batches and returns the consumer's; ``stop()`` ends the server. Every
batch round trip is recorded with the ``Recorder`` that ``recorder(kind)`` gives, so each row of
the table has the same figures (throughput over the whole run, p99 of the batch round trips) and
the server's cost: the recorder samples the CPU of the server's process tree
(``server_pids()``, ``rill.bench.cpu``) when the driver starts its clock and when it finishes,
so connecting and creating topics are not counted. A driver that can also measure the
one-message round trip (``rill.bench.round_trip``: produce → a consumer tailing with a long poll)
implements ``round_trip()``; it runs after ``consume()`` when ``Workload.round_trips`` asks for
it, on the same server, from the end of what was published. Clients run in
this process on uvloop; servers always run in their own processes.

Fairness rules kept by every driver: the same message count and size, payload bytes counted
as the message's bytes (MB = 10**6), batches of ``Workload.batch``, one stream/partition.
"""

from __future__ import annotations

import abc
import asyncio
import importlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

from rill.bench.cpu import CpuMeter
from rill.bench.ports import free_port
from rill.bench.results import ActorResult, Recorder

FSYNC_MODES = ("interval", "always")
T = TypeVar("T")


class PeerUnavailable(Exception):
    """The peer cannot be installed, found or started here; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Workload:
    """What every target runs: ``messages`` of ``message_size`` bytes in batches of ``batch``,
    fsync ``interval`` (every second) or ``always`` (before each acknowledgement)."""

    messages: int = 100_000
    message_size: int = 1000
    batch: int = 1000
    fsync: str = "interval"
    round_trips: int = 0  # one-message round trips measured after consume (0: none)

    def __post_init__(self) -> None:
        if self.messages < 1 or self.message_size < 1 or self.batch < 1 or self.round_trips < 0:
            raise ValueError("messages, message_size and batch must be positive, round_trips not negative")
        if self.fsync not in FSYNC_MODES:
            raise ValueError(f"fsync must be one of {', '.join(FSYNC_MODES)}, not {self.fsync!r}")

    def batch_sizes(self) -> list[int]:
        """Messages per batch, in order (the last one may be short)."""
        full, rest = divmod(self.messages, self.batch)
        return [self.batch] * full + ([rest] if rest else [])

    def payloads(self) -> list[bytes]:
        """One batch of distinct random payloads, reused for every batch by every peer."""
        return [os.urandom(self.message_size) for _ in range(min(self.batch, self.messages))]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Peer(abc.ABC):
    """One peer server plus its client. Subclasses set ``name`` and ``client``."""

    name = "peer"
    client = ""  # which client library drives it, for the report

    def __init__(self, workload: Workload):
        self.workload = workload
        self.process: subprocess.Popen[bytes] | None = None
        self.workdir: Path | None = None
        self.port = 0

    @abc.abstractmethod
    def start(self, workdir: Path) -> None:
        """Start the server (raise PeerUnavailable when it cannot be found or started)."""

    @abc.abstractmethod
    async def publish(self) -> ActorResult:
        """Send every message of the workload; one recorded round trip per batch."""

    @abc.abstractmethod
    async def consume(self) -> ActorResult:
        """Read every published message back; one recorded round trip per batch."""

    async def round_trip(self) -> ActorResult | None:
        """``workload.round_trips`` one-message round trips (produce → tailing consumer), or
        None when this driver has none."""
        return None

    def _prepare(self, workdir: Path, client_module: str, client_hint: str,
                  binary: str | None, binary_hint: str) -> str:
        """What every server peer checks before it starts: its Python client imports, its
        server binary is executable (else PeerUnavailable naming the fix); then the work
        directory exists and a free port is picked. Returns the binary."""
        try:
            importlib.import_module(client_module)
        except ImportError as error:
            raise PeerUnavailable(
                f"{client_hint} is not installed ({error}); pip install 'rill[bench]'"
            ) from None
        if binary is None or not os.access(binary, os.X_OK):
            raise PeerUnavailable(binary_hint.format(binary=binary))
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.port = free_port()
        return binary

    def describe(self) -> dict[str, Any]:
        """The server's settings for the report (and tests)."""
        return {"peer": self.name, "client": self.client, "port": self.port}

    def server_pids(self) -> list[int]:
        """The processes whose CPU is the server's (each with its descendants)."""
        return [] if self.process is None else [self.process.pid]

    def recorder(self, kind: str) -> Recorder:
        """The recorder of this driver's ``kind`` ("producer" | "consumer") phase, metering the
        server's CPU from its ``start()`` to its ``finish()``."""
        return Recorder(f"{self.name}-{kind}", kind, cpu=CpuMeter(self.server_pids()))

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# --- helpers shared by the drivers ------------------------------------------------------------


def wait_for_port(
    port: int, process: subprocess.Popen[bytes], timeout: float = 20.0, log: Path | None = None
) -> None:
    """Wait until 127.0.0.1:``port`` accepts connections; PeerUnavailable if the process dies
    or the time runs out (with the tail of its log, when there is one)."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise PeerUnavailable(f"exited with status {process.returncode} on start{_tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                stop_process(process)
                raise PeerUnavailable(
                    f"did not listen on port {port} within {timeout:g} s{_tail(log)}"
                ) from None
            time.sleep(0.05)


def _tail(log: Path | None) -> str:
    if log is None or not log.exists():
        return ""
    lines = log.read_text(errors="replace").strip().splitlines()[-3:]
    return (": " + " | ".join(lines)) if lines else ""


def stop_process(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; always reaps the child."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for stream in (process.stdout, process.stderr, process.stdin):
        if stream is not None:
            stream.close()


class RillListenerPeer(Peer):
    """A target that is rill itself, one of its wire protocols (``listener``: ``kafka`` or
    ``tank``) on a server the bench starts (``RillServer``) with the workload's fsync."""

    listener = ""

    def __init__(self, workload: Workload):
        super().__init__(workload)
        self.server: Any = None

    def start_rill(self, workdir: Path) -> None:
        from rill.bench.server import RillServer, ServerStartError

        server = RillServer(data_dir=workdir / "data", fsync=self.workload.fsync,
                            transports=("tcp",), **{self.listener: True})
        try:
            server.start()
        except ServerStartError as error:
            raise PeerUnavailable(f"rill server did not start: {error}") from error
        self.server = server
        self.port = int(server.addresses[self.listener].rsplit(":", 1)[1])

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "fsync": self.workload.fsync}

    def server_pids(self) -> list[int]:
        return [] if self.server is None or self.server.pid is None else [self.server.pid]

    def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()


def run_async(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine on a fresh uvloop event loop (asyncio's own when uvloop is missing)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.run(factory())  # type: ignore[arg-type]
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(factory())  # type: ignore[arg-type]
