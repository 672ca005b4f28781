"""Writing DataFrames to rill with a local Spark (``local[2,3]``: tasks are retried): round
trips, task retries and aborts with both sink modes, a replayed streaming batch, and the
exactly-once producer's owner (a producerId reused by another query or checkpoint fails).
Every test runs on both implementations (the ``options`` here carry ``implementation``)."""

from __future__ import annotations

import time

import pytest
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql import functions as F

from rill.client import Message

from conftest import writer_of

ROWS = 3000


@pytest.fixture
def options(options, implementation) -> dict[str, str]:
    """This test's options, with the implementation that writes (and reads back)."""
    return {**options, **implementation}


def source_frame(spark, rows: int = ROWS, parts: int = 2):
    """``rows`` distinct 100-byte values ("xx...x17"), in ``parts`` partitions."""
    return spark.range(0, rows, 1, parts).select(
        F.lpad(F.col("id").cast("string"), 100, "x").cast("binary").alias("value"))


def payloads(spark, options, topic: str) -> list[bytes]:
    df = spark.read.format("rill").options(**{**options, "topic": topic}).load()
    return [row.value for row in df.select("value").collect()]


def write(df, options, topic: str, **extra):
    df.write.format("rill").options(**options, topic=topic, **extra).mode("append").save()


def test_round_trip_with_keys_headers_and_ids(spark, admin, stream, options) -> None:
    admin.create_topic(stream, "in", partitions_count=2)
    admin.create_topic(stream, "out", partitions_count=3)
    df = spark.createDataFrame(
        [(b"v1", "k1", {"h": b"x"}, bytes(range(16))), (b"v2", None, None, None),
         (b"v3", "k1", None, None)],
        "value BINARY, key STRING, headers MAP<STRING, BINARY>, id BINARY")
    write(df, options, "out")
    assert writer_of(spark) == options["implementation"]
    back = spark.read.format("rill").options(**options, topic="out").load()
    rows = {row.value: row for row in back.collect()}
    assert set(rows) == {b"v1", b"v2", b"v3"}
    assert rows[b"v1"].key == b"k1" and rows[b"v1"].headers == {"h": b"x"}
    assert rows[b"v1"].id == bytes(range(16)) and rows[b"v2"].key is None
    assert rows[b"v1"].partition == rows[b"v3"].partition  # same key, same partition
    # topic to topic: a read DataFrame can be written back as it is
    admin.send_messages(stream, "in", [Message(b"copied")], partitioning=2)
    write(spark.read.format("rill").options(**options, topic="in").load(), options, "out")
    assert sorted(payloads(spark, options, "out")) == [b"copied", b"v1", b"v2", b"v3"]


@pytest.mark.parametrize("sink_mode", ["atLeastOnce", "exactlyOnce"])
def test_rows_routed_per_row_by_topic_and_partition_columns(spark, admin, stream, options,
                                                            sink_mode) -> None:
    """STRING values, each row naming its topic (interleaved) and, for some, its partition:
    every row lands where it names, in its task's order, with a checksum the server accepts."""
    admin.create_topic(stream, "even", partitions_count=2)
    admin.create_topic(stream, "odd", partitions_count=3)
    rows = [(f"välue-{n:05d}", "even" if n % 2 == 0 else "odd", 3 if n % 10 == 1 else None)
            for n in range(400)]
    df = spark.createDataFrame(rows, "value STRING, topic STRING, partition INT").coalesce(1)
    df.write.format("rill").options(**{k: v for k, v in options.items() if k != "topic"},
                                    sinkMode=sink_mode).mode("append").save()
    for topic, parity in (("even", 0), ("odd", 1)):
        back = spark.read.format("rill").options(**{**options, "topic": topic}).load()
        found = [(r.partition, r.offset, r.value.decode()) for r in back.collect()]
        expected = [value for value, target, _ in rows if target == topic]
        assert sorted(value for _, _, value in found) == expected
        pinned = sorted(value for partition, _, value in found if partition == 3)
        assert pinned == [v for v, t, p in rows if t == topic and p == 3]
        assert (parity == 1) == bool(pinned)
        for partition in {p for p, _, _ in found}:  # each partition holds its rows in order
            in_order = [v for p, _, v in sorted(found) if p == partition]
            assert in_order == sorted(in_order)


