"""The data source itself: discovery and registration, SQL temporary views, the schema."""

from __future__ import annotations

import pyspark_rill
from pyspark_rill.source import RillDataSource


def test_discovered_by_spark_and_registrable(spark, admin, stream, options) -> None:
    assert pyspark_rill.DefaultSource is RillDataSource and RillDataSource.name() == "rill"
    admin.create_topic(stream, "t", partitions_count=1)
    admin.send_messages(stream, "t", [b"found"])
    # the session never registered the source: Spark found the installed pyspark_rill
    assert spark.read.format("rill").options(**options, topic="t").load().count() == 1
    pyspark_rill.register(spark)  # what --py-files users and notebooks do; idempotent
    assert spark.read.format("rill").options(**options, topic="t").load().count() == 1


def test_sql_temporary_view_select_and_insert(spark, admin, stream, options) -> None:
    admin.create_topic(stream, "t", partitions_count=2)
    admin.send_messages(stream, "t", [b"a", b"b"], partitioning=1)
    settings = ", ".join(f"{key} '{value}'" for key, value in {**options, "topic": "t"}.items())
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW clicks USING rill OPTIONS ({settings})")
    assert spark.sql("SELECT count(*) AS n FROM clicks").first().n == 2
    # the view's columns: stream/topic/offset/timestamp are ignored (the options name the
    # target); partition 2 and the 16-byte id are used
    spark.sql("INSERT INTO clicks SELECT 'ignored', 'ignored', 2, 0, "
              "X'0102030405060708090A0B0C0D0E0F10', current_timestamp(), NULL, "
              "CAST('c' AS BINARY), NULL")
    # the view keeps the offsets it resolved when first planned: a new load() sees the insert
    fresh = spark.read.format("rill").options(**options, topic="t").load()
    assert sorted(r.value for r in fresh.collect()) == [b"a", b"b", b"c"]
    inserted = fresh.where("value = X'63'").first()
    assert (inserted.partition, inserted.id) == (2, bytes(range(1, 17)))
