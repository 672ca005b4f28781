"""The connector over each binary transport: QUIC reads and exactly-once writes against the
session's rill server (its QUIC listener), and HTTP refused with a clear message (the
extension commands the connector needs are binary-only)."""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F


@pytest.fixture
def quic(rill, options) -> dict[str, str]:
    host, port = rill.quic_address
    return {**options, "servers": f"{host}:{port}", "transport": "quic", "caFile": rill.certificate}


def test_quic_refuses_an_untrusted_certificate_naming_the_option(spark, admin, stream, quic) -> None:
    admin.create_topic(stream, "t", partitions_count=1)
    admin.send_messages(stream, "t", [b"x"], partitioning=1)
    untrusted = {key: value for key, value in quic.items() if key != "caFile"}
    with pytest.raises(PySparkException) as caught:
        spark.read.format("rill").options(**untrusted, topic="t").load().collect()
    assert "is not trusted" in str(caught.value) and "caFile" in str(caught.value)
    opted_out = spark.read.format("rill").options(**untrusted, verifyCertificate="false",
                                                   topic="t").load().collect()
    assert [row.value for row in opted_out] == [b"x"]


def test_read_and_exactly_once_write_over_quic(spark, admin, stream, quic) -> None:
    admin.create_topic(stream, "in", partitions_count=2)
    admin.create_topic(stream, "out", partitions_count=2)
    for partition in (1, 2):
        admin.send_messages(stream, "in", [f"{partition}-{i}".encode() for i in range(300)],
                            partitioning=partition)
    source = spark.read.format("rill").options(**quic, topic="in").load()
    rows = source.select("partition", "offset", "value").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [
        (p, o) for p in (1, 2) for o in range(300)]
    assert all(r.value == f"{r.partition}-{r.offset}".encode() for r in rows)
    (source.select("value", F.col("value").alias("key")).write.format("rill")
     .options(**quic, topic="out", sinkMode="exactlyOnce", producerId="over-quic")
     .mode("append").save())
    back = spark.read.format("rill").options(**quic, topic="out").load().collect()
    assert sorted(r.value for r in back) == sorted(r.value for r in rows)
    assert all(r.key == r.value for r in back)
    state = admin.get_producer_state("over-quic")
    assert (state.last_batch, state.staged_handles) == (0, 0)


def test_http_is_refused_naming_the_option(spark, admin, stream, options, rill) -> None:
    admin.create_topic(stream, "t", partitions_count=1)
    http = {**options, "servers": rill.http_url.removeprefix("http://"), "transport": "http"}
    with pytest.raises(PySparkException) as read:
        spark.read.format("rill").options(**http, topic="t").load().collect()
    with pytest.raises(PySparkException) as write:
        (spark.range(1).select(F.lit(b"x").alias("value")).write.format("rill")
         .options(**http, topic="t").mode("append").save())
    for caught in (read, write):
        assert "option 'transport' must be tcp or quic, got 'http'" in str(caught.value)
        assert "HTTP does not serve" in str(caught.value)
