"""The HTML report: self-contained, escaped, with the charts and tables of any report."""

from __future__ import annotations

import re
from array import array
from xml.etree import ElementTree

from rill.bench.charts import bar_chart, format_number, histogram_chart, line_chart, nice_ticks
from rill.bench.report_html import render_html, write_html
from rill.bench.results import ActorResult, new_report, scenario_report


def _actor(name: str, kind: str, latencies_us: list[float]) -> ActorResult:
    timeline = {1000.0 + 0.25 * index: [10, 1240] for index in range(6)}
    return ActorResult(name, kind, 1000.0, 1.5, 60, 7440, array("d", latencies_us), timeline, 0.25)


def _report(title: str = "nightly <run> & \"friends\"") -> dict:
    report = new_report(title)
    actors = [
        _actor("producer-1", "producer", [300.0, 450.0, 800.0, 2500.0, 12000.0, 410.0]),
        _actor("consumer-1", "consumer", [200.0, 220.0, 900.0, 1800.0, 5000.0, 240.0]),
    ]
    report["scenarios"].append(
        scenario_report("send-and-poll", {"transport": "tcp", "producers": 1, "server": "<b>x</b>"}, actors)
    )
    report["tables"].append({
        "title": "Scaling <table>", "columns": ["actors", "msg/s"], "rows": [[1, 1000.5], [2, 1900.0]],
        "notes": ["note with <i>markup</i>"],
    })
    report["curves"].append({
        "title": "msg/s against actors", "x_label": "actors", "y_label": "msg/s",
        "series": {"send": [[1, 1000.0], [2, 1900.0], [4, 3000.0]], "poll": [[1, 2000.0], [2, 3500.0]]},
    })
    return report


def test_page_is_self_contained_and_escaped():
    page = render_html(_report())
    assert page.startswith("<!DOCTYPE html>")
    assert "<title>nightly &lt;run&gt; &amp; &quot;friends&quot;</title>" in page
    assert "<h1>nightly &lt;run&gt; &amp; &quot;friends&quot;</h1>" in page
    assert "<run>" not in page and "<b>x</b>" not in page and "<i>markup</i>" not in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "note with &lt;i&gt;markup&lt;/i&gt;" in page
    assert "<script" not in page.lower()
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing fetched from the network
    assert "<style>" in page


def test_scenario_has_summary_table_and_both_charts():
    page = render_html(_report())
    for column in ("MB/s", "msg/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "avg ms", "max ms"):
        assert f"<th>{column}</th>" in page
    assert "all producers (1)" in page and "all consumers (1)" in page
    assert "producer-1" in page and "consumer-1" in page
    assert page.index("producer-1") < page.index("consumer-1")  # producers first
    assert "send-and-poll: throughput over time" in page
    assert "send-and-poll: producers batch latency distribution" in page
    assert "send-and-poll: consumers batch latency distribution" in page
    assert page.count("<svg") == 4  # timeline + 2 histograms + 1 curve
    assert "Scaling &lt;table&gt;" in page and "msg/s against actors" in page


def test_every_svg_is_well_formed_xml():
    page = render_html(_report())
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    assert svgs
    for svg in svgs:
        root = ElementTree.fromstring(svg)
        assert root.tag.endswith("svg")
        assert root.find("{http://www.w3.org/2000/svg}title") is not None


def test_curve_draws_a_line_per_series_with_axis_labels():
    svg = line_chart({"send": [[1, 10], [2, 20]], "poll": [[1, 5], [2, 8]]}, title="t", x_label="actors",
                     y_label="msg/s")
    assert svg.count("<polyline") == 2
    assert ">actors</text>" in svg and ">msg/s</text>" in svg
    assert ">send</text>" in svg and ">poll</text>" in svg  # legend


def test_histogram_bars_and_percentile_markers():
    svg = histogram_chart({"producers": [[0.1, 3], [0.1259, 0], [0.1585, 5]]}, title="latency",
                          x_label="ms", y_label="batches", markers={"p50": 0.15, "p99": 0.158})
    assert svg.count("<rect") == 2  # zero-count bins draw nothing
    assert ">p50</text>" in svg and ">p99</text>" in svg


def test_empty_inputs_render():
    assert "no data" in line_chart({}, title="t", x_label="x", y_label="y")
    assert "no data" in histogram_chart({"a": []}, title="t", x_label="x", y_label="y")
    page = render_html(new_report("empty"))
    assert "holds no results" in page
    assert "<h1>empty</h1>" in render_html({"title": "empty"})  # foreign, partial reports render too


def test_write_html(tmp_path):
    path = write_html(_report("file"), tmp_path / "out" / "report.html")
    assert path.exists() and "<h1>file</h1>" in path.read_text(encoding="utf-8")


def test_nice_ticks_and_numbers():
    assert nice_ticks(0, 10, 5) == [0, 2, 4, 6, 8, 10]
    assert nice_ticks(0, 0)[0] == 0 and nice_ticks(0, 0)[-1] == 1.0  # a flat range still gets an axis
    ticks = nice_ticks(3, 97, 5)
    assert ticks[0] <= 3 and ticks[-1] >= 97
    assert format_number(1234567) == "1.23M" and format_number(12345) == "12.3k"
    assert format_number(0.0123) == "0.0123" and format_number(42) == "42"


def test_bar_chart_has_one_bar_per_series_in_each_group():
    svg = bar_chart({"publish · fsync always": {"rill": 720_113, "<nats>": 5605},
                     "consume · fsync always": {"rill": 2_891_660}}, title="msg/s", y_label="msg/s")
    ElementTree.fromstring(svg)
    bars = re.findall(r'<rect class="bar" data-group="([^"]*)" data-series="([^"]*)"', svg)
    assert bars == [("publish · fsync always", "rill"), ("publish · fsync always", "&lt;nats&gt;"),
                    ("consume · fsync always", "rill")]  # a missing value leaves its slot empty
    assert ">publish</text>" in svg and ">fsync always</text>" in svg  # group names on two lines
    assert "no data" in bar_chart({}, title="t", y_label="y")


def test_summary_and_bars_come_first_with_ratio_cells():
    report = _report()
    report["summary"] = [{"title": "Conclusion", "columns": ["target", "msg/s"],
                          "rows": [["nats", {"ratio": 26.39, "text": "26.4×", "good": True, "title": "<t>"}],
                                   ["bare", {"ratio": 0.43, "text": "0.43×", "good": False}],
                                   ["x", {"ratio": 1.0, "text": "1×", "good": None}]]}]
    report["bars"] = [{"title": "side by side", "y_label": "msg/s", "groups": {"g": {"a": 1, "b": 2}}}]
    page = render_html(report)
    assert '<td class="ratio good" data-ratio="26.39" title="&lt;t&gt;">26.4×</td>' in page
    assert '<td class="ratio bad" data-ratio="0.43" title="">0.43×</td>' in page
    assert '<td class="ratio" data-ratio="1.0"' in page
    order = [page.index(text) for text in ('id="summary-1"', 'id="bars-1"', 'class="machine"', 'id="table-1"',
                                           'id="curve-1"', 'id="scenario-1"')]
    assert order == sorted(order)
