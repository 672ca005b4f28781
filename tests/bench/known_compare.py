"""A ``rill bench compare`` report built from known figures (no benchmark runs): the rows
``run_compare`` measures, one per target and fsync mode, and the machine's rows."""

from __future__ import annotations

from typing import Any

from rill.bench.compare_report import finish_report
from rill.bench.results import new_report

# target -> fsync -> (publish msg/s, p50 ms, p99 ms, consume msg/s, p50 ms, p99 ms)
FIGURES = {
    "rill": {"interval": (1_072_579, 0.9, 2.55, 2_765_923, 0.3, 0.99),
             "always": (720_113, 1.2, 2.06, 2_891_660, 0.3, 0.58)},
    "nats": {"interval": (40_639, 20.0, 44.4, 47_015, 18.0, 35.4),
             "always": (5_605, 150.0, 246.7, 47_173, 20.0, 28.7)},
    "redis": {"interval": (93_108, 9.0, 28.3, 457_948, 2.0, 22.4),
              "always": (42_207, 20.0, 40.5, 376_580, 2.5, 29.1)},
    "bare": {"interval": (2_469_427, 0.35, 0.70, 4_357_782, 0.2, 0.31),
             "always": (402_000, 2.4, 3.1, 3_894_845, 0.25, 0.51)},  # rill beats it here: 1.79×
}
TARGETS = tuple(FIGURES)
SIZE = 1000
CAPABILITIES = [
    {"name": "loopback_tcp", "label": "machine: loopback TCP (iperf3)",
     "how": "iperf3, 1 TCP stream over 127.0.0.1 for 2 s, bytes received per second",
     "mb_per_s": 2935.9, "fsync": None, "reason": None},
    {"name": "disk_write", "label": "machine: disk sequential write + fdatasync",
     "how": "sequential write of 128 × 1 MiB blocks to a new file, fdatasync at the end",
     "mb_per_s": 1562.3, "fsync": "interval", "reason": None},
    {"name": "disk_write", "label": "machine: disk sequential write + fdatasync",
     "how": "sequential write of 128 × 1 MiB blocks to a new file, fdatasync after every block",
     "mb_per_s": 1222.3, "fsync": "always", "reason": None},
]


def _phase(msg_per_s: int, p50: float, p99: float) -> dict[str, Any]:
    return {"messages": 1_000_000, "seconds": 1_000_000 / msg_per_s, "msg_per_s": float(msg_per_s),
            "mb_per_s": round(msg_per_s * SIZE / 1e6, 3), "reported_mb_per_s": msg_per_s * SIZE / 1e6,
            "p50_ms": p50, "p99_ms": p99}


def known_row(target: str, fsync: str) -> dict[str, Any]:
    publish, p50, p99, consume, c50, c99 = FIGURES[target][fsync]
    return {"target": target, "fsync": fsync, "client": "", "status": "ok", "reason": None,
            "publish": _phase(publish, p50, p99), "consume": _phase(consume, c50, c99)}


def known_rows() -> list[dict[str, Any]]:
    """Every target on each fsync mode, in ``run_compare``'s order."""
    return [known_row(target, fsync) for fsync in ("interval", "always") for target in TARGETS]


def known_report(capabilities: list[dict[str, Any]] | None = None,
                 rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The report ``run_compare`` would write for these figures (no scenarios: none ran)."""
    report = new_report("rill bench compare")
    report["workload"] = {"messages": 1_000_000, "message_size": SIZE, "batch": 1000,
                          "fsync_modes": ["interval", "always"], "targets": list(TARGETS)}
    rows = known_rows() if rows is None else rows
    finish_report(report, rows, CAPABILITIES if capabilities is None else capabilities)
    return report
