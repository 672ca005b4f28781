"""What a server process costs: its CPU seconds (user + system), read from ``/proc``.

Owns: ``tree_cpu_seconds(pid)`` -- the CPU time of a process and of every process below it
(a target that is a process tree: a launcher and its broker, a server with helpers), each one's
``utime + stime`` (all its threads, the live and the ended) plus ``cutime + cstime`` (its
children that ended and were waited for), fields 14-17 of ``/proc/PID/stat``; ``CpuMeter``,
a callable a measured phase samples at its start and at its end (the difference is the phase's
cost; set-up before the first sample is not counted); ``cost_figures``, the per-million-messages
and per-GB figures every report shows beside msg/s.

Units: seconds; a GB is 10**9 bytes of payload (messages × message size, as MB/s counts).
``/proc/PID/stat`` counts in clock ticks (``SC_CLK_TCK``, 100 per second), so a live process's
``utime + stime`` is read from its CPU-time clock instead (``clock_gettime`` on the process's
``CPUCLOCK_SCHED`` clock id: the same sum, the scheduler's nanoseconds, every thread of it);
the ended children's ``cutime + cstime`` only exist in ticks. When the clock cannot be read, the
ticks are used.

Outside Linux (no ``/proc``) there is no meter (``CpuMeter.available`` is False) and the
reports say "not measured".
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Iterable

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str] | None:
    """The fields after the command name of ``/proc/PID/stat`` (field 3 onward), or None when
    the process is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # the command name (field 2) is in parentheses and may hold spaces or ')'
    return text[text.rindex(")") + 2:].split()


def cpu_clock_id(pid: int) -> int:
    """The clock id of process ``pid``'s CPU time (what ``clock_getcpuclockid`` returns on
    Linux: ``CPUCLOCK_SCHED`` of the whole thread group)."""
    return (~pid << 3) | 2


def process_cpu_seconds(pid: int) -> float:
    """utime + stime + cutime + cstime of one process, in seconds (0.0 when it is gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # fields[0] is field 3 (state): utime is field 14, stime 15, cutime 16, cstime 17
    ticks = [int(value) for value in fields[11:15]]
    try:
        own = time.clock_gettime(cpu_clock_id(pid))
    except (OSError, ValueError, AttributeError):
        own = (ticks[0] + ticks[1]) / TICKS
    return own + (ticks[2] + ticks[3]) / TICKS


def children(pid: int) -> list[int]:
    """The live child processes of ``pid``."""
    found: list[int] = []
    tasks = PROC / str(pid) / "task"
    try:
        listed = [task / "children" for task in tasks.iterdir()]
    except (FileNotFoundError, PermissionError):
        return found
    if listed and listed[0].exists():  # CONFIG_PROC_CHILDREN: each thread's children
        for path in listed:
            try:
                found.extend(int(value) for value in path.read_text().split())
            except (FileNotFoundError, PermissionError):
                continue
        return found
    for entry in PROC.iterdir():  # without it: every process whose parent is pid
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None and int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it."""
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children(current))
    return tree


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and of everything below it (see the module doc)."""
    return sum(process_cpu_seconds(member) for member in descendants(pid))


class CpuMeter:
    """``meter()`` -> the CPU seconds the servers ``pids`` (and their descendants) have used so
    far; sample it at a phase's start and end. Falsy when nothing can be measured."""

    def __init__(self, pids: Iterable[int | None]):
        self.pids = [pid for pid in pids if pid]

    @property
    def available(self) -> bool:
        return bool(self.pids) and PROC.is_dir()

    def __bool__(self) -> bool:
        return self.available

    def __call__(self) -> float:
        return sum(tree_cpu_seconds(pid) for pid in self.pids)


def cost_figures(cpu_seconds: float | None, messages: int, payload_bytes: int) -> dict[str, Any]:
    """The cost figures of a phase: its CPU seconds, per million messages, per GB of payload
    (None when not measured or when nothing moved)."""
    if cpu_seconds is None:
        return {"cpu_s": None, "cpu_s_per_million": None, "cpu_s_per_gb": None}
    return {
        "cpu_s": round(cpu_seconds, 6),
        "cpu_s_per_million": round(cpu_seconds / messages * 1e6, 4) if messages else None,
        "cpu_s_per_gb": round(cpu_seconds / payload_bytes * 1e9, 4) if payload_bytes else None,
    }


class PhaseCost:
    """One measured phase of a meter: ``begin()`` when measuring starts, ``end()`` when it ends;
    ``seconds`` is the CPU used between them (None when not metered or not both sampled)."""

    def __init__(self, meter: CpuMeter | None):
        self.meter = meter if meter else None
        self._begun: float | None = None
        self.seconds: float | None = None

    def begin(self, sampled: float | None = None) -> None:
        """Measuring starts now (or it started when the meter read ``sampled``)."""
        if self.meter is not None:
            self._begun = self.meter() if sampled is None else sampled

    def end(self) -> None:
        if self.meter is not None and self._begun is not None:
            self.seconds = self.meter() - self._begun

    @property
    def pids(self) -> list[int]:
        return [] if self.meter is None else list(self.meter.pids)


class SampleInto:
    """A barrier's action (picklable, it runs in whichever process arrives last): the meter's
    reading, stored in a shared ``multiprocessing.Value("d")`` -- the start of a phase taken
    before any party is released."""

    def __init__(self, meter: CpuMeter, value: Any):
        self.meter = meter
        self.value = value

    def __call__(self) -> None:
        self.value.value = self.meter()
