"""Reading rill topics with a local Spark: batch reads of a known data set, bad input, and
Structured Streaming (restart from a checkpoint, admission control, Trigger.AvailableNow, new
partitions, lag, data loss)."""

from __future__ import annotations

import json
import time

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from rill.client import Consumer, HeaderValue, Message
from rill.protocol.iggy.headers import HeaderKind

from conftest import scan_of

KNOWN = {1: [f"p1-{i}".encode() for i in range(25)], 2: [f"p2-{i}".encode() for i in range(7)],
         3: []}


@pytest.fixture
def known(admin, stream, options):
    """Topic 'known' with 25, 7 and 0 messages in partitions 1, 2 and 3."""
    admin.create_topic(stream, "known", partitions_count=3)
    for partition, payloads in KNOWN.items():
        if payloads:
            admin.send_messages(stream, "known", payloads, partitioning=partition)
    return {**options, "topic": "known"}


def read(spark, options, **extra):
    return spark.read.format("rill").options(**options, **extra).load()


def test_batch_read_of_a_known_data_set(spark, known, stream, implementation) -> None:
    df = read(spark, known, **implementation)
    assert scan_of(df) == implementation["implementation"]
    assert df.schema.simpleString().startswith(
        "struct<stream:string,topic:string,partition:int,offset:bigint,id:binary,"
        "timestamp:timestamp,key:binary,value:binary,headers:map<string,binary>>")
    rows = df.orderBy("partition", "offset").collect()
    assert [(r.partition, r.offset, r.value) for r in rows] == [
        (p, o, v) for p in (1, 2) for o, v in enumerate(KNOWN[p])]
    assert {(r.stream, r.topic) for r in rows} == {(stream, "known")}
    assert all(len(r.id) == 16 and r.timestamp.tzinfo is None for r in rows)
    assert df.groupBy("partition").count().orderBy("partition").collect() == [
        (1, 25), (2, 7)]


def test_explicit_offsets_and_timestamp(spark, known, stream, admin, implementation) -> None:
    offsets = f'{{"{stream}/known": {{"1": 20, "2": -2}}}}'
    ending = f'{{"{stream}/known": {{"1": 23, "2": 2}}}}'
    rows = read(spark, known, startingOffsets=offsets, endingOffsets=ending,
                **implementation).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [
        (1, 20), (1, 21), (1, 22), (2, 0), (2, 1)]
    admin.create_topic(stream, "timed", partitions_count=1)
    admin.send_messages(stream, "timed", [b"before"])
    time.sleep(0.005)
    boundary_ms = time.time_ns() // 1_000_000 + 1
    time.sleep(0.005)
    admin.send_messages(stream, "timed", [b"after-1", b"after-2"])
    after = read(spark, {**known, "topic": "timed"}, startingTimestamp=str(boundary_ms))
    assert sorted(r.value for r in after.collect()) == [b"after-1", b"after-2"]


def test_typed_headers_and_multi_topic(spark, admin, stream, options, implementation) -> None:
    admin.create_topic(stream, "a", partitions_count=1)
    admin.create_topic(stream, "b", partitions_count=1)
    admin.send_messages(stream, "a", [Message(b"x", headers={"h": HeaderValue.string("v")})])
    admin.send_messages(stream, "b", [b"y"])
    seven = HeaderValue.int(HeaderKind.INT32, 7)
    admin.send_messages(stream, "a", [
        Message(b"k", headers={"rill.key": HeaderValue.raw(b"K"), "n": seven}),
        Message(b"z", headers={"rill.key": HeaderValue.raw(b"Z")})])
    df = read(spark, {**options, "topics": "a,b"}, headersFormat="typed", **implementation)
    by_value = {r.value: r for r in df.collect()}
    assert by_value[b"x"].topic == "a" and by_value[b"x"].headers["h"].asDict() == {
        "kind": "string", "value": b"v"}
    assert by_value[b"y"].topic == "b" and by_value[b"y"].headers is None
    assert by_value[b"k"].key == b"K" and by_value[b"k"].headers["n"].asDict() == {
        "kind": "int32", "value": (7).to_bytes(4, "little")}
    assert by_value[b"z"].key == b"Z" and by_value[b"z"].headers is None
    assert by_value[b"x"].key is None
    binary = read(spark, {**options, "topic": "a"}, **implementation).orderBy("offset").collect()
    assert [(r.key, r.value, r.headers) for r in binary] == [
        (None, b"x", {"h": b"v"}), (b"K", b"k", {"n": (7).to_bytes(4, "little")}),
        (b"Z", b"z", None)]


