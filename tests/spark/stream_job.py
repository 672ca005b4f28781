"""A streaming job run as its own Spark driver process by test_exactly_once.py (so that the
test can kill -9 it): topic ``in`` -> topic ``out`` of one stream, exactly once; reads and
writes by the JVM implementation when it is built.

usage: python stream_job.py SERVERS STREAM CHECKPOINT (continuous | available-now)
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession

import pyspark_rill


def main() -> None:
    servers, stream, checkpoint, mode = sys.argv[1:5]
    builder = (SparkSession.builder.master("local[2]").appName("rill-kill-test")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2"))
    # the JVM implementation reads and writes (where it was built)
    spark = pyspark_rill.configure(builder, loopback=True).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    options = {"servers": servers, "username": "iggy", "password": "iggy", "stream": stream}
    writer = (spark.readStream.format("rill").options(**options, topic="in",
                                                      startingOffsets="earliest",
                                                      maxOffsetsPerTrigger="300").load()
              .select("value")
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
