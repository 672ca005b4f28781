"""The one-message round trip (produce → a consumer tailing with a long poll) and the small
requests: the hand-over order, ``rill bench round-trip`` over Iggy, the round trips of
``rill bench tank`` / ``kafka`` targets (rill's Iggy, TANK and Kafka listeners) with their
table, and ``--small-requests``. Tiny runs; no timing asserts."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from rill.bench.compare import run_compare
from rill.bench.compare_report import ROUND_TRIP_COLUMNS, ratio
from rill.bench.options import BenchOptions, OptionsError, validate
from rill.bench.results import Recorder
from rill.bench.round_trip import run_round_trips
from rill.bench.scenarios import run_scenario
from rill.cli.bench_compare import register

TRIPS = 30


def test_the_consumer_asks_before_each_message_is_produced_and_one_is_in_flight():
    events: list[tuple[str, int]] = []
    log: list[int] = []
    appended = asyncio.Event()

    async def produce() -> None:
        events.append(("produce", len(log)))
        log.append(len(log))
        appended.set()

    read = 0

    async def receive() -> None:
        nonlocal read
        events.append(("ask", read))
        while len(log) <= read:  # a long poll: wait for the next message
            appended.clear()
            await appended.wait()
        events.append(("got", read))
        read += 1

    result = asyncio.run(run_round_trips(produce, receive, 5, Recorder("t", "producer"), 100, warmup=2))
    assert result.messages == 5 and len(result.latencies_us) == 5 and result.bytes == 500
    assert events == [(kind, index) for index in range(7) for kind in ("ask", "produce", "got")]


def test_the_hand_over_adds_no_task_to_a_round_trip():
    """Producer and consumer are the only tasks on the client's loop: the harness hands over
    through futures, so the loop does the clients' work and little else between an
    acknowledgement and the consumer's answer."""
    tasks: list[int] = []
    produced = received = 0

    async def produce() -> None:
        nonlocal produced
        tasks.append(len(asyncio.all_tasks()))
        produced += 1

    async def receive() -> None:
        nonlocal received
        while produced <= received:  # a long poll at the tail
            await asyncio.sleep(0)
        tasks.append(len(asyncio.all_tasks()))
        received += 1

    asyncio.run(run_round_trips(produce, receive, 4, Recorder("t", "producer"), 1, warmup=1))
    assert tasks and set(tasks) == {2}  # the round trips' own coroutine and the consumer


def test_a_consumer_that_fails_stops_the_round_trips():
    async def produce() -> None:
        pass

    async def receive() -> None:
        raise ConnectionError("the tail broke")

    with pytest.raises(ConnectionError, match="the tail broke"):
        asyncio.run(run_round_trips(produce, receive, 3, Recorder("t", "producer"), 1, warmup=0))


def test_round_trip_scenario_over_iggy():
    report = run_scenario("round-trip", BenchOptions(batches=TRIPS, message_size=100, fsync="never",
                                                     progress=False))
    producers = report["overall"]["producers"]
    assert producers["messages"] == producers["batches"] == TRIPS and producers["bytes"] == TRIPS * 100
    latency = producers["latency_ms"]
    assert 0 < latency["p50"] <= latency["p99"] <= latency["max"]
    assert report["options"]["messages_per_batch"] == 1
    assert report["server_cpu"]["measured"] and report["server_cpu"]["cpu_s"] > 0
    assert report["server_cpu"]["cpu_s_per_million"] == pytest.approx(
        report["server_cpu"]["cpu_s"] / TRIPS * 1e6, rel=1e-4)


@pytest.mark.parametrize(("changes", "message"), [
    ({"duration": 2.0}, "round-trip counts round trips"),
    ({"transport": "http"}, "round-trip needs --transport tcp or quic"),
])
def test_round_trip_options(changes, message):
    with pytest.raises(OptionsError, match=message):
        validate("round-trip", BenchOptions(**changes))


def test_round_trips_of_each_of_rills_listeners_in_one_report(tmp_path):
    report = run_compare(1000, 100, 100, fsync_modes=("interval",),
                         peers=("rill", "rill-tank", "rill-kafka-wire"), progress=False,
                         output_dir=tmp_path, machine=False, report_name="tank", round_trips=TRIPS)
    assert report["workload"]["round_trips"] == TRIPS
    rows = {row["target"]: row for row in report["comparison"]}
    entries = {entry["target"]: entry for entry in report["round_trip"]}
    assert list(entries) == ["rill", "rill-tank", "rill-kafka-wire"]
    for target, entry in entries.items():
        trips = rows[target]["round_trip"]
        assert trips["messages"] == TRIPS and 0 < trips["p50_ms"] <= trips["p99_ms"] <= trips["max_ms"]
        assert trips["cpu_s"] > 0
        assert trips["cpu_s_per_million"] == pytest.approx(trips["cpu_s"] / TRIPS * 1e6, rel=1e-4)
        assert entry["p50_ms"] == trips["p50_ms"]
        assert entry["p50_vs_rill"] == (None if target == "rill" else
                                        ratio(trips["p50_ms"], rows["rill"]["round_trip"]["p50_ms"]))
    phases = [(entry["target"], entry["phase"]) for entry in report["scenarios"]]
    assert phases.count(("rill-tank", "round-trip")) == 1 and phases.count(("rill", "round-trip")) == 1
    table = report["summary"][0]
    assert table["columns"] == ROUND_TRIP_COLUMNS and len(table["rows"]) == 3
    assert table["rows"][1][3] == entries["rill-tank"]["p50_ms"]
    saved = json.loads((tmp_path / "tank.json").read_text())
    assert saved["round_trip"] == report["round_trip"]
    assert "produce → tailing consumer" in (tmp_path / "tank.html").read_text()


def test_small_requests_on_the_command_lines(tmp_path):
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["tank", "--small-requests", "--messages", "1000", "--round-trips", "0",
                                      "--no-progress", "--output-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "tank.json").read_text())
    assert saved["workload"]["batch"] == 100 and saved["workload"]["message_size"] == 100
    assert "round_trip" not in saved
    refused = CliRunner().invoke(app, ["kafka", "--round-trips", "-1", "--no-progress"])
    assert refused.exit_code == 2 and "--round-trips" in refused.output

    env = {**os.environ, "RILL_HOME": str(tmp_path), "COLUMNS": "200"}
    sent = subprocess.run([sys.executable, "-m", "rill", "bench", "send", "--small-requests", "--batches", "3",
                           "--no-progress", "--json-only", "--output-dir", str(tmp_path / "send")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert sent.returncode == 0, sent.stderr
    (path,) = (tmp_path / "send").glob("send-*.json")
    scenario = json.loads(path.read_text())["scenarios"][0]
    assert scenario["options"]["messages_per_batch"] == 100 and scenario["options"]["message_size"] == 100
    assert scenario["overall"]["producers"]["messages"] == 300
