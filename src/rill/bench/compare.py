"""``rill bench compare``: rill side by side with NATS JetStream, Redis Streams, a bare Python
server, and the machine's own figures.

Owns: ``run_compare`` (one workload — ``messages`` of ``message_size`` bytes in batches of
``batch``, one partition — for each fsync mode against each target, one after the other, each
server started, used and stopped here on 127.0.0.1; then the machine alone through
``rill.bench.machine``), the rich rendering of the report's tables, and writing the JSON and
HTML reports. What the report says (ratios, the conclusion, the chart, the tables) is
``rill.bench.compare_report``'s.

Targets: ``rill`` (``RillServer`` + the ``send`` then ``poll`` scenarios against it),
``nats``, ``redis`` and ``bare`` (``rill.bench.peers``), and the Kafka-protocol targets
``rill-kafka``, ``tansu`` and ``noida-db`` (``rill.bench.peers.kafka``, confluent-kafka as the
client), ``kafka-bare`` (a bare Python Kafka broker that stores,
``rill.bench.peers.kafka_bare``, the same client) and ``rill-kafka-wire`` (rill's Kafka listener
driven by rill's Kafka codec); ``rill bench kafka`` runs them beside ``rill``, with the machine
left out; and ``rill-tank`` (``rill.bench.peers.tank``, rill's TANK client; ``rill bench tank``).
A target that cannot be found or started becomes a row "not available: <reason>", one that
breaks mid-run a row "failed: <error>": never silently dropped. Ratios are always rill ÷
target on the same fsync mode.

Rounds: one run of a target is one draw of a noisy machine (a 2-core VM whose neighbours and
memory state move a run's MB/s by a quarter), so ``rounds`` > 1 runs every target that many
times, interleaved (round 1 of every target, then round 2, ...) so that a slow spell falls on
all of them, and each row holds the median of every figure over its rounds (``median_row``;
each round's figures stay in the row's ``rounds``). A target that could not run in a round is
not run again: its row says which round and why.

Report: ``new_report`` with every run as a scenario entry (``target`` = the peer, ``fsync`` and
``phase`` = publish/consume added), ``comparison`` (the rows as structured data, with
``rill_ratio``), ``machine_capability`` (the machine's rows), ``summary`` (the conclusion),
``bars`` (the side-by-side chart) and ``tables`` (the comparison and machine tables printed).
The disk measurement writes in the system's temporary directory, where every target's data
directory is made too.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from rill.bench.compare_report import CLIENTS, PHASES, finish_report
from rill.bench.cpu import cost_figures
from rill.bench.machine import measure_machine
from rill.bench.peers import (
    FSYNC_MODES,
    Peer,
    PeerUnavailable,
    Workload,
    run_async,
)
from rill.bench.peers.registry import peer_classes
from rill.bench.report_html import write_html
from rill.bench.results import new_report, scenario_report, write_json

TARGETS = ("rill", "nats", "redis", "bare")  # the default targets of ``rill bench compare``
KAFKA_TARGETS = (  # those of ``rill bench kafka``
    "rill", "rill-kafka-wire", "rill-kafka", "kafka-bare", "tansu", "noida-db")
TANK_TARGETS = ("rill", "rill-tank")  # those of ``rill bench tank``
KNOWN_TARGETS = tuple(dict.fromkeys(TARGETS + KAFKA_TARGETS + TANK_TARGETS))

Progress = Callable[[str], None]


class CompareError(ValueError):
    """Options ``run_compare`` cannot run; the message is one line for the person."""


def check_options(
    messages: int, message_size: int, batch: int, fsync_modes: tuple[str, ...] | list[str],
    peers: tuple[str, ...] | list[str], rounds: int = 1, round_trips: int = 0,
) -> None:
    if not isinstance(round_trips, int) or isinstance(round_trips, bool) or round_trips < 0:
        raise CompareError(f"round trips must be zero or a positive whole number (got {round_trips!r})")
    for name, value in (("messages", messages), ("message size", message_size), ("batch", batch),
                        ("rounds", rounds)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise CompareError(f"{name} must be a positive whole number (got {value!r})")
    if messages % batch and messages > batch:
        raise CompareError(f"messages ({messages}) must be a multiple of batch ({batch})")
    if not fsync_modes:
        raise CompareError("give at least one fsync mode")
    for mode in fsync_modes:
        if mode not in FSYNC_MODES:
            raise CompareError(f"unknown fsync mode {mode!r} (known: {', '.join(FSYNC_MODES)})")
    if not peers:
        raise CompareError("give at least one target")
    for peer in peers:
        if peer not in KNOWN_TARGETS:
            raise CompareError(f"unknown target {peer!r} (known: {', '.join(KNOWN_TARGETS)})")


# --- running one target -----------------------------------------------------------------------


def _run_rill(workload: Workload, workdir: Path) -> dict[str, dict[str, Any]]:
    """rill's publish and consume scenarios against one server it starts with this fsync (and
    the one-message round trips over Iggy, when the workload asks for them)."""
    try:
        from rill.bench.options import BenchOptions
        from rill.bench.scenarios import run_scenario
        from rill.bench.server import RillServer
    except ImportError as error:
        raise PeerUnavailable(f"rill's benchmark scenarios are missing ({error})") from error
    batch = min(workload.batch, workload.messages)
    try:
        server = RillServer(data_dir=workdir / "data", fsync=workload.fsync, transports=("tcp",))
        server.start()
    except Exception as error:  # ServerStartError and friends
        raise PeerUnavailable(f"rill server did not start: {error}") from error
    try:
        options = BenchOptions(
            producers=1, consumers=1, streams=1, partitions=1, consumer_groups=1,
            messages_per_batch=batch, message_size=workload.message_size,
            batches=math.ceil(workload.messages / batch), transport="tcp",
            server_address=server.addresses["tcp"], fsync=workload.fsync,
            cleanup=False, progress=False, server_pid=server.pid,
        )
        phases = {"publish": run_scenario("send", options), "consume": run_scenario("poll", options)}
        if workload.round_trips:
            phases["round_trip"] = _rill_round_trip(workload, options, server)
        return phases
    finally:
        server.stop()


def _rill_round_trip(workload: Workload, options: Any, server: Any) -> dict[str, Any]:
    from rill.bench.cpu import CpuMeter
    from rill.bench.results import Recorder
    from rill.bench.round_trip import iggy_round_trips

    recorder = Recorder("rill-round-trip", "producer", cpu=CpuMeter([server.pid]))
    result = run_async(lambda: iggy_round_trips(
        server.addresses["tcp"], options.stream_ids()[0], 1, workload.round_trips,
        workload.message_size, recorder))
    return scenario_report("round-trip", {**workload.to_dict(), "messages_per_batch": 1,
                                          "server": server.describe()},
                           [result], target="rill", server_pids=[server.pid])


def _run_peer(peer: Peer, workdir: Path) -> dict[str, dict[str, Any]]:
    peer.start(workdir)
    try:
        pids = peer.server_pids()
        producer = run_async(peer.publish)
        consumer = run_async(peer.consume)
        trips = run_async(peer.round_trip) if peer.workload.round_trips else None
        options = {**peer.workload.to_dict(), **peer.describe()}
    finally:
        peer.stop()
    phases = {
        "publish": scenario_report("send", options, [producer], target=peer.name, server_pids=pids),
        "consume": scenario_report("poll", options, [consumer], target=peer.name, server_pids=pids),
    }
    if trips is not None:
        phases["round_trip"] = scenario_report("round-trip", {**options, "messages_per_batch": 1},
                                               [trips], target=peer.name, server_pids=pids)
    return phases


def run_target(target: str, workload: Workload, workdir: Path) -> dict[str, dict[str, Any]]:
    """The scenarios of one target by phase (``publish``, ``consume``, and ``round_trip`` when
    the workload asks for round trips and the target has them); PeerUnavailable when it
    cannot run."""
    if target == "rill":
        return _run_rill(workload, workdir)
    return _run_peer(peer_classes()[target](workload), workdir)


# --- the table --------------------------------------------------------------------------------


def _figures(scenario: dict[str, Any], kind: str, message_size: int) -> dict[str, Any] | None:
    """The row's figures. MB/s counts payload bytes for every target alike (rill's own reports
    count the bytes of the encoded messages: kept as ``reported_mb_per_s``); the server's cost
    (``cpu_s``, ``cpu_s_per_million``, ``cpu_s_per_gb``: None when it was not measured) counts
    every server process the target started, over the measured phase only."""
    overall = scenario.get("overall", {}).get(kind)
    if not overall:
        return None
    messages = overall["messages"]
    cpu = (scenario.get("server_cpu") or {}).get("cpu_s")
    return {
        **cost_figures(cpu, messages, messages * message_size),
        "messages": overall["messages"],
        "seconds": overall["seconds"],
        "msg_per_s": overall["msg_per_s"],
        "mb_per_s": round(overall["msg_per_s"] * message_size / 1e6, 3),
        "reported_mb_per_s": overall["mb_per_s"],
        "p50_ms": overall["latency_ms"]["p50"],
        "p99_ms": overall["latency_ms"]["p99"],
        "max_ms": overall["latency_ms"]["max"],
    }


# --- the run ----------------------------------------------------------------------------------


def run_compare(
    messages: int,
    message_size: int = 1000,
    batch: int = 1000,
    fsync_modes: tuple[str, ...] | list[str] = ("interval", "always"),
    peers: tuple[str, ...] | list[str] = TARGETS,
    progress: bool = True,
    output_dir: str | Path | None = None,
    console: Any = None,
    machine: bool = True,
    report_name: str = "compare",
    rounds: int = 1,
    round_trips: int = 0,
) -> dict[str, Any]:
    """Run the workload against every target for every fsync mode (``rounds`` times,
    interleaved: see the module doc), then (``machine``) measure the machine alone; print the
    tables (rich) and, with ``output_dir``, write ``<report_name>.json`` and
    ``<report_name>.html`` there. With ``round_trips``, every target that has a round-trip
    driver then measures that many one-message round trips (produce → tailing consumer,
    ``rill.bench.round_trip``) on the same server. Returns the report."""
    fsync_modes, peers = tuple(fsync_modes), tuple(dict.fromkeys(peers))
    check_options(messages, message_size, batch, fsync_modes, peers, rounds, round_trips)
    batch = min(batch, messages)
    say = _progress(console, progress)
    report = new_report(f"rill bench {report_name}")
    report["workload"] = {"messages": messages, "message_size": message_size, "batch": batch,
                          "fsync_modes": list(fsync_modes), "targets": list(peers),
                          "rounds": rounds, "round_trips": round_trips}
    comparison: list[dict[str, Any]] = []
    for fsync in fsync_modes:
        workload = Workload(messages, message_size, batch, fsync, round_trips)
        measured: dict[str, list[dict[str, Any]]] = {target: [] for target in peers}
        for number in range(1, rounds + 1):
            round_name = f" · round {number} of {rounds}" if rounds > 1 else ""
            for target in peers:
                if measured[target] and measured[target][-1]["status"] != "ok":
                    continue  # it could not run: it is not tried again
                say(f"{target} (fsync {fsync}{round_name}): {messages:,} × {message_size:,} B ...")
                measured[target].append(_measure(target, workload, report, say, round_name))
        comparison.extend(median_row(measured[target]) for target in peers)
    capabilities = []
    if machine:
        say("the machine alone: loopback TCP (iperf3), disk sequential write + fdatasync ...")
        capabilities = [row.to_dict() for row in measure_machine(fsync_modes)]
    finish_report(report, comparison, capabilities)
    print_table(report, console)
    if output_dir is not None:
        paths = write_reports(report, output_dir, report_name)
        say(f"reports: {paths[0]} and {paths[1]}")
    return report


def _measure(target: str, workload: Workload, report: dict[str, Any], say: Progress,
             round_name: str = "") -> dict[str, Any]:
    row: dict[str, Any] = {"target": target, "fsync": workload.fsync, "client": CLIENTS[target],
                           "status": "ok", "reason": None, "publish": None, "consume": None,
                           "round_trip": None}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"rill-compare-{target}-") as workdir:
        try:
            phases = run_target(target, workload, Path(workdir))
        except PeerUnavailable as unavailable:
            row.update(status="not available", reason=unavailable.reason)
        except Exception as error:  # a peer that broke mid-run is a row too, never dropped
            row.update(status="failed", reason=f"{type(error).__name__}: {error}")
    if row["status"] != "ok":
        say(f"  {target}: {row['status']}: {row['reason']}")
        return row
    for phase, scenario in phases.items():
        scenario["target"] = target
        scenario["fsync"] = workload.fsync
        scenario["phase"] = phase.replace("_", "-")
        scenario["label"] = f"{target} · fsync {workload.fsync} · {phase.replace('_', ' ')}{round_name}"
        report["scenarios"].append(scenario)
    row["publish"] = _figures(phases["publish"], "producers", workload.message_size)
    row["consume"] = _figures(phases["consume"], "consumers", workload.message_size)
    if "round_trip" in phases:
        row["round_trip"] = _figures(phases["round_trip"], "producers", workload.message_size)
    if row["publish"] is None or row["consume"] is None:
        row.update(status="failed", reason="the run reported no producer or consumer figures")
    else:
        trips = row["round_trip"]
        trip_words = f", round trip p50 {trips['p50_ms']:.3f} ms" if trips else ""
        say(f"  {target}: publish {row['publish']['msg_per_s']:,.0f} msg/s, consume "
            f"{row['consume']['msg_per_s']:,.0f} msg/s{trip_words} ({time.perf_counter() - started:.1f} s)")
    return row


def median_row(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One target's row from its rounds' rows: the round that did not run, as it is with its
    round named; else every figure's median over the rounds, each round's figures kept in
    ``rounds`` (one round: its row unchanged)."""
    if len(rounds) == 1:
        return rounds[0]
    for number, row in enumerate(rounds, 1):
        if row["status"] != "ok":
            return {**row, "reason": f"round {number}: {row['reason']}"}
    phases = [*PHASES, *(["round_trip"] if all(one.get("round_trip") for one in rounds) else [])]
    row = {**rounds[0], "rounds": [{phase: one.get(phase) for phase in (*PHASES, "round_trip")}
                                   for one in rounds]}
    for phase in phases:
        row[phase] = {figure: _median([one[phase][figure] for one in rounds])
                      for figure in rounds[0][phase]}
    if len(phases) == len(PHASES):
        row["round_trip"] = None
    return row


