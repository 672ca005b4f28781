"""``rill bench send|poll|send-and-poll|consumer-group-poll|scaling|cluster``: the benchmark tool.

Owns: the ``bench`` command group. Each scenario verb turns its flags into
``rill.bench.options.BenchOptions``, runs ``rill.bench.scenarios.run_scenario`` (a server of its
own unless ``--server-address`` names one), prints a table of the results and writes the report
as JSON and as a self-contained HTML page (``<scenario>-<UTC timestamp>.json/.html`` in
``--output-dir``). ``scaling`` sweeps the number of producers (= consumers = partitions) and
adds the scaling curve to the report. ``cluster`` starts a local 3-node cluster (or uses
``--http``'s) and reports throughput at RF 1 and RF 3 and the failover time (``rill.bench.cluster``).
With the global ``--json`` the report itself is printed
on stdout instead of the table.

Failures follow ``rill.cli.failures``: an option that cannot work is one ``error:`` line and
exit 2; an error the server answered or a lost connection is reported as for any other verb
(exit 1 or 3); a run that could not complete (an actor crashed, the server did not start) is
exit 1.
"""

from __future__ import annotations

import inspect
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from rill.cli import bench_compare
from rill.cli.failures import EXIT_ERROR, EXIT_USAGE, fail
from rill.cli.output import Output
from rill.cli.params import examples

app = typer.Typer(
    name="bench",
    help="Benchmark a rill server: throughput (MB/s, msg/s) and batch latency percentiles, "
    "with JSON and HTML reports.",
    no_args_is_help=True,
)

DEFAULT_OUTPUT_DIR = Path("bench-results")
SMALL_REQUEST = (100, 100)  # --small-requests: messages per request, payload bytes
SUMMARY_COLUMNS = ("Actor", "Messages", "MB/s", "msg/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms")

SCENARIO_HELP = {
    "send": "Producers send batches to their streams; measures the write path.",
    "poll": "Consumers read their partitions by offset (seeding data first when there is not enough).",
    "send-and-poll": "Producers and consumers at the same time: consumers read what producers write.",
    "consumer-group-poll": "Consumer-group members poll without a partition id; the server spreads the partitions.",
    "round-trip": "One message at a time, produce → a consumer tailing with rill's long poll; --batches round "
                  "trips, p50/p99 of each.",
}
SCENARIO_EXAMPLES = {
    "send": ("rill bench send", "rill bench send --producers 4 --partitions 4 --batches 500",
             "rill bench send --producers 2 --streams 2 --duration 30 --warmup 2 --fsync always",
             "rill bench send --transport quic --server-address 127.0.0.1:8080 --no-progress"),
    "poll": ("rill bench poll", "rill bench poll --consumers 2 --streams 2 --messages-per-batch 100",
             "rill bench poll --server-address 127.0.0.1:8090 --duration 20"),
    "send-and-poll": ("rill bench send-and-poll --producers 2 --consumers 2 --streams 2",
                      "rill bench send-and-poll --transport http --message-size 200"),
    "consumer-group-poll": ("rill bench consumer-group-poll --consumers 4 --partitions 4",
                            "rill bench consumer-group-poll --consumers 4 --consumer-groups 2 --partitions 2"),
    "round-trip": ("rill bench round-trip", "rill bench round-trip --batches 5000 --message-size 100",
                   "rill bench round-trip --fsync always --transport quic"),
}


def _report_paths(output_dir: Path, stem: str) -> tuple[Path, Path]:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = output_dir / f"{stem}-{stamp}"
    return base.with_suffix(".json"), base.with_suffix(".html")


def _write_report(report: dict[str, Any], output_dir: Path, stem: str, json_only: bool) -> list[Path]:
    from rill.bench.report_html import write_html
    from rill.bench.results import write_json

    json_path, html_path = _report_paths(output_dir, stem)
    written = [write_json(report, json_path)]
    if not json_only:
        written.append(write_html(report, html_path))
    return written


