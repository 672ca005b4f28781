"""``rill consumer-offset get|set`` against a live server."""

from __future__ import annotations

from .helpers import assert_error_line


def test_set_and_get_offsets_and_errors(cli):
    with cli.sdk() as client:
        client.create_stream("orders")
        client.create_topic("orders", "eu", 2)
        client.send_messages("orders", "eu", [b"m"] * 5, partitioning=2)
        client.create_consumer_group("orders", "eu", "workers")

    assert cli.run("--json", "consumer-offset", "get", "orders", "eu", "--consumer", "7",
                   "--partition", "2").json() is None
    stored = cli.run("consumer-offset", "set", "orders", "eu", "3", "--consumer", "7", "--partition", "2")
    assert "offset 3 stored for consumer 7 in partition 2" in stored.stdout
    cli.run("consumer-offset", "set", "orders", "eu", "1", "--group", "workers", "--partition", "2")

    assert cli.run("--json", "consumer-offset", "get", "orders", "eu", "--consumer", "7",
                   "--partition", "2").json() == {"partition_id": 2, "current_offset": 4, "stored_offset": 3}
    table = cli.run("consumer-offset", "get", "orders", "eu", "--group", "workers", "--partition", "2").stdout
    assert "group workers" in table and "Stored offset" in table
    with cli.sdk() as client:
        assert client.get_consumer_offset("orders", "eu", 7, 2).stored_offset == 3

    too_far, no_topic, get_no_topic = cli.run_many(
        ("consumer-offset", "set", "orders", "eu", "100", "--partition", "2"),
        ("consumer-offset", "set", "orders", "ghost", "0"),
        ("consumer-offset", "get", "orders", "ghost"),
    )
    assert_error_line(too_far, "invalid offset: 100 (4100 invalid_offset)")
    assert_error_line(no_topic, "(2011 topic_name_not_found)")
    assert_error_line(get_no_topic, "topic with name ghost for stream with name orders was not found")