def test_exactly_once_batch_write_is_idempotent_per_producer(spark, admin, stream, options):
    admin.create_topic(stream, "out", partitions_count=2)
    df = source_frame(spark)
    producer = f"nightly-job-{stream}"  # one per test and implementation: the server's
    write(df, options, "out", sinkMode="exactlyOnce", producerId=producer)
    write(df, options, "out", sinkMode="exactlyOnce", producerId=producer)  # a re-run
    values = payloads(spark, options, "out")
    assert len(values) == ROWS and len(set(values)) == ROWS
    state = admin.get_producer_state(producer)
    assert (state.last_batch, state.staged_handles) == (0, 0)


def flaky(df, fail_always: bool):
    """``df`` whose task 0 dies at row 1450, after the sink got its first 1000 rows (100 KB:
    more than the 64 KB Spark buffers before it flushes rows to a Python writer), on the first
    attempt only unless ``fail_always``. A plain Python UDF: no pandas needed."""

    @F.udf("binary")
    def check(value):
        from pyspark import TaskContext

        context = TaskContext.get()
        if value.lstrip(b"x") == b"1450" and (fail_always or context.attemptNumber() == 0):
            raise RuntimeError("injected task failure")
        return value

    return df.select(check("value").alias("value"))


def test_a_task_retry_leaves_no_duplicate_with_the_exactly_once_sink(
        spark, admin, stream, options) -> None:
    admin.create_topic(stream, "direct", partitions_count=1)
    admin.create_topic(stream, "exact", partitions_count=1)
    df = flaky(source_frame(spark), fail_always=False)
    # atLeastOnce: the failed attempt's rows already sent stay (requests of 64 KB: the JVM
    # writer sends them as the rows come, before the failure)
    write(df, options, "direct", maxRequestBytes="65536")
    write(df, options, "exact", sinkMode="exactlyOnce")
    direct = payloads(spark, options, "direct")
    assert len(set(direct)) == ROWS and len(direct) > ROWS
    exact = payloads(spark, options, "exact")
    assert len(exact) == ROWS and len(set(exact)) == ROWS


def test_an_aborted_job_leaves_nothing(spark, admin, stream, options) -> None:
    admin.create_topic(stream, "exact", partitions_count=2)
    df = flaky(source_frame(spark), fail_always=True)
    with pytest.raises(PySparkException, match="injected task failure"):
        write(df, options, "exact", sinkMode="exactlyOnce", producerId=f"doomed-{stream}")
    assert payloads(spark, options, "exact") == []
    state = admin.get_producer_state(f"doomed-{stream}")
    assert (state.last_batch, state.staged_handles, state.staged_messages) == (None, 0, 0)


def test_wrong_column_types_and_overwrite_fail_clearly(spark, admin, stream, options) -> None:
    admin.create_topic(stream, "out", partitions_count=1)
    with pytest.raises(PySparkException, match="column 'value' must be BINARY or STRING"):
        write(spark.range(3).select(F.col("id").alias("value")), options, "out")
    with pytest.raises(PySparkException, match="append-only"):
        source_frame(spark, 3).write.format("rill").options(**options, topic="out") \
            .mode("overwrite").save()
    with pytest.raises(PySparkException, match="topic 'missing'"):
        write(source_frame(spark, 3), options, "missing")


def stream_copy(spark, options, checkpoint, **extra):
    query = (spark.readStream.format("rill")
             .options(**options, topic="in", startingOffsets="earliest",
                      maxOffsetsPerTrigger="500").load()
             .select("value", "key")
             .writeStream.format("rill").options(**options, topic="out", **extra)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(120)
    return query


def test_a_replayed_streaming_batch_is_a_no_op(spark, admin, stream, options, tmp_path):
    admin.create_topic(stream, "in", partitions_count=2)
    admin.create_topic(stream, "out", partitions_count=2)
    for partition in (1, 2):
        admin.send_messages(stream, "in", [f"{partition}-{i}".encode() for i in range(600)],
                            partitioning=partition)
    checkpoint = tmp_path / "checkpoint"
    query = stream_copy(spark, options, checkpoint, sinkMode="exactlyOnce")
    assert len(payloads(spark, options, "out")) == 1200
    # forget that the last batch was committed: Spark replays it at the next start, and the
    # sink must append nothing (the server recorded the batch with the data)
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    admin.send_messages(stream, "in", [b"late"], partitioning=1)
    stream_copy(spark, options, checkpoint, sinkMode="exactlyOnce")
    values = payloads(spark, options, "out")
    assert len(values) == 1201 and len(set(values)) == 1201
    state = admin.get_producer_state(query.id)
    assert state.has_committed and state.staged_handles == 0


# ---------------------------------------------------------------- a producerId shared by two queries


def fill_input(admin, stream, per_partition: int = 600, prefix: str = "") -> None:
    for partition in (1, 2):
        admin.send_messages(stream, "in", [f"{prefix}{partition}-{i}".encode()
                                           for i in range(per_partition)], partitioning=partition)


def forget_last_commit(checkpoint) -> None:
    """Make Spark replay the checkpoint's last batch at the next start (as after a driver crash
    between the sink's commit and the checkpoint's)."""
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)


