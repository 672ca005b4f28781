"""``rill.bench.results``: percentiles, histogram, the cross-process round trip, the timeline."""

from __future__ import annotations

import pickle
from array import array

import pytest

from rill.bench.results import (
    ActorResult,
    Recorder,
    latency_histogram,
    latency_summary,
    new_report,
    percentile,
    scenario_report,
    throughput,
    write_json,
)


def test_percentile_is_nearest_rank():
    values = sorted(float(n) for n in range(1, 101))  # 1..100
    assert percentile(values, 50) == 50.0
    assert percentile(values, 90) == 90.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 99.9) == 100.0
    assert percentile(values, 100) == 100.0
    assert percentile(values, 0) == 1.0
    assert percentile([7.0], 99.9) == 7.0
    assert percentile([], 50) == 0.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0  # rank ceil(0.5 * 4) = 2, no interpolation


def test_latency_summary_is_in_milliseconds():
    summary = latency_summary(array("d", [1000.0, 2000.0, 3000.0, 4000.0]))  # µs
    assert summary == {"p50": 2.0, "p90": 4.0, "p99": 4.0, "p999": 4.0, "avg": 2.5, "max": 4.0}
    assert latency_summary([]) == {"p50": 0.0, "p90": 0.0, "p99": 0.0, "p999": 0.0, "avg": 0.0, "max": 0.0}


def test_histogram_has_log_spaced_contiguous_bins():
    latencies = [100.0, 100.0, 1000.0, 10_000.0, 12_000.0]  # µs
    bins = latency_histogram(latencies)
    assert sum(count for _, count in bins) == len(latencies)
    edges = [edge for edge, _ in bins]
    assert edges == sorted(edges)
    assert edges[0] == pytest.approx(0.1) and edges[-1] >= 12.0  # ms
    ratios = {round(b / a, 3) for a, b in zip(edges, edges[1:])}
    assert ratios == {round(10 ** 0.1, 3)}  # ten bins per decade, no gaps
    assert dict(bins)[0.1] == 2
    assert latency_histogram([]) == []


def _actor(name: str, kind: str, started: float, buckets: dict[float, list[int]]) -> ActorResult:
    messages = sum(counts[0] for counts in buckets.values())
    size = sum(counts[1] for counts in buckets.values())
    return ActorResult(name, kind, started, 1.0, messages, size, array("d", [500.0] * len(buckets)),
                       buckets, 0.25)


def test_actor_result_round_trips_through_a_dict_and_pickle():
    recorder = Recorder("producer-1", "producer")
    recorder.start()
    for latency in (0.001, 0.002, 0.003):
        recorder.record(latency, 10, 1240)
    result = recorder.finish()
    data = pickle.loads(pickle.dumps(result.to_dict()))  # what crosses the process boundary
    back = ActorResult.from_dict(data)
    assert back.actor == "producer-1" and back.kind == "producer"
    assert back.messages == 30 and back.bytes == 3720
    assert list(back.latencies_us) == pytest.approx([1000.0, 2000.0, 3000.0])
    assert back.timeline == result.timeline and back.started_at == result.started_at
    assert back.summary() == result.summary()


def test_overall_timeline_adds_the_actors_buckets():
    origin = 1000.0
    first = _actor("producer-1", "producer", origin, {1000.0: [10, 1_000_000], 1000.25: [20, 2_000_000]})
    second = _actor("producer-2", "producer", origin + 0.1, {1000.0: [5, 500_000], 1000.5: [8, 800_000]})
    report = scenario_report("send", {"producers": 2}, [first, second])
    timeline = report["overall"]["producers"]["timeline"]  # [seconds, msg/s, MB/s] per 0.25 s bucket
    assert timeline == [[0.0, 60.0, 6.0], [0.25, 80.0, 8.0], [0.5, 32.0, 3.2]]
    per_actor = {actor["actor"]: actor["timeline"] for actor in report["actors"]}
    assert per_actor["producer-2"] == [[0.0, 20.0, 2.0], [0.5, 32.0, 3.2]]


def test_scenario_report_overall_uses_the_wall_clock_window():
    first = _actor("producer-1", "producer", 100.0, {100.0: [100, 1000]})
    second = _actor("producer-2", "producer", 100.5, {100.5: [100, 1000]})  # ends at 101.5
    reader = _actor("consumer-1", "consumer", 100.0, {100.0: [50, 500]})
    report = scenario_report("send-and-poll", {}, [first, second, reader], target="peer")
    assert report["target"] == "peer"
    producers = report["overall"]["producers"]
    assert producers["actors"] == 2 and producers["messages"] == 200 and producers["seconds"] == 1.5
    assert producers["msg_per_s"] == pytest.approx(133.3, abs=0.1)
    assert report["overall"]["consumers"]["messages"] == 50
    assert [actor["kind"] for actor in report["actors"]] == ["consumer", "producer", "producer"]
    assert throughput(0, 0, 0.0) == {"msg_per_s": 0.0, "mb_per_s": 0.0}


def test_report_skeleton_and_json(tmp_path):
    report = new_report("nightly")
    assert report["tool"] == "rill bench" and report["title"] == "nightly"
    assert {"hostname", "cpus", "python", "rill"} <= set(report["machine"])
    assert report["scenarios"] == report["tables"] == report["curves"] == []
    assert report["summary"] == report["bars"] == []
    path = write_json(report, tmp_path / "deep" / "report.json")
    assert path.read_text().startswith("{")