@pytest.mark.parametrize("extra, message", [
    ({"startingOffsets": "{bad"}, "option 'startingOffsets'"),
    ({"startingOffsets": '{"nostream/known": {"1": 0}}'}, "option 'startingOffsets'"),
    ({"stream": "no-such-stream"}, "option 'stream'"),
    ({"topic": "no-such-topic"}, "option 'topic'"),
    ({"servers": "127.0.0.1:1", "reconnectAttempts": "0"},
     "CannotEstablishConnection: option 'servers': cannot reach a rill server"),
    ({"startingOfsets": "earliest"}, "unknown option 'startingofsets'"),
])
def test_bad_input_fails_with_one_clear_message(spark, known, extra, message,
                                                implementation) -> None:
    with pytest.raises(PySparkException) as caught:
        read(spark, {**known, **extra, **implementation}).collect()
    assert message in str(caught.value)


def run_available_now(spark, options, checkpoint, output, **extra):
    query = (spark.readStream.format("rill").options(**options, **extra).load()
             .select("partition", "offset", "value")
             .writeStream.format("parquet").option("checkpointLocation", str(checkpoint))
             .option("path", str(output)).trigger(availableNow=True).start())
    query.awaitTermination(120)
    return query


def test_streaming_restart_from_checkpoint_has_no_gap_and_no_duplicate(
        spark, known, admin, stream, tmp_path, implementation) -> None:
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"
    first = run_available_now(spark, {**known, **implementation}, checkpoint, output,
                              startingOffsets="earliest", maxOffsetsPerTrigger="10")
    sizes = [p["numInputRows"] for p in first.recentProgress if p["numInputRows"]]
    assert sizes == [10, 10, 10, 2]  # admission control: at most 10 rows a trigger
    lag = json.loads(first.lastProgress["sources"][0]["latestOffset"])  # reportLatestOffset
    assert lag == {f"{stream}/known": {"1": 25, "2": 7, "3": 0}}
    if implementation["implementation"] == "jvm":  # source metrics: the lag of each partition
        behind = [lag_of(p["sources"][0]) for p in first.recentProgress if p["numInputRows"]]
        assert [sum(b.values()) for b, _ in behind] == [22, 12, 2, 0]
        assert all(metrics["maxOffsetsBehindLatest"] == str(max(b.values()))
                   and metrics["minOffsetsBehindLatest"] == str(min(b.values()))
                   for b, metrics in behind)
    admin.send_messages(stream, "known", [b"late-1", b"late-2"], partitioning=3)
    admin.send_messages(stream, "known", [b"late-3"], partitioning=1)
    # the restart resumes from the checkpoint: startingOffsets=latest is ignored
    run_available_now(spark, {**known, **implementation}, checkpoint, output,
                      startingOffsets="latest")
    rows = spark.read.parquet(str(output)).collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        [(1, o) for o in range(26)] + [(2, o) for o in range(7)] + [(3, 0), (3, 1)])
    assert len(rows) == len({(r.partition, r.offset) for r in rows})


def lag_of(source) -> tuple[dict[str, int], dict[str, str]]:
    """A progress's lag per partition (source metric offsetsBehindLatest), checked against its
    latest and end offsets, and the metrics."""
    metrics = source["metrics"]
    behind = json.loads(metrics["offsetsBehindLatest"])
    latest, end = json.loads(source["latestOffset"]), json.loads(source["endOffset"])
    assert behind == {topic: {p: latest[topic][p] - end[topic][p] for p in parts}
                      for topic, parts in latest.items()}
    return {f"{t}/{p}": lag for t, parts in behind.items() for p, lag in parts.items()}, metrics


