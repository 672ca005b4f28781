"""The Structured Streaming job of the reference pipeline: clicks per page per window.

Reads JSON click events from rill, counts clicks per page in tumbling event-time windows with
a watermark (late events up to the watermark delay still count; a window is emitted once the
watermark passes its end), and writes every finished window twice:

* to another rill topic, exactly once (``sinkMode=exactlyOnce``): value = the window as JSON,
  key = the page;
* to Parquet files.

Each sink is its own streaming query with its own checkpoint, so each is exactly once by
itself. Run it with spark-submit (see README, "Spark connector") or through ``run.py``.

usage: spark-submit job.py --servers HOST:PORT --checkpoint DIR --parquet DIR
                           [--trigger available-now|continuous]
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

CLICK = "user STRING, page STRING, ts TIMESTAMP"


def windowed_counts(spark: SparkSession, options: dict[str, str], topic: str,
                    window: str, watermark: str) -> DataFrame:
    clicks = (spark.readStream.format("rill").options(**options, topic=topic).load()
              .select(F.from_json(F.col("value").cast("string"), CLICK).alias("click"))
              .select("click.*"))
    return (clicks.withWatermark("ts", watermark)
            .groupBy(F.window("ts", window).alias("window"), "page").count()
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "page", "count"))


def start(spark: SparkSession, options: dict[str, str], checkpoint: str, parquet: str,
          available_now: bool, source_topic: str = "clicks", target_topic: str = "page_counts",
          window: str = "10 seconds", watermark: str = "5 seconds") -> list:
    """Start both queries; returns them (wait with ``awaitTermination``)."""
    counts = windowed_counts(spark, {**options, "startingOffsets": "earliest"}, source_topic,
                             window, watermark)

    def trigger(writer):
        return writer.trigger(availableNow=True) if available_now else writer.trigger(
            processingTime="2 seconds")

    to_rill = trigger(
        counts.select(F.to_json(F.struct(*counts.columns)).alias("value"),
                      F.col("page").alias("key"))
        .writeStream.format("rill").outputMode("append")
        .options(**options, topic=target_topic, sinkMode="exactlyOnce")
        .option("checkpointLocation", f"{checkpoint}/rill")).start()
    to_parquet = trigger(
        counts.writeStream.format("parquet").outputMode("append")
        .option("path", parquet).option("checkpointLocation", f"{checkpoint}/parquet")).start()
    return [to_rill, to_parquet]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="127.0.0.1:8090")
    parser.add_argument("--username", default="iggy")
    parser.add_argument("--password", default="iggy")
    parser.add_argument("--stream", default="analytics")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--parquet", required=True)
    parser.add_argument("--trigger", choices=("available-now", "continuous"),
                        default="available-now")
    args = parser.parse_args()
    spark = SparkSession.builder.appName("rill-clickstream").getOrCreate()
    import pyspark_rill

    pyspark_rill.register(spark)  # needed when pyspark_rill comes with --py-files
    options = {"servers": args.servers, "username": args.username, "password": args.password,
               "stream": args.stream}
    for query in start(spark, options, args.checkpoint, args.parquet,
                       args.trigger == "available-now"):
        query.awaitTermination()


if __name__ == "__main__":
    main()
