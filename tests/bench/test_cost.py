"""The server's cost in every output of ``rill bench``: CPU seconds (user + system) over the
measured phase, per million messages and per GB of payload, for a server the bench starts
(the scenario verbs), for one it is told the process of (``--server-pid``), and for every
target of ``rill bench compare`` / ``tank`` (rill's listeners, the bare server), with the
CPU-cost ratio columns of the conclusion and the TANK table. Tiny runs; no timing asserts."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import pytest
from rich.console import Console

from rill.bench.compare import run_compare
from rill.bench.compare_report import COLUMNS, SUMMARY_COLUMNS, TANK_COLUMNS, ratio, row_cost
from rill.bench.options import BenchOptions
from rill.bench.scenarios import run_scenario
from rill.bench.server import RillServer

SIZE = 100
PER_BATCH = 100


def _check_cost(cost: dict, messages: int) -> None:
    assert cost["cpu_s"] > 0
    # each figure is rounded from the unrounded seconds, ``cpu_s`` to the microsecond: allow both
    # roundings (a 3 ms run's ``cpu_s`` alone is off by up to 1.7e-4 of itself)
    per_million, per_gb = 1e6 / messages, 1e9 / (messages * SIZE)
    assert cost["cpu_s_per_million"] == pytest.approx(cost["cpu_s"] * per_million,
                                                      abs=0.5e-6 * per_million + 0.5e-4)
    assert cost["cpu_s_per_gb"] == pytest.approx(cost["cpu_s"] * per_gb, abs=0.5e-6 * per_gb + 0.5e-4)


def test_send_reports_the_servers_cpu_in_the_terminal_the_json_and_the_html(tmp_path):
    env = {**os.environ, "RILL_HOME": str(tmp_path), "COLUMNS": "200"}
    result = subprocess.run(
        [sys.executable, "-m", "rill", "bench", "send", "--batches", "50", "--messages-per-batch",
         str(PER_BATCH), "--message-size", str(SIZE), "--fsync", "never", "--no-progress",
         "--output-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    (json_path,) = tmp_path.glob("send-*.json")
    scenario = json.loads(json_path.read_text())["scenarios"][0]
    cost = scenario["server_cpu"]
    assert cost["measured"] and cost["messages"] == 50 * PER_BATCH == scenario["overall"]["producers"]["messages"]
    _check_cost(cost, cost["messages"])
    assert len(cost["pids"]) == 1
    shown = re.search(r"server CPU \(user \+ system\): ([0-9.]+) s, ([0-9.]+) s per million messages, "
                      r"([0-9.,]+) s per GB of payload", result.stdout)
    assert shown, result.stdout
    assert float(shown[1]) == pytest.approx(cost["cpu_s"], abs=0.0005)
    html = json_path.with_suffix(".html").read_text()
    assert "CPU-s per million messages" in html and f"{cost['cpu_s_per_million']:.4g}" in html


def test_an_existing_server_is_measured_when_its_process_is_named(tmp_path):
    with RillServer(fsync="never") as server:
        options = BenchOptions(messages_per_batch=PER_BATCH, message_size=SIZE, batches=20, progress=False,
                               server_address=server.addresses["tcp"], start_stream_id=4_000_000)
        unnamed = run_scenario("send", options)
        pid = server.pid
        named = run_scenario("poll", BenchOptions(**{**options.__dict__, "server_pid": pid}))
    assert unnamed["server_cpu"]["measured"] is False and unnamed["server_cpu"]["cpu_s"] is None
    assert named["server_cpu"]["measured"] and named["server_cpu"]["pids"] == [pid]
    _check_cost(named["server_cpu"], 20 * PER_BATCH)


def test_compare_rows_carry_the_cost_of_every_target_and_the_ratios(tmp_path):
    messages = 5000
    terminal = io.StringIO()
    report = run_compare(messages, SIZE, PER_BATCH, fsync_modes=("interval",),
                         peers=("rill", "rill-tank", "bare"), progress=False, output_dir=tmp_path,
                         machine=False, report_name="tank", console=Console(file=terminal, width=400))
    rows = {row["target"]: row for row in report["comparison"]}
    assert [row["status"] for row in rows.values()] == ["ok"] * 3
    for row in rows.values():
        for phase in ("publish", "consume"):
            assert row[phase]["messages"] == messages
            _check_cost(row[phase], messages)
        assert row["cpu_s_per_million"] == pytest.approx(
            row["publish"]["cpu_s_per_million"] + row["consume"]["cpu_s_per_million"], abs=1e-4)
    # every scenario entry says whose processes were measured
    assert all(entry["server_cpu"]["measured"] and entry["server_cpu"]["pids"] for entry in report["scenarios"])
    rill, tank, bare = rows["rill"], rows["rill-tank"], rows["bare"]
    assert bare["rill_cost_ratio"] == ratio(row_cost(rill), row_cost(bare))
    (entry,) = report["tank"]
    assert entry["cpu_s_per_million"] == ratio(row_cost(tank), row_cost(rill))

    tank_table, conclusion = report["summary"][:2]
    assert tank_table["columns"] == TANK_COLUMNS and conclusion["columns"] == SUMMARY_COLUMNS
    assert tank_table["rows"][0][-1]["ratio"] == entry["cpu_s_per_million"]
    assert tank_table["rows"][0][-1]["good"] == (entry["cpu_s_per_million"] < 1)
    bare_cells = dict(zip(SUMMARY_COLUMNS, conclusion["rows"][-1]))
    assert bare_cells["target"] == "bare Python server"
    assert bare_cells[SUMMARY_COLUMNS[-1]]["ratio"] == bare["rill_cost_ratio"]
    detail = dict(zip(COLUMNS, report["tables"][0]["rows"][0]))
    assert detail["publish server CPU-s / M msg"] == rill["publish"]["cpu_s_per_million"]
    assert detail["server CPU-s / GB (publish + consume)"] == row_cost(rill, "cpu_s_per_gb")

    printed = terminal.getvalue()
    assert "server CPU-s / M msg" in printed and "server CPU-s per" in printed
    saved = json.loads((tmp_path / "tank.json").read_text())
    assert saved["comparison"] == report["comparison"] and saved["tank"] == report["tank"]
    html = (tmp_path / "tank.html").read_text()
    assert "server CPU-s / M msg ratio" in html and f'data-ratio="{entry["cpu_s_per_million"]}"' in html