def test_new_partitions_and_consumer_offsets(spark, known, admin, stream, tmp_path,
                                             implementation) -> None:
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"
    run_available_now(spark, {**known, **implementation}, checkpoint, output,
                      startingOffsets="latest", consumerName="spark-monitor")
    admin.create_partitions(stream, "known", 1)  # partition 4
    admin.send_messages(stream, "known", [b"new-1", b"new-2"], partitioning=4)
    admin.send_messages(stream, "known", [b"old"], partitioning=2)
    run_available_now(spark, {**known, **implementation}, checkpoint, output,
                      consumerName="spark-monitor")
    rows = spark.read.parquet(str(output)).collect()
    assert sorted((r.partition, r.offset, r.value) for r in rows) == [
        (2, 7, b"old"), (4, 0, b"new-1"), (4, 1, b"new-2")]
    # Spark commits a batch's end to the source when it runs the next batch
    admin.send_messages(stream, "known", [b"one more"], partitioning=1)
    run_available_now(spark, {**known, **implementation}, checkpoint, output,
                      consumerName="spark-monitor")
    stored = admin.get_consumer_offset(stream, "known", Consumer.regular("spark-monitor"), 4)
    assert stored.stored_offset == 1  # last processed offset, for lag dashboards only


def test_fail_on_data_loss(spark, known, admin, stream, tmp_path, implementation) -> None:
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"
    run_available_now(spark, {**known, **implementation}, checkpoint, output,
                      startingOffsets="earliest")
    admin.delete_partitions(stream, "known", 1)  # partition 3 disappears
    with pytest.raises(Exception) as caught:
        run_available_now(spark, {**known, **implementation}, checkpoint, output).awaitTermination()
    assert "failOnDataLoss" in str(caught.value)
    admin.send_messages(stream, "known", [b"after"], partitioning=1)
    run_available_now(spark, {**known, **implementation}, checkpoint, output,
                      failOnDataLoss="false")
    assert spark.read.parquet(str(output)).where(F.col("value") == b"after").count() == 1


def test_a_checkpoint_crosses_implementations(spark, known, admin, stream, tmp_path) -> None:
    """A query checkpointed by one implementation restarts on the other, both ways: same
    offsets JSON, nothing read twice, nothing skipped."""
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"
    first = run_available_now(spark, {**known, "implementation": "python"}, checkpoint, output,
                              startingOffsets="earliest", maxOffsetsPerTrigger="20")
    admin.send_messages(stream, "known", [b"jvm-1", b"jvm-2"], partitioning=2)
    second = run_available_now(spark, {**known, "implementation": "jvm"}, checkpoint, output)
    admin.send_messages(stream, "known", [b"python-1"], partitioning=3)
    third = run_available_now(spark, {**known, "implementation": "python"}, checkpoint, output)
    assert all(query.exception() is None for query in (first, second, third))
    assert [scan_of_stream(q) for q in (first, second, third)] == ["python", "jvm", "python"]
    rows = spark.read.parquet(str(output)).collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        [(1, o) for o in range(25)] + [(2, o) for o in range(9)] + [(3, 0)])
    assert json.loads(third.lastProgress["sources"][0]["endOffset"]) == {
        f"{stream}/known": {"1": 25, "2": 9, "3": 1}}
    offsets = sorted((f for f in (checkpoint / "offsets").iterdir() if f.name.isdigit()),
                     key=lambda f: int(f.name))
    written = [f.read_text().splitlines()[-1] for f in offsets]
    assert all(line == json.dumps(json.loads(line), sort_keys=True) for line in written), written


def scan_of_stream(query) -> str:
    return "jvm" if "JVM reader" in query.lastProgress["sources"][0]["description"] else "python"