def test_a_producer_id_reused_on_a_fresh_checkpoint_fails_loudly_and_writes_nothing(
        spark, admin, stream, options, tmp_path):
    """Batch ids start again at 0 on a fresh checkpoint: with the producerId of another query
    its first batches must not be taken for replays of that query's (issue 10, item 16)."""
    admin.create_topic(stream, "in", partitions_count=2)
    admin.create_topic(stream, "out", partitions_count=2)
    fill_input(admin, stream)
    first = tmp_path / "first"
    sink = {"sinkMode": "exactlyOnce", "producerId": f"shared-producer-{stream}"}
    stream_copy(spark, options, first, **sink)
    assert len(payloads(spark, options, "out")) == 1200
    with pytest.raises(StreamingQueryException,
                       match=f"option 'producerId': producer 'shared-producer-{stream}' belongs "
                             "to another"):
        stream_copy(spark, options, tmp_path / "fresh", **sink)
    assert len(payloads(spark, options, "out")) == 1200  # nothing written, nothing dropped
    state = admin.get_producer_state(f"shared-producer-{stream}")
    assert state.staged_handles == 0
    # the first query, restarted on its own checkpoint, replays its last batch (a no-op) and
    # writes its new batches
    forget_last_commit(first)
    fill_input(admin, stream, 5, prefix="late ")
    stream_copy(spark, options, first, **sink)
    values = payloads(spark, options, "out")
    assert len(values) == 1210 and len(set(values)) == 1210


def test_a_second_query_sharing_a_running_querys_producer_id_fails(
        spark, admin, stream, options, tmp_path):
    admin.create_topic(stream, "in", partitions_count=2)
    admin.create_topic(stream, "out", partitions_count=2)
    fill_input(admin, stream)

    def start(checkpoint):
        return (spark.readStream.format("rill")
                .options(**options, topic="in", startingOffsets="earliest",
                         maxOffsetsPerTrigger="200").load()
                .select("value")
                .writeStream.format("rill")
                .options(**options, topic="out", sinkMode="exactlyOnce",
                         producerId=f"etl-{stream}")
                .option("checkpointLocation", str(checkpoint))
                .trigger(processingTime="1 second").start())

    running = start(tmp_path / "running")
    try:
        deadline = time.monotonic() + 120
        while admin.get_producer_state(f"etl-{stream}").last_batch is None:
            assert running.exception() is None and time.monotonic() < deadline
            time.sleep(0.2)
        second = start(tmp_path / "second")
        with pytest.raises(StreamingQueryException, match="belongs to another writer"):
            second.awaitTermination(120)
        while admin.get_topic(stream, "out").topic.messages_count < 1200:
            assert running.exception() is None and time.monotonic() < deadline
            time.sleep(0.2)
        assert running.isActive and running.exception() is None  # the owner is unharmed
    finally:
        running.stop()
    values = payloads(spark, options, "out")
    assert len(values) == 1200 and len(set(values)) == 1200


def test_a_checkpoint_behind_the_producers_history_fails_instead_of_skipping(
        spark, admin, stream, options, tmp_path):
    """A checkpoint rolled back (restored from a backup): Spark replays a batch the server
    committed *before* its last one, so the batch after it would be taken for a replay too
    and the rows added since dropped. The sink refuses the first such replay."""
    admin.create_topic(stream, "in", partitions_count=2)
    admin.create_topic(stream, "out", partitions_count=2)
    fill_input(admin, stream)
    checkpoint = tmp_path / "checkpoint"
    query = stream_copy(spark, options, checkpoint, sinkMode="exactlyOnce")
    last = admin.get_producer_state(query.id).last_batch
    assert last >= 2
    for log in ("commits", "offsets"):  # back to the end of batch last - 2
        for batch in (last, last - 1):
            (checkpoint / log / str(batch)).unlink(missing_ok=True)
            (checkpoint / log / f".{batch}.crc").unlink(missing_ok=True)
    fill_input(admin, stream, 5, prefix="late ")
    with pytest.raises(StreamingQueryException, match="already committed"):
        stream_copy(spark, options, checkpoint, sinkMode="exactlyOnce")
    assert len(payloads(spark, options, "out")) == 1200
