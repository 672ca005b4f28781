"""What the compare report says, from known figures: rill ÷ target for every figure with the
better direction marked, rill's fraction of the machine, a missing machine figure or target as
words (never a number), and the chart's groups."""

from __future__ import annotations

import pytest

from bench.known_compare import CAPABILITIES, TARGETS, known_report, known_rows
from rill.bench.compare_report import NAMES, SUMMARY_COLUMNS, ratio, ratio_cell


def _cells(row: list) -> dict:
    return dict(zip(SUMMARY_COLUMNS, row))


def test_every_target_has_rill_ratio_for_every_figure():
    report = known_report()
    nats = report["comparison"][1]
    assert nats["target"] == "nats"
    assert nats["rill_ratio"]["publish"] == {"msg_per_s": 26.39, "p50_ms": 0.045, "p99_ms": 0.05743}
    assert nats["rill_ratio"]["consume"]["msg_per_s"] == 58.83
    assert report["comparison"][0]["rill_ratio"] == {"publish": None, "consume": None}  # rill itself


def test_the_conclusion_says_which_way_is_better():
    conclusion, _ = known_report()["summary"]
    assert [row[:2] for row in conclusion["rows"]] == [
        [NAMES[target], fsync] for fsync in ("every second", "always") for target in TARGETS[1:]]
    assert all("higher = rill better" in column for column in SUMMARY_COLUMNS if "msg/s" in column)
    assert all("lower = rill better" in column for column in SUMMARY_COLUMNS if "latency" in column)
    nats = _cells(conclusion["rows"][0])
    throughput = nats["publish msg/s (higher = rill better)"]
    assert throughput["text"] == "26.4×" and throughput["good"] is True
    latency = nats["publish p99 latency (lower = rill better)"]
    assert latency["ratio"] < 1 and latency["good"] is True  # rill answered sooner
    bare_interval = _cells(conclusion["rows"][2])
    assert bare_interval["target"] == "bare Python server"
    assert bare_interval["publish msg/s (higher = rill better)"]["good"] is False
    assert bare_interval["publish p99 latency (lower = rill better)"]["good"] is False
    bare_always = _cells(conclusion["rows"][5])
    assert bare_always["publish msg/s (higher = rill better)"]["text"] == "1.79×"  # rill beat it


def test_rill_as_a_fraction_of_the_machine():
    _, fractions = known_report()["summary"]
    rows = {(row[0], row[1]): row[2:] for row in fractions["rows"]}
    loopback = rows[("machine: loopback TCP (iperf3)", "every second")]
    assert loopback[0]["ratio"] == ratio(1072.579, 2935.9) and loopback[1]["ratio"] == ratio(2765.923, 2935.9)
    disk_always = rows[("machine: disk sequential write + fdatasync", "always")]
    assert disk_always[0]["ratio"] == ratio(720.113, 1222.3) and disk_always[0]["text"].endswith(" of it")
    assert disk_always[1] == "—"  # consume reads the page cache, not the disk
    assert all(cell["good"] is None for cells in rows.values() for cell in cells if isinstance(cell, dict))


def test_iperf3_missing_is_words_in_every_table_not_a_number():
    missing = [{**CAPABILITIES[0], "mb_per_s": None, "reason": "not measured (iperf3 not installed)"},
               *CAPABILITIES[1:]]
    report = known_report(capabilities=missing)
    _, fractions = report["summary"]
    loopback = [row for row in fractions["rows"] if "loopback" in row[0]]
    assert loopback and all(row[2:] == ["not measured (iperf3 not installed)"] * 2 for row in loopback)
    machine = report["tables"][1]
    rows = [row for row in machine["rows"] if "loopback" in row[0]]
    assert rows and all(row[3] == "not measured (iperf3 not installed)" and row[4:] == ["—", "—"]
                        for row in rows)


def test_a_target_that_did_not_run_is_a_row_with_its_reason():
    rows = known_rows()
    rows[2].update(status="not available", reason="redis-server not found", publish=None, consume=None)
    report = known_report(rows=rows)
    conclusion, _ = report["summary"]
    redis = conclusion["rows"][1]
    assert redis[:3] == ["Redis Streams", "every second", "not available: redis-server not found"]
    bars = report["bars"][0]["groups"]
    assert "Redis Streams" not in bars["publish · fsync every second"]
    assert list(bars["publish · fsync always"]) == [NAMES[target] for target in TARGETS]


def test_no_machine_rows_no_machine_table():
    report = known_report(capabilities=[])
    assert len(report["summary"]) == 1 and len(report["tables"]) == 1


@pytest.mark.parametrize(("value", "higher", "good"), [(2.0, True, True), (0.5, True, False), (0.5, False, True),
                                                        (1.0, True, None), (3.0, None, None)])
def test_ratio_cell(value, higher, good):
    assert ratio_cell(value, higher)["good"] is good
    assert ratio_cell(None, higher) == "n/a"
