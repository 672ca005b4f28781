"""A streaming job run as its own Spark driver process, so that a test can kill -9 it: topic
``in`` -> upper-cased values -> topic ``out`` of one stream, exactly once; reads and writes by
the JVM implementation when it is built. Run by test_exactly_once.py with this interpreter
(a local Spark, ``local[2]``) and by test_cluster.py with ``spark-submit`` to a standalone
cluster (then spark-submit's ``--master`` and ``--jars`` hold).

usage: python stream_job.py SERVERS STREAM CHECKPOINT (continuous | available-now)
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import pyspark_rill


def transform(values):
    """What the job does to each value (a Column); ``expected`` is its twin."""
    return F.upper(values.cast("string"))


def feed(admin, stream: str, per_partition: int) -> list[bytes]:
    """Topics ``in`` and ``out`` (2 partitions each), ``in`` filled: the values sent."""
    admin.create_topic(stream, "in", partitions_count=2)
    admin.create_topic(stream, "out", partitions_count=2)
    sent = []
    for partition in (1, 2):
        values = [f"p{partition}-{i}".encode() for i in range(per_partition)]
        admin.send_messages(stream, "in", values, partitioning=partition)
        sent += values
    return sent


def out_count(admin, stream: str) -> int:
    return admin.get_topic(stream, "out").topic.messages_count


def assert_exactly_once(admin, stream: str, sent: list[bytes]) -> None:
    """Topic ``out`` holds the job's output of every value sent, each once."""
    total = len(sent)
    got = sorted(m.payload for p in (1, 2)
                 for m in admin.poll_messages_columnar(stream, "out", p, 0, 10 * total).messages)
    assert len(got) == total, f"{len(got)} messages out of {total} sent"
    assert got == sorted(value.upper() for value in sent)


def main() -> None:
    servers, stream, checkpoint, mode = sys.argv[1:5]
    builder = (SparkSession.builder.appName("rill-stream-job")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2"))
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not started by spark-submit: a local Spark
        # (a short-lived JVM: the quick JIT tier only, as standalone.py's)
        builder = builder.master("local[2]").config(
            "spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    # the JVM implementation reads and writes (where it was built)
    spark = pyspark_rill.configure(builder, loopback=True).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    options = {"servers": servers, "username": "iggy", "password": "iggy", "stream": stream}
    # continuous: micro-batches of 300 rows, so that a test can kill the job mid-stream;
    # available-now (a restart): one batch for what is left
    limit = {"maxOffsetsPerTrigger": "300"} if mode == "continuous" else {}
    writer = (spark.readStream.format("rill").options(**options, **limit, topic="in",
                                                      startingOffsets="earliest").load()
              .select(transform(F.col("value")).alias("value"))
              .writeStream.format("rill").options(**options, topic="out", sinkMode="exactlyOnce")
              .option("checkpointLocation", checkpoint))
    if mode == "available-now":
        writer.trigger(availableNow=True).start().awaitTermination()
    else:
        print("started", flush=True)
        writer.trigger(processingTime="0 seconds").start().awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
