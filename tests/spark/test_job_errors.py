"""Errors a user can act on, from the JVM implementation (the default where it is built): a
wrong option, a missing topic, an unreachable server and a lost permission fail the query
with the option or the cause on one line, and no stack trace of the connector's code (a
task's failure reason is ``rill.spark.RillError: <cause>``)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from rill.protocol.permissions import GlobalPermissions, Permissions

READER = Permissions(GlobalPermissions(read_streams=True, read_topics=True, poll_messages=True))
WRITER = Permissions(GlobalPermissions(read_streams=True, read_topics=True, poll_messages=True,
                                       send_messages=True))


def failure(action) -> str:
    with pytest.raises(Exception) as caught:
        action()
    return str(caught.value)


def assert_one_line(text: str, cause: str) -> None:
    """``cause`` is on one line of the error, and the connector's frames are not printed."""
    assert any(cause in line for line in text.splitlines()), text
    assert "at rill.spark." not in text, text


def values(spark, rows: int = 5):
    return spark.range(rows).select(F.col("id").cast("string").alias("value"))


@pytest.fixture
def user(admin, stream, options):
    """A user 'u<stream>' who may read and write every stream; its options."""
    name = f"u{stream}"
    admin.create_user(name, "secret-password", permissions=WRITER)
    admin.create_topic(stream, "t", partitions_count=2)
    return name, {**options, "username": name, "password": "secret-password", "topic": "t"}


@pytest.mark.parametrize("mode", ["atLeastOnce", "exactlyOnce"])
def test_a_write_without_the_permission_names_it(spark, admin, user, mode) -> None:
    name, options = user
    admin.update_permissions(name, READER)  # the send permission is lost
    text = failure(lambda: values(spark).write.format("rill").options(**options, sinkMode=mode)
                   .mode("append").save())
    assert_one_line(text, "rill.spark.RillError: the rill server at ")
    assert_one_line(text, "refused the write: status 41 (unauthorized: the user lacks the "
                          "permission")


def test_a_streaming_read_that_loses_its_permission_names_it(spark, admin, user, tmp_path) -> None:
    name, options = user
    admin.send_messages(options["stream"], "t", [b"one"], partitioning=1)

    def run():
        (spark.readStream.format("rill").options(**options, startingOffsets="earliest").load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "checkpoint"))
         .trigger(availableNow=True).start().awaitTermination(120))

    run()
    admin.update_permissions(name, Permissions(GlobalPermissions(read_streams=True)))
    admin.send_messages(options["stream"], "t", [b"two"], partitioning=1)
    text = failure(run)
    assert_one_line(text, "refused a read of stream")
    assert_one_line(text, "status 41 (unauthorized")


def test_a_write_to_a_missing_topic_or_with_a_wrong_option_fails_before_any_task(
        spark, options) -> None:
    text = failure(lambda: values(spark).write.format("rill").options(**options, topic="missing")
                   .mode("append").save())
    assert text.splitlines()[0].endswith(
        f"topic 'missing' of stream '{options['stream']}' does not exist (named by option or "
        "column 'stream'/'topic')"), text
    text = failure(lambda: values(spark).write.format("rill").options(**options, topic="t",
                                                                      sinkMode="twice")
                   .mode("append").save())
    assert text.splitlines()[0].endswith("option 'sinkMode' must be atLeastOnce or exactlyOnce, "
                                         "got 'twice'"), text


def test_a_write_to_an_unreachable_server_names_the_option(spark, options) -> None:
    unreachable = {**options, "servers": "127.0.0.1:1", "reconnectAttempts": "0", "topic": "t"}
    text = failure(lambda: values(spark).write.format("rill").options(**unreachable)
                   .mode("append").save())
    first = text.splitlines()[0]
    assert ("rill.errors.CannotEstablishConnection: option 'servers': cannot reach a rill server "
            "at 127.0.0.1:1 over tcp (1 rounds, gave up after ") in first, text
    assert first.endswith("options reconnectAttempts=0, reconnectBackoff=1): 127.0.0.1:1: "
                          "Connection refused"), text
