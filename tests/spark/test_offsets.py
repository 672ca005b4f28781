"""Offsets: canonical JSON, resolution of the starting/ending options, range planning and
admission control (pure functions, no Spark)."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from pyspark_rill import offsets as offs
from pyspark_rill.options import ReadOptions, RillOptionError
from pyspark_rill.readers import RillStreamReader, plan_ranges

FOUND = {"s/a": {"1": offs.Bounds(0, 10), "2": offs.Bounds(3, 7)},
         "s/b": {"1": offs.Bounds(0, 0)}}


def test_canonical_offsets_are_sorted_at_both_levels() -> None:
    messy = {"s/b": {"2": 1, "10": 4, "1": 0}, "s/a": {"1": 3}}
    assert json.dumps(offs.canonical(messy)) == (
        '{"s/a": {"1": 3}, "s/b": {"1": 0, "10": 4, "2": 1}}')
    assert json.dumps(offs.canonical(messy)) == json.dumps(messy, sort_keys=True)


def test_resolve_earliest_latest_and_json() -> None:
    assert offs.resolve("earliest", FOUND, "startingOffsets", offs.EARLIEST) == {
        "s/a": {"1": 0, "2": 3}, "s/b": {"1": 0}}
    assert offs.resolve("latest", FOUND, "startingOffsets", offs.EARLIEST) == {
        "s/a": {"1": 10, "2": 7}, "s/b": {"1": 0}}
    spec = {"s/a": {"1": 4, "2": -1}}
    assert offs.resolve(spec, FOUND, "startingOffsets", offs.EARLIEST) == {
        "s/a": {"1": 4, "2": 7}, "s/b": {"1": 0}}
    assert offs.clamp_ending({"s/a": {"1": 99, "2": 5}}, FOUND) == {"s/a": {"1": 10, "2": 5}}


@pytest.mark.parametrize("spec, message", [
    ({"s/zzz": {"1": 0}}, "'s/zzz' is not one of the query's topics"),
    ({"s/a": {"9": 0}}, "s/a has no partition 9"),
])
def test_resolve_names_the_option(spec, message) -> None:
    with pytest.raises(RillOptionError, match=f"option 'startingOffsets': {message}"):
        offs.resolve(spec, FOUND, "startingOffsets", offs.EARLIEST)


def test_plan_ranges_and_min_partitions() -> None:
    start = {"s/a": {"1": 2, "2": 7}}
    end = {"s/a": {"1": 10, "2": 7}, "s/b": {"1": 5}}
    ranges = plan_ranges(start, end, None)
    assert [(r.topic, r.partition, r.start, r.end, r.from_earliest) for r in ranges] == [
        ("a", 1, 2, 10, False), ("b", 1, 0, 5, True)]
    split = plan_ranges(start, end, 6)
    assert sum(r.end - r.start for r in split) == 13 and len(split) >= 5
    assert [(r.start, r.end) for r in split if r.topic == "a"] == sorted(
        (r.start, r.end) for r in split if r.topic == "a")
    assert sum(r.from_earliest for r in split) == 1  # only the first piece of the new one


def reader(**extra: str) -> RillStreamReader:
    options = {"username": "u", "password": "p", "stream": "s", "topic": "a", **extra}
    return RillStreamReader(ReadOptions.parse({k.lower(): v for k, v in options.items()},
                                              streaming=True))


def test_admission_splits_max_rows_by_backlog() -> None:
    begin = {("s/a", "1"): 0, ("s/a", "2"): 0, ("s/a", "3"): 100}
    end = {("s/a", "1"): 900, ("s/a", "2"): 100, ("s/a", "3"): 100}
    limited = dict(end)
    reader(maxOffsetsPerTrigger="300")._admit(begin, limited, ReadMaxRows(300))
    assert limited == {("s/a", "1"): 270, ("s/a", "2"): 30, ("s/a", "3"): 100}
    untouched = dict(end)
    reader(maxOffsetsPerTrigger="300")._admit(begin, untouched, ReadAllAvailable())
    assert untouched == end


def test_admission_waits_for_min_rows_except_under_available_now() -> None:
    begin, end = {("s/a", "1"): 5}, {("s/a", "1"): 8}
    waiting = dict(end)
    reader(minOffsetsPerTrigger="10")._admit(begin, waiting, ReadMinRows(10))
    assert waiting == begin
    source = reader(minOffsetsPerTrigger="10")
    source._target = {"s/a": {"1": 8}}  # Trigger.AvailableNow must finish
    going = dict(end)
    source._admit(begin, going, ReadMinRows(10))
    assert going == end