def _print_scenario(out: Output, scenario: dict[str, Any]) -> None:
    from rill.bench.report_html import actor_order
    def row(name: str, summary: dict[str, Any]) -> tuple[Any, ...]:
        latency = summary.get("latency_ms") or {}
        return (name, f"{summary['messages']:,}", f"{summary['mb_per_s']:,.2f}", f"{summary['msg_per_s']:,.0f}",
                *(f"{latency.get(key, 0):.3f}" for key in ("p50", "p90", "p99", "p999", "max")))

    overall = sorted(scenario["overall"].items(), key=lambda item: item[0] != "producers")
    rows = [row(f"all {kind} ({summary['actors']})", summary) for kind, summary in overall]
    rows += [row(actor["actor"], actor) for actor in sorted(scenario["actors"], key=actor_order)]
    options = scenario["options"]
    title = (f"{scenario.get('label') or scenario['scenario']}: {options['transport']}, "
             f"{options.get('server', '')}")
    out.table(SUMMARY_COLUMNS, rows, title=title)
    cost = scenario.get("server_cpu") or {}
    if cost.get("measured"):
        out.console.print(
            f"server CPU (user + system): {cost['cpu_s']:.3f} s, "
            f"{_number(cost['cpu_s_per_million'])} s per million messages, "
            f"{_number(cost['cpu_s_per_gb'])} s per GB of payload", highlight=False)
    elif cost:
        out.console.print("server CPU: not measured (an existing server without --server-pid)",
                          highlight=False)


def _number(value: Any) -> str:
    if isinstance(value, dict) and "ratio" in value:  # a ratio cell of a report's summary
        return str(value.get("text", value["ratio"]))
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return "—" if value is None else str(value)


def _finish(ctx: typer.Context, report: dict[str, Any], output_dir: Path, stem: str, json_only: bool,
            print_scenarios: bool = True) -> None:
    settings = ctx.obj
    out = Output(getattr(settings, "json_mode", False), getattr(settings, "quiet", False))
    try:
        paths = _write_report(report, output_dir, stem, json_only)
    except OSError as error:
        raise fail(f"cannot write the report to {output_dir}: {error.strerror or error}", EXIT_ERROR) from None
    if out.json_mode:
        out.json(report)
        for path in paths:
            sys.stderr.write(f"wrote {path}\n")
        return
    for scenario in report["scenarios"] if print_scenarios else ():
        _print_scenario(out, scenario)
    for table in [*report.get("summary", ()), *report["tables"]]:
        out.table(table["columns"], ([_number(value) for value in row] for row in table["rows"]), title=table["title"])
    for path in paths:
        out.console.print(f"{'HTML' if path.suffix == '.html' else 'JSON'} report: {path}", highlight=False)


def _show_progress(ctx: typer.Context, no_progress: bool) -> bool:
    settings = ctx.obj
    return not (no_progress or getattr(settings, "quiet", False) or getattr(settings, "json_mode", False))


def _run_guarded(ctx: typer.Context, address: str | None, action: Callable[[], Any]) -> Any:
    """Run a bench action; its own failures become one error line (RillError is left to the
    app's failure handler, which knows the exit codes)."""
    from rill.bench.cluster_kafka import KafkaBenchError
    from rill.bench.options import OptionsError
    from rill.bench.runner import BenchError
    from rill.bench.server import ServerStartError

    if ctx.obj is not None and address:
        ctx.obj.subject["address"] = address
    try:
        return action()
    except OptionsError as error:
        raise fail(str(error), EXIT_USAGE) from None
    except (BenchError, ServerStartError, KafkaBenchError) as error:
        raise fail(str(error), EXIT_ERROR) from None


# --- the four scenario verbs ---------------------------------------------------------------------


_ALL = frozenset(SCENARIO_HELP)
_BATCHED = _ALL - {"round-trip"}  # round-trip: one message per request, counted by --batches
_WITH_PRODUCERS = frozenset({"send", "send-and-poll"})
_WITH_CONSUMERS = frozenset({"poll", "send-and-poll", "consumer-group-poll"})

