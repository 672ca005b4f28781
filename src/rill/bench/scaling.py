"""``rill bench scaling``: how throughput grows with actors and partitions -- the scaling curve.

Owns: ``run_scaling(options, counts, scenarios)``: for each count N it runs ``send`` with N
producers and ``poll`` with N consumers on one stream of N partitions (each actor its own
process, so N actors can use N cores), against one server for the whole sweep (started here
unless ``server_address`` names one; the bench streams are deleted between points so every
point starts empty). It returns the scenario reports, a table (MB/s, msg/s, p50/p99/p99.9 and
the speed-up over the first count) and two curves (msg/s and MB/s against N, one line per
scenario) for the report.

Reading the curve: rill serves every connection from one event loop, so more producers help
only until that loop is busy; the curve shows where that happens on this machine.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from rill.bench.options import BenchOptions, OptionsError, validate
from rill.bench.scenarios import run_on
from rill.bench.server import RillServer

SCALING_SCENARIOS = ("send", "poll")


def point_options(options: BenchOptions, count: int) -> BenchOptions:
    """The options of one point: N producers/consumers on one stream with N partitions."""
    return dataclasses.replace(options, producers=count, consumers=count, partitions=count, streams=1)


def run_scaling(options: BenchOptions, counts: list[int], scenarios: tuple[str, ...] = SCALING_SCENARIOS,
                on_point: Callable[[str, int, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run the sweep; returns {"scenarios": [...], "tables": [table], "curves": [msg/s, MB/s]}."""
    if not counts or any(not isinstance(count, int) or count < 1 for count in counts):
        raise OptionsError(f"--producers must list positive whole numbers, e.g. 1,2,4,8 (got {counts})")
    unknown = [name for name in scenarios if name not in SCALING_SCENARIOS]
    if unknown or not scenarios:
        raise OptionsError(f"scaling runs {' and '.join(SCALING_SCENARIOS)} (got {', '.join(scenarios) or 'none'})")
    counts = sorted(dict.fromkeys(counts))
    for count in counts:
        for name in scenarios:
            validate(name, point_options(options, count))
    if options.server_address is not None:
        return _sweep(options, counts, scenarios, options.server_address,
                      f"existing server {options.server_address}", on_point)
    with RillServer(fsync=options.fsync, transports=(options.transport,)) as server:
        return _sweep(options, counts, scenarios, server.addresses[options.transport], server.describe(), on_point)


def _sweep(options: BenchOptions, counts: list[int], scenarios: tuple[str, ...], address: str, label: str,
           on_point: Callable[[str, int, dict[str, Any]], None] | None) -> dict[str, Any]:
    reports: list[dict[str, Any]] = []
    points: dict[str, list[tuple[int, dict[str, Any]]]] = {name: [] for name in scenarios}
    for count in counts:
        for name in scenarios:
            # every point cleans up after itself so the next one starts from empty streams
            report = run_on(name, point_options(options, count), address, label, cleanup=True)
            report["label"] = f"{name} × {count}"
            reports.append(report)
            kind = "producers" if name == "send" else "consumers"
            points[name].append((count, report["overall"][kind]))
            if on_point is not None:
                on_point(name, count, report)
    return {"scenarios": reports, "tables": [_table(options, points)], "curves": _curves(points)}


def _table(options: BenchOptions, points: dict[str, list[tuple[int, dict[str, Any]]]]) -> dict[str, Any]:
    rows = []
    for name, measured in points.items():
        base = measured[0][1]["msg_per_s"] if measured else 0
        for count, summary in measured:
            latency = summary["latency_ms"]
            speedup = round(summary["msg_per_s"] / base, 2) if base else None
            rows.append([name, count, count, summary["mb_per_s"], summary["msg_per_s"], latency["p50"],
                         latency["p99"], latency["p999"], speedup])
    size = (f"{options.duration} s per actor" if options.duration is not None
            else f"{options.batches} batches per actor")
    return {
        "title": "Scaling: throughput against actors and partitions",
        "columns": ["scenario", "actors", "partitions", "MB/s", "msg/s", "p50 ms", "p99 ms", "p99.9 ms",
                    "× first"],
        "rows": rows,
        "notes": [
            "Each point: N producers (send) or N consumers (poll), each in its own process, on one "
            "stream with N partitions; consumers read their own partition by offset.",
            f"{size}, {options.messages_per_batch} messages × {options.message_size} B per batch, "
            f"transport {options.transport}, fsync {options.fsync}.",
            "One server for the whole sweep; the bench streams are deleted after each point. "
            "'× first' is msg/s relative to the smallest N.",
        ],
    }


def _curves(points: dict[str, list[tuple[int, dict[str, Any]]]]) -> list[dict[str, Any]]:
    return [
        {"title": "Scaling: messages per second against actors", "x_label": "actors (= partitions)",
         "y_label": "msg/s",
         "series": {name: [[count, summary["msg_per_s"]] for count, summary in measured]
                    for name, measured in points.items()}},
        {"title": "Scaling: MB per second against actors", "x_label": "actors (= partitions)",
         "y_label": "MB/s",
         "series": {name: [[count, summary["mb_per_s"]] for count, summary in measured]
                    for name, measured in points.items()}},
    ]
