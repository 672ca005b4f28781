"""``rill stream ...`` against a live server: tables, JSON and error lines."""

from __future__ import annotations

from .helpers import assert_error_line


def test_stream_create_list_get_update_purge_delete(cli):
    created = cli.run("stream", "create", "orders")
    assert "stream 1 'orders' created" in created.stdout

    second = cli.run("--json", "stream", "create", "Audit Log", "--id", "7").json()
    assert (second["id"], second["name"], second["topics_count"], second["topics"]) == (7, "audit.log", 0, [])

    with cli.sdk() as client:
        client.create_topic("orders", "eu", 2)
        client.send_messages("orders", "eu", [b"a", b"b", b"c"], partitioning=1)

    listed = cli.run("--json", "stream", "list").json()
    assert [(s["id"], s["name"], s["messages_count"]) for s in listed] == [(1, "orders", 3), (7, "audit.log", 0)]
    table = cli.run("stream", "list").stdout
    assert "orders" in table and "audit.log" in table and "Messages" in table

    details = cli.run("--json", "stream", "get", "orders").json()
    assert details["id"] == 1 and details["topics_count"] == 1
    assert [(t["name"], t["partitions_count"], t["messages_count"]) for t in details["topics"]] == [("eu", 2, 3)]

    assert "renamed" in cli.run("stream", "update", "orders", "sales").stdout
    assert "purged" in cli.run("stream", "purge", "sales").stdout
    assert cli.run("--json", "stream", "delete", "7").json() == {"ok": True, "command": "delete_stream", "stream": 7}

    shown = cli.run("stream", "get", "1").stdout
    assert "Stream 1" in shown and "sales" in shown and "eu" in shown
    with cli.sdk() as client:
        assert [(s.name, s.messages_count) for s in client.get_streams()] == [("sales", 0)]


def test_stream_errors_are_one_line(cli):
    with cli.sdk() as client:
        client.create_stream("orders")
    by_id, by_name, taken, anonymous = cli.run_many(
        ("stream", "get", "99"),
        ("stream", "delete", "nope"),
        ("stream", "create", "orders"),
        {"args": ("stream", "list"), "login": False},
    )
    assert_error_line(by_id, "error: stream with ID 99 was not found (1009 stream_id_not_found)")
    assert by_id.stdout == ""
    assert_error_line(by_name, "stream with name nope was not found (1010 stream_name_not_found)")
    assert_error_line(taken, "stream with name orders already exists (1012 stream_name_already_exists)")
    assert_error_line(anonymous, "not logged in")
    assert "(40 unauthenticated)" in anonymous.stderr and "rill login" in anonymous.stderr
