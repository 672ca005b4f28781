"""``rill consumer-group ...`` and ``rill message poll --group`` against a live server.

Needs the consumer-group commands of the server (600-605).
"""

from __future__ import annotations

from rill.protocol.iggy.primitives import Consumer

from .helpers import assert_error_line


def test_consumer_group_verbs_group_polling_and_errors(cli):
    with cli.sdk() as client:
        client.create_stream("orders")
        client.create_topic("orders", "eu", 2)
        client.send_messages("orders", "eu", [b"one", b"two"], partitioning=1)

    created = cli.run("--json", "consumer-group", "create", "orders", "eu", "workers", "--id", "4").json()
    assert created == {"id": 4, "name": "workers", "partitions_count": 2, "members_count": 0, "members": []}
    assert "'audit' created" in cli.run("consumer-group", "create", "orders", "eu", "audit").stdout

    listed = cli.run("--json", "consumer-group", "list", "orders", "eu").json()
    assert sorted((g["name"], g["members_count"]) for g in listed) == [("audit", 0), ("workers", 0)]
    assert {g["name"]: g["id"] for g in listed}["workers"] == 4

    joined = cli.run("--json", "consumer-group", "join", "orders", "eu", "workers").json()
    assert joined["members_count"] == 1
    assert sorted(joined["members"][0]["partitions"]) == [1, 2]
    # the membership ended with that command's connection
    assert cli.run("--json", "consumer-group", "get", "orders", "eu", "4").json()["members_count"] == 0

    polled = cli.run("--json", "message", "poll", "orders", "eu", "--group", "workers", "--partition", "1",
                     "--first", "--count", "5").json()
    assert [m["payload"] for m in polled["messages"]] == ["one", "two"]

    cli.run("consumer-group", "delete", "orders", "eu", "audit")
    with cli.sdk() as client:
        assert [g.name for g in client.get_consumer_groups("orders", "eu")] == ["workers"]

    missing, taken, no_stream = cli.run_many(
        ("consumer-group", "get", "orders", "eu", "nope"),
        ("consumer-group", "create", "orders", "eu", "workers"),
        ("consumer-group", "list", "ghost", "eu"),
    )
    assert_error_line(missing, "consumer group with name nope for topic with name eu was not found "
                               "(5003 consumer_group_name_not_found)")
    assert_error_line(taken, "(5004 consumer_group_name_already_exists)")
    assert_error_line(no_stream, "(1010 stream_name_not_found)")


def test_get_shows_committed_end_and_lag_per_partition(cli):
    with cli.sdk() as client:
        client.create_stream("orders")
        client.create_topic("orders", "eu", 2)
        client.send_messages("orders", "eu", [b"m"] * 10, partitioning=1)
        client.send_messages("orders", "eu", [b"m"] * 4, partitioning=2)
        client.create_consumer_group("orders", "eu", "workers")
        client.create_consumer_group("orders", "eu", "auditors")
        client.store_consumer_offset("orders", "eu", 6, Consumer.group("workers"), 1)
        client.store_consumer_offset("orders", "eu", 0, Consumer.group("auditors"), 2)

    shown = cli.run("--json", "consumer-group", "get", "orders", "eu", "workers").json()
    assert shown["partitions"] == [
        {"partition_id": 1, "committed_offset": 6, "reads_next": 7, "end_offset": 10, "lag": 3},
        {"partition_id": 2, "committed_offset": None, "reads_next": None, "end_offset": 4, "lag": 4},
    ]
    assert shown["lag"] == 7
    table = cli.run("consumer-group", "get", "orders", "eu", "workers").stdout
    assert "Lag by partition (total 7)" in table and "Reads next" in table
    assert [[cell.strip() for cell in line.split("│")[1:5]]
            for line in table.splitlines() if line.startswith("│ 2 ")] == [["2", "-", "4", "4"]]
