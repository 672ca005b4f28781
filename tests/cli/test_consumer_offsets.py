"""``rill consumer-offset get|set`` against a live server."""

from __future__ import annotations

from rill.protocol.iggy.primitives import Consumer

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
                   "--partition", "2").json() == {"partition_id": 2, "current_offset": 4, "stored_offset": 3,
                                                  "reads_next": 4}
    table = cli.run("consumer-offset", "get", "orders", "eu", "--group", "workers", "--partition", "2").stdout
    assert "group workers" in table and "Stored offset" in table and "Reads next" in table
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


def _lag_fixture(cli) -> None:
    """orders/eu: partition 1 has 10 messages, 2 has 5, 3 none; group workers committed 3 in
    partition 1 (nothing elsewhere); consumer 7 committed 9 in partition 1, consumer 8 4 in 2."""
    with cli.sdk() as client:
        client.create_stream("orders")
        client.create_topic("orders", "eu", 3)
        client.send_messages("orders", "eu", [b"m"] * 10, partitioning=1)
        client.send_messages("orders", "eu", [b"m"] * 5, partitioning=2)
        client.create_consumer_group("orders", "eu", "workers")
        client.store_consumer_offset("orders", "eu", 3, Consumer.group("workers"), 1)
        client.store_consumer_offset("orders", "eu", 9, 7, 1)
        client.store_consumer_offset("orders", "eu", 4, 8, 2)


def test_list_shows_committed_end_and_lag_of_every_group_and_consumer(cli):
    _lag_fixture(cli)
    rows = cli.run("--json", "consumer-offset", "list", "orders", "eu").json()
    group = {"consumer_kind": "consumer_group", "consumer_id": 1, "group_name": "workers"}
    assert rows == [
        {**group, "partition_id": 1, "committed_offset": 3, "reads_next": 4, "end_offset": 10,
         "lag": 6},
        {**group, "partition_id": 2, "committed_offset": None, "reads_next": None, "end_offset": 5,
         "lag": 5},
        {**group, "partition_id": 3, "committed_offset": None, "reads_next": None, "end_offset": 0,
         "lag": 0},
        {"consumer_kind": "consumer", "consumer_id": 7, "partition_id": 1, "committed_offset": 9,
         "reads_next": 10, "end_offset": 10, "lag": 0},
        {"consumer_kind": "consumer", "consumer_id": 8, "partition_id": 2, "committed_offset": 4,
         "reads_next": 5, "end_offset": 5, "lag": 0},
    ]
    table = cli.run("consumer-offset", "list", "orders", "eu").stdout
    assert "Reads next" in table and "Committed" not in table  # the web console's wording
    assert [line.split() for line in table.splitlines() if "group workers" in line][0] == [
        "│", "group", "workers", "│", "1", "│", "4", "│", "10", "│", "6", "│"]
    # a new message raises every lag in its partition
    with cli.sdk() as client:
        client.send_messages("orders", "eu", [b"m"], partitioning=1)
    after = cli.run("--json", "consumer-offset", "list", "orders", "eu").json()
    assert [row["lag"] for row in after if row["partition_id"] == 1] == [7, 1]


def test_get_tells_stored_zero_from_never_stored(cli):
    """GET_CONSUMER_OFFSET answers stored_offset 0 for both (as Iggy 0.4.95); ``get`` asks
    GET_CONSUMER_LAG to keep printing "no offset stored" for a consumer that stored nothing."""
    with cli.sdk() as client:
        client.create_stream("orders")
        client.create_topic("orders", "eu", 2)
        client.send_messages("orders", "eu", [b"m"] * 3, partitioning=1)
        client.create_consumer_group("orders", "eu", "workers")
        assert client.get_consumer_offset("orders", "eu", "billing", 1).stored_offset == 0
    cli.run("consumer-offset", "set", "orders", "eu", "0", "--consumer", "billing", "--partition", "1")
    cli.run("consumer-offset", "set", "orders", "eu", "0", "--group", "workers", "--partition", "1")

    def get(*who: str, partition: str = "1"):
        return cli.run("--json", "consumer-offset", "get", "orders", "eu", *who, "--partition", partition).json()

    stored_zero = {"partition_id": 1, "current_offset": 2, "stored_offset": 0, "reads_next": 1}
    assert get("--consumer", "billing") == stored_zero  # a named consumer: its xxHash32
    assert get("--group", "workers") == stored_zero
    assert get("--group", "1") == stored_zero
    assert get("--consumer", "billing", partition="2") is None
    assert get("--consumer", "7") is None
    assert get("--group", "workers", partition="2") is None
    text = cli.run("consumer-offset", "get", "orders", "eu", "--consumer", "7").stdout
    assert "no offset stored for consumer 7 in partition 1" in text
    no_partition = cli.run("consumer-offset", "get", "orders", "eu", "--partition", "9", ok=False)
    assert_error_line(no_partition, "(3007 partition_not_found)")