# (parameter, type, typer option, scenarios that take it): one table, so each verb shows only
# the flags that mean something for it
_FLAGS: tuple[tuple[str, Any, Any, frozenset[str]], ...] = (
    ("producers", int, typer.Option(1, "--producers", help="Producers, each in its own process."),
     _WITH_PRODUCERS),
    ("consumers", int, typer.Option(1, "--consumers", help="Consumers, each in its own process."),
     _WITH_CONSUMERS),
    ("streams", int, typer.Option(1, "--streams", help="Bench streams (ids from --start-stream-id + 1)."), _BATCHED),
    ("partitions", int, typer.Option(1, "--partitions", help="Partitions of topic 1 of each stream."), _BATCHED),
    ("consumer_groups", int, typer.Option(1, "--consumer-groups", help="Consumer groups (cg-1, cg-2, ...)."),
     frozenset({"consumer-group-poll"})),
    ("messages_per_batch", int, typer.Option(1000, "--messages-per-batch", "-m", help="Messages in each batch."),
     _BATCHED),
    ("small_requests", bool, typer.Option(
        False, "--small-requests", help="Small requests: 100 messages of 100 B per batch (sets --messages-per-batch "
        "and --message-size)."), frozenset({"send", "poll", "send-and-poll"})),
    ("message_size", int, typer.Option(1000, "--message-size", help="Payload bytes of each message."), _ALL),
    ("batches", int, typer.Option(1000, "--batches", "-b", help="Batches per actor (ignored with --duration); "
                                  "round-trip: round trips."), _ALL),
    ("duration", Optional[float], typer.Option(None, "--duration", "-d",
                                               help="Seconds each actor runs (wins over --batches)."), _BATCHED),
    ("warmup", float, typer.Option(0.0, "--warmup", "-w", help="Seconds of untimed traffic before measuring."),
     _BATCHED),
    ("transport", str, typer.Option("tcp", "--transport", metavar="tcp|quic|http", help="Client transport."),
     _ALL),
    ("server_address", Optional[str], typer.Option(
        None, "--server-address", help="HOST:PORT of a running server (default: start one)."), _ALL),
    ("fsync", str, typer.Option("interval", "--fsync", metavar="never|interval|always",
                                help="fsync policy of the server the benchmark starts."), _ALL),
    ("ca_file", Optional[str], typer.Option(
        None, "--ca-file", help="Trust this certificate for QUIC (a server the benchmark starts: "
        "its own)."), _ALL),
    ("insecure", bool, typer.Option(False, "--insecure",
                                    help="Do not verify the server's QUIC certificate."), _ALL),
    ("username", str, typer.Option("iggy", "--username", "-u", help="User every actor logs in as."), _ALL),
    ("password", str, typer.Option("iggy", "--password", help="Password of --username."), _ALL),
    ("start_stream_id", int, typer.Option(3_000_000, "--start-stream-id", help="Streams are this + 1, + 2, ..."),
     _ALL),
    ("server_pid", Optional[int], typer.Option(
        None, "--server-pid", help="The process id of --server-address's server, to report its CPU "
        "(a server the benchmark starts is measured anyway)."), _ALL),
    ("keep_streams", bool, typer.Option(False, "--keep-streams",
                                        help="Do not delete the bench streams of --server-address at the end."),
     _ALL),
    ("shared_streams", bool, typer.Option(False, "--shared-streams",
                                          help="Let actors share a stream without a partition each."), _BATCHED),
    ("output_dir", Path, typer.Option(DEFAULT_OUTPUT_DIR, "--output-dir", help="Where the reports go."), _ALL),
    ("json_only", bool, typer.Option(False, "--json-only", help="Write the JSON report only (no HTML)."), _ALL),
    ("no_progress", bool, typer.Option(False, "--no-progress", help="No live progress display."), _ALL),
)


