"""``rill bench tank``: rill's Iggy listener and its TANK listener on one workload in one run
(short and bounded), the TANK conclusion (rill-tank ÷ rill, msg/s, against issue 14's floor),
the reports and the command line. No timing asserts."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from rill.bench.compare import run_compare
from rill.bench.compare_report import TANK_COLUMNS, TANK_FLOORS
from rill.cli.bench_compare import register

MESSAGES = 3000
SIZE = 100


def test_iggy_and_tank_listeners_in_one_run(tmp_path):
    report = run_compare(MESSAGES, SIZE, 1000, fsync_modes=("interval",),
                         peers=("rill", "rill-tank"), progress=False, output_dir=tmp_path,
                         machine=False, report_name="tank")
    rows = report["comparison"]
    assert [(row["target"], row["status"]) for row in rows] == [("rill", "ok"), ("rill-tank", "ok")]
    for row in rows:
        for phase in ("publish", "consume"):
            figures = row[phase]
            assert figures["messages"] == MESSAGES and figures["msg_per_s"] > 0
            assert figures["mb_per_s"] == pytest.approx(figures["msg_per_s"] * SIZE / 1e6, rel=1e-2)
    (entry,) = report["tank"]
    assert entry["against"] == "rill" and entry["floor"] == TANK_FLOORS["rill"] == 0.60
    tank, iggy = rows[1], rows[0]
    for phase in ("publish", "consume"):
        wanted = tank[phase]["msg_per_s"] / iggy[phase]["msg_per_s"]
        assert entry[phase] == pytest.approx(wanted, rel=1e-3)
        assert entry["meets"][phase] == (entry[phase] >= 0.60)
    table = report["summary"][0]
    assert table["title"].startswith("TANK protocol") and table["columns"] == TANK_COLUMNS
    saved = json.loads((tmp_path / "tank.json").read_text())
    assert saved["tank"] == report["tank"] and saved["title"] == "rill bench tank"
    assert "TANK protocol" in (tmp_path / "tank.html").read_text()


def test_the_command_line(tmp_path):
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["tank", "--messages", "2000", "--round-trips", "20", "--no-progress",
                                      "--output-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "tank.json").exists()
    refused = CliRunner().invoke(app, ["tank", "--messages", "1500", "--no-progress"])
    assert refused.exit_code == 2 and "--messages" in refused.output
