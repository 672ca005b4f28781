"""Benchmark results: what each actor measured, the summaries, and the JSON report.

Owns the numbers of ``rill bench``: an actor (one producer or consumer, possibly in another
process) records every batch round trip with a ``Recorder``; ``Recorder.finish`` gives an
``ActorResult`` that crosses process boundaries as a plain dict; ``scenario_report`` turns the
actors of one run into the JSON-ready summary (per actor and overall, per kind), and a report
(``new_report``) collects scenarios, tables and curves for ``write_json`` and the HTML renderer
(``rill.bench.report_html``).

Units, everywhere: MB = 10**6 bytes, latencies in milliseconds, times in seconds. Percentiles are
nearest-rank over every batch round trip. Overall throughput of a kind is its total messages and
bytes over the wall-clock window from the first actor's start to the last actor's end (so it is
what the system did, not a sum of per-actor rates). The timeline is bucketed on the wall clock
(``bucket_seconds``), so buckets of actors in different processes line up and add.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rill.bench.cpu import cost_figures

PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9))
DEFAULT_BUCKET_SECONDS = 0.25
HISTOGRAM_BINS_PER_DECADE = 10


@dataclass(slots=True)
class ActorResult:
    """One actor's run: totals, every batch latency (µs), and its wall-clock timeline."""

    actor: str
    kind: str  # "producer" | "consumer"
    started_at: float  # time.time() at start
    seconds: float
    messages: int
    bytes: int
    latencies_us: array = field(default_factory=lambda: array("d"))
    # bucket start (time.time(), a multiple of bucket_seconds) -> [messages, bytes]
    timeline: dict[float, list[int]] = field(default_factory=dict)
    bucket_seconds: float = DEFAULT_BUCKET_SECONDS
    server_cpu_seconds: float | None = None  # the server's CPU over this actor's run, when metered

    @property
    def ended_at(self) -> float:
        return self.started_at + self.seconds

    def summary(self) -> dict[str, Any]:
        return {
            "actor": self.actor,
            "kind": self.kind,
            "messages": self.messages,
            "bytes": self.bytes,
            "batches": len(self.latencies_us),
            "seconds": round(self.seconds, 6),
            **throughput(self.messages, self.bytes, self.seconds),
            "latency_ms": latency_summary(self.latencies_us),
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain data for a pipe or queue between processes (``from_dict`` reverses it)."""
        return {
            "actor": self.actor,
            "kind": self.kind,
            "started_at": self.started_at,
            "seconds": self.seconds,
            "messages": self.messages,
            "bytes": self.bytes,
            "latencies_us": self.latencies_us.tobytes(),
            "timeline": [[start, counts[0], counts[1]] for start, counts in self.timeline.items()],
            "bucket_seconds": self.bucket_seconds,
            "server_cpu_seconds": self.server_cpu_seconds,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ActorResult:
        latencies = array("d")
        latencies.frombytes(data["latencies_us"])
        return cls(
            data["actor"], data["kind"], data["started_at"], data["seconds"], data["messages"],
            data["bytes"], latencies,
            {start: [messages, size] for start, messages, size in data["timeline"]},
            data["bucket_seconds"], data.get("server_cpu_seconds"),
        )


class Recorder:
    """Records one actor's batches. ``start()``, then ``record()`` after each round trip.
    With ``cpu`` (a ``rill.bench.cpu.CpuMeter`` of the server) it is sampled at ``start()`` and
    at ``finish()``: the result's ``server_cpu_seconds`` (a driver in the client's process
    measures the phase it runs)."""

    def __init__(self, actor: str, kind: str, bucket_seconds: float = DEFAULT_BUCKET_SECONDS,
                 cpu: Callable[[], float] | None = None):
        self.actor = actor
        self.cpu = cpu if cpu else None
        self._cpu_started = 0.0
        self.kind = kind
        self.bucket_seconds = bucket_seconds
        self.messages = 0
        self.bytes = 0
        self.latencies_us = array("d")
        self.timeline: dict[float, list[int]] = {}
        self._started_wall = 0.0
        self._started = 0.0

    def start(self) -> None:
        if self.cpu is not None:
            self._cpu_started = self.cpu()
        self._started_wall = time.time()
        self._started = time.perf_counter()

    def record(self, latency_seconds: float, messages: int, nbytes: int) -> None:
        """One batch round trip that just ended: its latency, messages and bytes."""
        self.messages += messages
        self.bytes += nbytes
        self.latencies_us.append(latency_seconds * 1e6)
        now = self._started_wall + (time.perf_counter() - self._started)
        bucket = math.floor(now / self.bucket_seconds) * self.bucket_seconds
        counts = self.timeline.get(bucket)
        if counts is None:
            self.timeline[bucket] = [messages, nbytes]
        else:
            counts[0] += messages
            counts[1] += nbytes

    def elapsed(self) -> float:
        return time.perf_counter() - self._started

    def finish(self) -> ActorResult:
        elapsed = self.elapsed()
        cpu = None if self.cpu is None else self.cpu() - self._cpu_started
        return ActorResult(
            self.actor, self.kind, self._started_wall, elapsed, self.messages,
            self.bytes, self.latencies_us, self.timeline, self.bucket_seconds, cpu,
        )


def throughput(messages: int, nbytes: int, seconds: float) -> dict[str, float]:
    if seconds <= 0:
        return {"msg_per_s": 0.0, "mb_per_s": 0.0}
    return {"msg_per_s": round(messages / seconds, 1), "mb_per_s": round(nbytes / seconds / 1e6, 3)}


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0–100) of already sorted values; 0.0 when empty."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def latency_summary(latencies_us: array | list[float]) -> dict[str, float]:
    """p50/p90/p99/p99.9, average and maximum in milliseconds."""
    ordered = sorted(latencies_us)
    summary = {name: round(percentile(ordered, q) / 1000.0, 4) for name, q in PERCENTILES}
    summary["avg"] = round(sum(ordered) / len(ordered) / 1000.0, 4) if ordered else 0.0
    summary["max"] = round(ordered[-1] / 1000.0, 4) if ordered else 0.0
    return summary


def latency_histogram(latencies_us: array | list[float]) -> list[list[float]]:
    """Log-spaced bins for the latency distribution chart: ``[[upper_ms, count], ...]``."""
    if not latencies_us:
        return []
    counts: dict[int, int] = {}
    for value in latencies_us:
        bin_index = math.ceil(math.log10(max(value, 1.0)) * HISTOGRAM_BINS_PER_DECADE)
        counts[bin_index] = counts.get(bin_index, 0) + 1
    low, high = min(counts), max(counts)
    return [
        [round(10 ** (index / HISTOGRAM_BINS_PER_DECADE) / 1000.0, 4), counts.get(index, 0)]
        for index in range(low, high + 1)
    ]


def _merged_timeline(actors: list[ActorResult], origin: float) -> list[list[float]]:
    """``[[seconds since origin, msg_per_s, mb_per_s], ...]`` over all given actors."""
    if not actors:
        return []
    step = actors[0].bucket_seconds
    origin = math.floor(origin / step) * step  # the first bucket starts at 0 s
    merged: dict[float, list[int]] = {}
    for actor in actors:
        for start, (messages, size) in actor.timeline.items():
            counts = merged.setdefault(start, [0, 0])
            counts[0] += messages
            counts[1] += size
    return [
        [round(start - origin, 3), round(messages / step, 1), round(size / step / 1e6, 3)]
        for start, (messages, size) in sorted(merged.items())
    ]


def _kind_summary(actors: list[ActorResult], origin: float) -> dict[str, Any]:
    started = min(actor.started_at for actor in actors)
    ended = max(actor.ended_at for actor in actors)
    messages = sum(actor.messages for actor in actors)
    size = sum(actor.bytes for actor in actors)
    latencies = array("d")
    for actor in actors:
        latencies.extend(actor.latencies_us)
    return {
        "actors": len(actors),
        "messages": messages,
        "bytes": size,
        "batches": len(latencies),
        "seconds": round(ended - started, 6),
        **throughput(messages, size, ended - started),
        "latency_ms": latency_summary(latencies),
        "latency_histogram": latency_histogram(latencies),
        "timeline": _merged_timeline(actors, origin),
    }


def server_cost(cpu_seconds: float | None, overall: dict[str, Any], message_size: int | None,
                pids: list[int] | None = None) -> dict[str, Any]:
    """The server's cost over a measured phase: its CPU seconds (user + system), per million
    messages and per GB of payload. The messages are the producers' when the phase has
    producers (each is written once, and read by whoever reads it), else the consumers';
    payload bytes are messages × ``message_size``."""
    kind = overall.get("producers") or overall.get("consumers") or {}
    messages = kind.get("messages", 0)
    return {**cost_figures(cpu_seconds, messages, messages * (message_size or 0)),
            "messages": messages, "measured": cpu_seconds is not None, "pids": pids or []}


def scenario_report(
    scenario: str, options: dict[str, Any], actors: list[ActorResult], target: str = "rill",
    server_cpu: float | None = None, server_pids: list[int] | None = None,
) -> dict[str, Any]:
    """JSON-ready result of one run: options, overall per kind, every actor, and the server's
    cost (``server_cpu``: its CPU seconds over the measured phase, None when not measured;
    with a single metered actor, that actor's)."""
    if server_cpu is None and len(actors) == 1:
        server_cpu = actors[0].server_cpu_seconds
    origin = min((actor.started_at for actor in actors), default=0.0)
    overall = {}
    for kind in ("producer", "consumer"):
        of_kind = [actor for actor in actors if actor.kind == kind]
        if of_kind:
            overall[kind + "s"] = _kind_summary(of_kind, origin)
    return {
        "scenario": scenario,
        "target": target,
        "options": options,
        "overall": overall,
        "server_cpu": server_cost(server_cpu, overall, options.get("message_size"), server_pids),
        "actors": [
            {**actor.summary(), "timeline": _merged_timeline([actor], origin)}
            for actor in sorted(actors, key=lambda actor: (actor.kind, actor.actor))
        ],
    }


def machine() -> dict[str, Any]:
    from rill import __version__

    return {
        "hostname": platform.node(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "rill": __version__,
    }


def new_report(title: str) -> dict[str, Any]:
    """An empty report: append to ``scenarios`` (scenario_report results), ``tables``
    (``{"title", "columns": [...], "rows": [[...], ...], "notes": [...]}``), ``curves``
    (``{"title", "x_label", "y_label", "series": {name: [[x, y], ...]}}``), ``summary`` (tables
    shown first: the report's conclusion; a cell may be a ratio, ``{"ratio", "text", "good",
    "title"}``) and ``bars`` (``{"title", "y_label", "groups": {group: {series: value}}}``)."""
    return {
        "tool": "rill bench",
        "title": title,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "summary": [],
        "bars": [],
        "scenarios": [],
        "tables": [],
        "curves": [],
    }


def write_json(report: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # compact: timelines are long arrays of numbers (jq or any JSON viewer pretty-prints)
    path.write_text(json.dumps(report, separators=(",", ":")) + "\n")
    return path