def _median(values: list[Any]) -> Any:
    """The median of the rounds that have the figure (a cost not measured is None)."""
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None


def _progress(console: Any, enabled: bool) -> Progress:
    if not enabled:
        return lambda line: None
    from rich.console import Console

    err = Console(stderr=True) if console is None else console

    def say(line: str) -> None:
        err.print(line, highlight=False, markup=False)

    return say


def print_table(report: dict[str, Any], console: Any = None) -> None:
    """The report's conclusion, then its tables, with rich (the client column is left to the
    notes: too wide)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=None if Console().is_terminal else 200)
    for spec in [*report.get("summary", []), *report["tables"]]:
        table = Table(title=spec["title"], title_justify="left")
        shown = [index for index, column in enumerate(spec["columns"]) if column != "client"]
        for index in shown:
            column = spec["columns"][index]
            if index < 2:
                table.add_column(column, no_wrap=True)
            elif column == "publish msg/s":  # also carries "not available: <reason>"
                table.add_column(column, justify="right", overflow="fold", max_width=44)
            else:
                table.add_column(column, justify="right", overflow="fold")
        for row in spec["rows"]:
            table.add_row(*[_cell(row[index]) for index in shown])
        console.print(table)
        for note in spec.get("notes", []):
            console.print(f"  {note}", highlight=False, markup=False)


def _cell(value: Any) -> str:
    if isinstance(value, dict):  # a ratio cell of the conclusion
        return str(value.get("text", value.get("ratio")))
    if isinstance(value, float):
        return f"{value:,.1f}" if value >= 100 else f"{value:,.3g}" if value < 1 else f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def write_reports(report: dict[str, Any], output_dir: str | Path,
                  report_name: str = "compare") -> tuple[Path, Path]:
    """``compare.json`` and ``compare.html`` (or ``<report_name>.*``) in ``output_dir``
    (created when missing)."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    json_path = write_json(report, output_dir / f"{report_name}.json")
    html_path = write_html(report, output_dir / f"{report_name}.html")
    return json_path, html_path