def _scenario_command(name: str) -> Callable[..., None]:
    def command(ctx: typer.Context, **flags: Any) -> None:
        from rill.bench.options import BenchOptions
        from rill.bench.results import new_report
        from rill.bench.scenarios import run_scenario

        defaults = {parameter: option.default for parameter, _, option, _ in _FLAGS}
        values = {**defaults, **flags}
        if values["small_requests"]:
            values.update(messages_per_batch=SMALL_REQUEST[0], message_size=SMALL_REQUEST[1])
        options = BenchOptions(
            producers=values["producers"], consumers=values["consumers"], streams=values["streams"],
            partitions=values["partitions"], consumer_groups=values["consumer_groups"],
            messages_per_batch=values["messages_per_batch"], message_size=values["message_size"],
            batches=values["batches"], duration=values["duration"], warmup=values["warmup"],
            transport=values["transport"].lower(), server_address=values["server_address"],
            fsync=values["fsync"].lower(), username=values["username"], password=values["password"],
            start_stream_id=values["start_stream_id"], cleanup=not values["keep_streams"],
            progress=_show_progress(ctx, values["no_progress"]), shared_streams=values["shared_streams"],
            ca_file=values["ca_file"], verify_certificate=not values["insecure"],
            server_pid=values["server_pid"],
        )
        scenario = _run_guarded(ctx, values["server_address"], lambda: run_scenario(name, options))
        report = new_report(f"rill bench {name}")
        report["scenarios"].append(scenario)
        _finish(ctx, report, values["output_dir"], name, values["json_only"])

    parameters = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    parameters += [
        inspect.Parameter(parameter, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
        for parameter, kind, option, scenarios in _FLAGS if name in scenarios
    ]
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__name__ = f"bench_{name.replace('-', '_')}"
    command.__doc__ = SCENARIO_HELP[name]
    return command


for _name in SCENARIO_HELP:
    app.command(_name, epilog=examples(*SCENARIO_EXAMPLES[_name]))(_scenario_command(_name))
del _name


# --- scaling ---------------------------------------------------------------------------------------


def _counts(value: str) -> list[int]:
    try:
        counts = [int(part) for part in value.replace(" ", "").split(",") if part]
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a comma-separated list of whole numbers, e.g. 1,2,4,8") from None
    return counts


@app.command("scaling", epilog=examples(
    "rill bench scaling", "rill bench scaling --producers 1,2,4,8 --batches 200",
    "rill bench scaling --producers 1,2,4 --scenarios send --duration 10 --fsync never",
))
def scaling(
    ctx: typer.Context,
    producers: str = typer.Option("1,2,4,8", "--producers",
                                  help="Actor counts to sweep (producers = consumers = partitions)."),
    scenarios: str = typer.Option("send,poll", "--scenarios", help="Which of send,poll to sweep."),
    messages_per_batch: int = typer.Option(1000, "--messages-per-batch", "-m", help="Messages in each batch."),
    message_size: int = typer.Option(1000, "--message-size", help="Payload bytes of each message."),
    batches: int = typer.Option(200, "--batches", "-b", help="Batches per actor (ignored with --duration)."),
    duration: Optional[float] = typer.Option(None, "--duration", "-d", help="Seconds each actor runs."),
    warmup: float = typer.Option(0.0, "--warmup", "-w", help="Seconds of untimed traffic before measuring."),
    transport: str = typer.Option("tcp", "--transport", metavar="tcp|quic|http", help="Client transport."),
    server_address: Optional[str] = typer.Option(
        None, "--server-address", help="HOST:PORT of a running server (default: start one)."),
    fsync: str = typer.Option("interval", "--fsync", metavar="never|interval|always",
                              help="fsync policy of the server the benchmark starts."),
    username: str = typer.Option("iggy", "--username", "-u", help="User every actor logs in as."),
    password: str = typer.Option("iggy", "--password", help="Password of --username."),
    start_stream_id: int = typer.Option(3_000_000, "--start-stream-id", help="The bench stream is this + 1."),
    output_dir: Path = typer.Option(DEFAULT_OUTPUT_DIR, "--output-dir", help="Where the reports go."),
    json_only: bool = typer.Option(False, "--json-only", help="Write the JSON report only (no HTML)."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No live progress display."),
) -> None:
    """Sweep producers (send) and consumers (poll) over 1..N, one partition each: the scaling curve."""
    from rill.bench.options import BenchOptions
    from rill.bench.results import new_report
    from rill.bench.scaling import run_scaling

    counts = _counts(producers)
    options = BenchOptions(
        messages_per_batch=messages_per_batch, message_size=message_size, batches=batches,
        duration=duration, warmup=warmup, transport=transport.lower(), server_address=server_address,
        fsync=fsync.lower(), username=username, password=password, start_stream_id=start_stream_id,
        cleanup=True, progress=_show_progress(ctx, no_progress),
    )
    names = tuple(name.strip() for name in scenarios.split(",") if name.strip())
    result = _run_guarded(ctx, server_address, lambda: run_scaling(options, counts, names))
    report = new_report("rill bench scaling")
    for key in ("scenarios", "tables", "curves"):
        report[key].extend(result[key])
    _finish(ctx, report, output_dir, "scaling", json_only)


# --- cluster ---------------------------------------------------------------------------------------


@app.command("cluster", epilog=examples(
    "rill bench cluster", "rill bench cluster --runs 3 --failovers 3",
    "rill bench cluster --etcd-members 1 --batches 20 --runs 1 --failovers 1",
    "rill bench cluster --http 127.0.0.1:3001 --bootstrap 127.0.0.1:9092 --failovers 0",
))
def cluster(
    ctx: typer.Context,
    messages_per_batch: int = typer.Option(1000, "--messages-per-batch", "-m", help="Messages in each batch."),
    message_size: int = typer.Option(1000, "--message-size", help="Payload bytes of each message."),
    batches: int = typer.Option(100, "--batches", "-b", help="Batches per producer."),
    producers_per_partition: int = typer.Option(
        1, "--producers-per-partition", help="Iggy producers on each partition (each has one SEND in "
        "flight)."),
    in_flight: int = typer.Option(
        1, "--in-flight", help="Batches each Kafka producer keeps unanswered at most (1 waits for "
        "each answer, as the Iggy producers do; Kafka's Java client allows 5)."),
    runs: int = typer.Option(3, "--runs", help="Runs of every throughput case (the table shows medians)."),
    failovers: Optional[int] = typer.Option(
        None, "--failovers", help="Leader kill cycles (default 1; 0 with --http: a cluster the bench "
        "did not start is never killed)."),
    etcd_members: int = typer.Option(3, "--etcd-members", help="Members of the etcd the bench starts (1 or 3)."),
    http: Optional[str] = typer.Option(None, "--http", help="HOST:PORT of any node's HTTP API of an existing "
                                       "cluster (default: start a local one)."),
    bootstrap: Optional[str] = typer.Option(None, "--bootstrap", help="HOST:PORT of the existing cluster's "
                                            "Kafka listener (default: one from GET /cluster)."),
    protocols: str = typer.Option("iggy,kafka", "--protocols", help="Which of iggy,kafka to measure."),
    fsync: str = typer.Option("interval", "--fsync", metavar="never|interval|always",
                              help="fsync policy of the nodes the benchmark starts."),
    username: str = typer.Option("iggy", "--username", "-u", help="User every client logs in as."),
    password: str = typer.Option("iggy", "--password", help="Password of --username."),
    start_stream_id: int = typer.Option(3_100_000, "--start-stream-id",
                                        help="The bench's streams are this + 1, + 2, ..."),
    output_dir: Path = typer.Option(DEFAULT_OUTPUT_DIR, "--output-dir", help="Where the reports go."),
    json_only: bool = typer.Option(False, "--json-only", help="Write the JSON report only (no HTML)."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No live progress display."),
) -> None:
    """A 3-node cluster: throughput at RF 1 and RF 3 (acks=1, acks=all) with the ratios against RF 1,
    and the seconds writes stop when a leader is killed."""
    import signal

    from rill.bench.cluster import ClusterBenchOptions, run_cluster
    from rill.bench.results import new_report

    options = ClusterBenchOptions(
        messages_per_batch=messages_per_batch, message_size=message_size, batches=batches, runs=runs,
        producers_per_partition=producers_per_partition, in_flight=in_flight, failovers=failovers, etcd_members=etcd_members, http=http, bootstrap=bootstrap,
        protocols=tuple(name.strip().lower() for name in protocols.split(",") if name.strip()),
        fsync=fsync.lower(), username=username, password=password, start_stream_id=start_stream_id,
        progress=_show_progress(ctx, no_progress),
    )

    def terminated(signum: int, frame: Any) -> None:  # like Ctrl-C: the cluster is stopped on the way out
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        result = _run_guarded(ctx, http, lambda: run_cluster(options))
    finally:
        signal.signal(signal.SIGTERM, previous)
    report = new_report("rill bench cluster")
    report["scenarios"].extend(result["scenarios"])
    report["summary"].extend(result["summary"])
    report["cluster"] = result["cluster"]
    _finish(ctx, report, output_dir, "cluster", json_only, print_scenarios=False)


bench_compare.register(app)  # ``rill bench compare``: rill beside its peers and the machine
