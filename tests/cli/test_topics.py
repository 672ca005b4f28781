"""``rill topic ...`` and ``rill partition ...`` against a live server."""

from __future__ import annotations

import pytest

from .helpers import assert_error_line

HOUR_US = 3_600_000_000


def test_topic_and_partition_verbs(cli):
    with cli.sdk() as client:
        client.create_stream("orders")

    created = cli.run("--json", "topic", "create", "orders", "eu", "--partitions", "3",
                      "--message-expiry", "1h", "--max-size", "unlimited", "--compression", "gzip").json()
    assert created["name"] == "eu" and created["partitions_count"] == 3
    assert (created["message_expiry"], created["max_topic_size"], created["compression_algorithm"]) == \
        (HOUR_US, None, "gzip")
    assert [p["id"] for p in created["partitions"]] == [1, 2, 3]
    assert "topic 2 'us' created" in cli.run("topic", "create", "orders", "us").stdout

    listed = cli.run("--json", "topic", "list", "orders").json()
    assert [(t["id"], t["name"]) for t in listed] == [(1, "eu"), (2, "us")]
    table = cli.run("topic", "get", "orders", "eu").stdout
    assert "Partitions" in table and "1h" in table and "unlimited" in table

    cli.run("topic", "update", "orders", "eu", "--name", "europe", "--message-expiry", "never")
    cli.run("partition", "create", "orders", "europe", "2")
    cli.run("partition", "delete", "orders", "europe")
    with cli.sdk() as client:
        client.send_messages("orders", "europe", [b"x"], partitioning=1)
    cli.run("topic", "purge", "orders", "europe")

    topic = cli.run("--json", "topic", "get", "orders", "1").json()
    assert (topic["name"], topic["message_expiry"], topic["compression_algorithm"]) == ("europe", None, "gzip")
    assert topic["max_topic_size"] is None  # untouched options keep their value
    assert [p["id"] for p in topic["partitions"]] == [1, 2, 3, 4]
    assert topic["messages_count"] == 0

    cli.run("topic", "delete", "orders", "us")
    with cli.sdk() as client:
        assert [t.name for t in client.get_topics("orders")] == ["europe"]


def test_topic_and_partition_errors(cli):
    with cli.sdk() as client:
        client.create_stream("orders")
        client.create_topic("orders", "eu")
    no_stream, no_topic, no_partition_topic, taken = cli.run_many(
        ("topic", "get", "nope", "eu"),
        ("topic", "get", "orders", "5"),
        ("partition", "create", "orders", "ghost"),
        ("topic", "create", "orders", "eu"),
    )
    assert_error_line(no_stream, "stream with name nope was not found (1010 stream_name_not_found)")
    assert_error_line(no_topic, "topic with ID 5 for stream with name orders was not found (2010 topic_id_not_found)")
    assert_error_line(no_partition_topic, "(2011 topic_name_not_found)")
    assert_error_line(taken, "(2013 topic_name_already_exists)")

    bad = cli.run("topic", "create", "orders", "x", "--message-expiry", "5parsecs", ok=False)
    assert bad.returncode == 2 and "5parsecs" in bad.stderr


@pytest.mark.parametrize("transport", ["tcp", "http"])
def test_the_record_format_is_chosen_at_creation_and_shown(cli, rill_server, transport):
    """``topic create --format kafka|iggy`` (default iggy), shown by ``topic get`` (table and
    JSON) and ``topic list --json``; a bad name is one error line."""
    over = () if transport == "tcp" else (
        "--transport", "http", "--address", "%s:%d" % rill_server.http_address)
    run = lambda *args, **options: cli.run(*over, *args, **options)  # noqa: E731
    stream = f"formats-{transport}"
    run("stream", "create", stream)
    created = run("--json", "topic", "create", stream, "k", "--format", "kafka").json()
    assert created["record_format"] == "kafka"
    run("topic", "create", stream, "i", "--format", "iggy")
    run("topic", "create", stream, "plain")

    listed = run("--json", "topic", "list", stream).json()
    assert [(t["name"], t["record_format"]) for t in listed] == [
        ("k", "kafka"), ("i", "iggy"), ("plain", "iggy")]
    assert run("--json", "topic", "get", stream, "k").json()["record_format"] == "kafka"
    assert [t["record_format"] for t in run("--json", "stream", "get", stream).json()["topics"]] \
        == ["kafka", "iggy", "iggy"]
    table = run("topic", "get", stream, "k").stdout
    assert any("Format" in line and "kafka" in line for line in table.splitlines()), table
    with cli.sdk() as client:  # what the server stores
        assert {f.topic_id: f.record_format for f in client.get_topic_record_formats(stream)} \
            == {1: "kafka", 2: "iggy", 3: "iggy"}

    bad = run("topic", "create", stream, "x", "--format", "avro", ok=False)
    assert_error_line(bad, "record_format must be one of iggy, kafka, not 'avro'")
