"""The server's figures: what GET_STATS (wire §3.1, §4.9), /stats and `rill stats` show.

Owns: ``ServerStats``. Process and machine figures come from psutil; the model figures
(streams, topics, partitions, segments, messages, sizes, consumer groups) are counted from the
in-memory model; clients are the Core's registered sessions.

Choices: ``start_time`` is the server's start in µs since the epoch (the §11 recommendation, not
Iggy's seconds), taken when the service is built; not the process's creation time, which counts
whatever ran before a wrapper exec'd the server (``./run serve`` installs, then execs ``rill
serve`` in the same process); ``run_time`` is µs since that start. CPU figures are percentages over the time
since the previous sample (process: of one core, so it may exceed 100 on several cores; system:
of all cores), taken with psutil's non-blocking ``interval=None`` against a baseline primed when
the service is built; a new sample is taken when the last one is at least ``CPU_SAMPLE_WINDOW``
old, so back-to-back requests see the last sample rather than a meaningless 0 over a few µs.
``read_bytes`` / ``written_bytes`` are the bytes the server's storage read from and wrote to
its log files since it started (its own ``Durability.io_totals``, not shared with another
server in the process; the kernel's I/O counters of the process would count a start's imports
and miss reads the page cache answers). Every figure is gathered without blocking for more
than a few reads of /proc; strings that cannot be found are ``unknown_<field>``.
"""

from __future__ import annotations

import logging
import platform
import socket
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sized

import psutil

from rill import __version__
from rill.server.auth.permissioner import Action
from rill.server.core.model import Session, Topic
from rill.server.core.state import CoreState

log = logging.getLogger(__name__)

CPU_SAMPLE_WINDOW = 0.25  # seconds: the shortest period a CPU percentage is measured over


class CpuSampler:
    """Process and system CPU percentages, sampled without blocking the caller."""

    def __init__(self, process: psutil.Process, window: float = CPU_SAMPLE_WINDOW) -> None:
        self.process = process
        self.window = window
        self.process.cpu_percent(None)  # prime both baselines: the next read measures from here
        psutil.cpu_percent(None)
        self.sampled_at = time.monotonic()
        self.process_percent = 0.0
        self.system_percent = 0.0
        self.has_sample = False

    def read(self) -> tuple[float, float]:
        now = time.monotonic()
        if not self.has_sample or now - self.sampled_at >= self.window:
            if now > self.sampled_at:
                self.process_percent = self.process.cpu_percent(None)
                self.system_percent = psutil.cpu_percent(None)
                self.sampled_at = now
                self.has_sample = True
        return self.process_percent, self.system_percent


def _os_names() -> tuple[str, str, str]:
    """(os name, os version, kernel version), e.g. ("Debian GNU/Linux", "12", "6.1.0-18")."""
    system = platform.system() or "unknown_os_name"
    name, version = system, platform.version() or "unknown_os_version"
    if system == "Linux":
        try:
            release = platform.freedesktop_os_release()
            name = release.get("NAME", name)
            version = release.get("VERSION_ID", release.get("VERSION", version))
        except OSError:
            pass
    elif system == "Darwin":
        name, version = "macOS", platform.mac_ver()[0] or version
    elif system == "Windows":
        version = platform.win32_ver()[1] or version
    kernel = platform.release() or "unknown_kernel_version"
    return name, version, kernel


@dataclass(frozen=True, slots=True)
class ServerStats:
    """The figures of the module's docstring (µs, bytes, percentages, counts)."""

    process_id: int
    cpu_usage: float
    total_cpu_usage: float
    memory_usage: int
    total_memory: int
    available_memory: int
    run_time: int
    start_time: int
    read_bytes: int
    written_bytes: int
    messages_size_bytes: int
    streams_count: int
    topics_count: int
    partitions_count: int
    segments_count: int
    messages_count: int
    clients_count: int
    consumer_groups_count: int
    hostname: str
    os_name: str
    os_version: str
    kernel_version: str
    server_version: str


class SystemService:
    def __init__(self, state: CoreState, sessions: Mapping[int, Session],
                 groups_of: Callable[[Topic], Sized]) -> None:
        self.state = state
        self.sessions = sessions  # the Core's registry, shared (not copied)
        self.process = psutil.Process()
        self.cpu = CpuSampler(self.process)
        self.start_time_us = state.clock()  # the server's start, not the process's creation
        self.os_name, self.os_version, self.kernel_version = _os_names()
        self.groups_of = groups_of  # the consumer groups of a topic (counted by GET_STATS)

    def get_stats(self, session: Session) -> ServerStats:
        self.state.authorize(session, Action.LOGGED_IN)  # a login, no permission
        streams = topics = partitions = segments = messages = size = groups = 0
        for stream in self.state.streams.values():
            streams += 1
            for topic in stream.topics.values():
                topics += 1
                groups += len(self.groups_of(topic))
                for partition in topic.partitions.values():
                    partitions += 1
                    partition_log = partition.log
                    segments += partition_log.segments_count
                    messages += partition_log.messages_count
                    size += partition_log.size_bytes
        process_cpu, system_cpu = self.cpu.read()
        memory = psutil.virtual_memory()
        totals = self.state.durability.io_totals
        read_bytes, written_bytes = totals.read_bytes, totals.written_bytes
        now_us = self.state.clock()
        return ServerStats(
            process_id=self.process.pid,
            cpu_usage=float(process_cpu),
            total_cpu_usage=float(system_cpu),
            memory_usage=self._rss(),
            total_memory=memory.total,
            available_memory=memory.available,
            run_time=max(0, now_us - self.start_time_us),
            start_time=self.start_time_us,
            read_bytes=read_bytes,
            written_bytes=written_bytes,
            messages_size_bytes=size,
            streams_count=streams,
            topics_count=topics,
            partitions_count=partitions,
            segments_count=segments,
            messages_count=messages,
            clients_count=len(self.sessions),
            consumer_groups_count=groups,
            hostname=socket.gethostname() or "unknown_hostname",
            os_name=self.os_name,
            os_version=self.os_version,
            kernel_version=self.kernel_version,
            server_version=__version__,
        )

    def _rss(self) -> int:
        try:
            return self.process.memory_info().rss
        except psutil.Error:
            log.debug("process memory unavailable", exc_info=True)
            return 0

