"""``rill message send|poll|flush`` against a live server: payloads, offsets, headers, files."""

from __future__ import annotations

import base64
import json
import subprocess

from rill.client import HeaderKind, PollingStrategy

from .helpers import RILL, Cli, assert_error_line


def make_topic(cli, partitions: int = 2) -> None:
    with cli.sdk() as client:
        client.create_stream("orders")
        client.create_topic("orders", "eu", partitions)


def test_send_arguments_with_headers_and_poll_them_back(cli):
    make_topic(cli)
    sent = cli.run("message", "send", "orders", "eu", "hello", "wörld", "a:b c", "--partition", "2",
                   "--header", "trace:string:abc-1", "-H", "n:uint32:7", "-H", "ok:bool:true",
                   "-H", "blob:raw:00ff", "-H", "ratio:float64:0.5")
    assert "sent 3 message(s)" in sent.stdout

    polled = cli.run("--json", "message", "poll", "orders", "eu", "--partition", "2", "--first",
                     "--count", "10").json()
    assert (polled["partition_id"], polled["current_offset"], polled["count"]) == (2, 2, 3)
    messages = polled["messages"]
    assert [(m["offset"], m["payload"]) for m in messages] == [(0, "hello"), (1, "wörld"), (2, "a:b c")]
    assert messages[0]["headers"] == {
        "trace": {"kind": "string", "value": "abc-1"}, "n": {"kind": "uint32", "value": 7},
        "ok": {"kind": "bool", "value": True}, "blob": {"kind": "raw", "value": "00ff"},
        "ratio": {"kind": "float64", "value": 0.5},
    }
    assert messages[0]["state"] == "available" and len(messages[0]["id"]) == 36

    with cli.sdk() as client:  # what the server stored, seen through the SDK
        batch = client.poll_messages("orders", "eu", partition_id=2, strategy=PollingStrategy.first())
    assert batch.messages[1].payload == "wörld".encode()
    assert batch.messages[2].headers["n"].kind == HeaderKind.UINT32

    table = cli.run("message", "poll", "orders", "eu", "--partition", "2", "--offset", "1", "--count", "1").stdout
    assert "wörld" in table and "trace=abc-1" in table and "hello" not in table
    encoded = cli.run("--json", "message", "poll", "orders", "eu", "--partition", "2", "--last",
                      "--count", "1", "--encoding", "base64").json()
    assert [base64.b64decode(m["payload"]) for m in encoded["messages"]] == [b"a:b c"]


def test_send_a_file_of_1000_lines_poll_it_back_and_follow(cli, tmp_path):
    make_topic(cli)
    # --follow prints each message of partition 2 as it arrives (one JSON object per line)
    follower = subprocess.Popen(
        [RILL, "--json", "message", "poll", "orders", "eu", "--partition", "2", "--follow", "--count", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli.env(),
    )
    try:
        lines = [f"event {number} {'x' * (number % 7)}" for number in range(1000)]
        source = tmp_path / "events.txt"
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")

        sent = cli.run("--json", "message", "send", "orders", "eu", "--file", str(source), "--partition", "1",
                       "--batch-size", "300").json()
        assert sent == {"ok": True, "command": "send_messages", "stream": "orders", "topic": "eu",
                        "messages_count": 1000}

        polled = cli.run("--json", "message", "poll", "orders", "eu", "--partition", "1", "--first",
                         "--count", "1000", "--batch-size", "256").json()
        assert polled["count"] == 1000 and polled["current_offset"] == 999
        assert [m["offset"] for m in polled["messages"]] == list(range(1000))
        assert [m["payload"] for m in polled["messages"]] == lines

        dump = tmp_path / "dump.txt"
        written = cli.run("message", "poll", "orders", "eu", "--partition", "1", "--offset", "990",
                          "--count", "50", "--output-file", str(dump))
        assert "polled 10 message(s)" in written.stdout
        assert dump.read_text(encoding="utf-8").splitlines() == lines[990:]

        with cli.sdk() as client:
            client.send_messages("orders", "eu", [b"a", b"b"], partitioning=2)
            client.send_messages("orders", "eu", [b"c"], partitioning=2)
        out, err = follower.communicate(timeout=60)
    finally:
        follower.kill()
    assert follower.returncode == 0, err
    assert [json.loads(line)["payload"] for line in out.splitlines()] == ["a", "b", "c"]


def test_stdin_key_partitioning_auto_commit_flush_and_errors(cli):
    make_topic(cli, partitions=3)
    cli.run("message", "send", "orders", "eu", "--file", "-", "--key", "customer-42", input="one\n\ntwo\nthree")
    with cli.sdk() as client:
        partitions = client.get_topic("orders", "eu").partitions
    [target] = [p.id for p in partitions if p.messages_count]
    assert sum(p.messages_count for p in partitions) == 3  # the empty line was skipped

    first = cli.run("--json", "message", "poll", "orders", "eu", "--partition", str(target),
                    "--consumer", "reader", "--next", "--auto-commit", "--count", "2").json()
    second = cli.run("--json", "message", "poll", "orders", "eu", "--partition", str(target),
                     "--consumer", "reader", "--auto-commit").json()
    assert [m["payload"] for m in first["messages"]] == ["one", "two"]
    assert [m["payload"] for m in second["messages"]] == ["three"]
    with cli.sdk() as client:
        assert client.get_consumer_offset("orders", "eu", "reader", target).stored_offset == 2

    flushed = cli.run("message", "flush", "orders", "eu", str(target), "--fsync")
    assert "flushed" in flushed.stdout

    no_stream, no_partition, no_flush, usage = cli.run_many(
        ("message", "poll", "nope", "eu"),
        ("message", "send", "orders", "eu", "x", "--partition", "9"),
        ("message", "flush", "orders", "eu", "7"),
        ("message", "send", "orders", "eu"),
    )
    assert_error_line(no_stream, "stream with name nope was not found (1010 stream_name_not_found)")
    assert_error_line(no_partition, "partition with ID 9 for topic with name eu for stream with name orders "
                                    "was not found (3007 partition_not_found)")
    assert_error_line(no_flush, "(3007 partition_not_found)")
    assert usage.returncode == 2 and "--file" in usage.stderr


def damaged_partition(rill_factory, tmp_path, bad: list[int]):
    """A server whose partition 1 of orders/eu holds 60 messages (over 2 KB segments) with the
    records at offsets ``bad`` damaged on disk (a payload byte flipped while it was stopped)."""
    import struct

    data_dir = tmp_path / "damaged"
    server = rill_factory({"RILL_SYSTEM_SEGMENT_SIZE": "2 KB"}, data_dir=data_dir).start()
    cli = Cli(server.address, tmp_path / "rill-home")
    with cli.sdk() as client:
        client.create_stream("orders")
        client.create_topic("orders", "eu", 1)
        for number in range(60):
            client.send_messages("orders", "eu", [b"payload-%04d-" % number + b"x" * 20],
                                 partitioning=1)
    assert server.stop() == 0
    partition = data_dir / "streams" / "1" / "topics" / "1" / "partitions" / "1"
    starts = sorted(int(path.stem) for path in partition.glob("*.log"))
    for offset in bad:
        start = max(s for s in starts if s <= offset)
        index = (partition / f"{start:020d}.index").read_bytes()
        position = struct.unpack_from("<IIQ", index, (offset - start) * 16)[1]
        log = partition / f"{start:020d}.log"
        data = bytearray(log.read_bytes())
        data[position + 50] ^= 0x10  # a payload byte
        log.write_bytes(bytes(data))
    server.start()  # on new ports (the old ones may be taken meanwhile)
    return server, Cli(server.address, tmp_path / "rill-home-2")


def test_poll_names_the_corrupt_offset_and_the_next_readable_one(rill_factory, tmp_path):
    server, cli = damaged_partition(rill_factory, tmp_path, [41, 42])
    stopped = cli.run("--json", "message", "poll", "orders", "eu", "--partition", "1",
                      "--offset", "30", "--count", "20", ok=False)
    assert_error_line(stopped, "offset 41 of partition 1 is corrupt; read on from offset 43 with "
                               "--partition 1 --offset 43 (or --skip-corrupt) (4011 cannot_read_message)")
    first = cli.run("message", "poll", "orders", "eu", "--partition", "1", "--first",
                    "--count", "60", "--batch-size", "5", ok=False)
    assert_error_line(first, "offset 41 of partition 1 is corrupt; read on from offset 43")

    skipped = cli.run("--json", "message", "poll", "orders", "eu", "--partition", "1",
                      "--offset", "30", "--count", "20", "--skip-corrupt")
    offsets = [message["offset"] for message in skipped.json()["messages"]]
    assert offsets == list(range(30, 41)) + list(range(43, 52))
    assert skipped.error_lines == ["skipped corrupt offset 41 of partition 1 (4011 cannot_read_message)",
                                   "skipped corrupt offset 42 of partition 1 (4011 cannot_read_message)"]
    assert skipped.json()["messages"][-1]["payload"] == "payload-0051-" + "x" * 20


def test_skip_corrupt_to_the_end_and_not_with_a_group(rill_factory, tmp_path):
    server, cli = damaged_partition(rill_factory, tmp_path, [59])
    ended = cli.run("--json", "message", "poll", "orders", "eu", "--partition", "1",
                    "--offset", "55", "--exit-at-end", "--skip-corrupt")
    assert [json.loads(line)["offset"] for line in ended.stdout.splitlines()] == [55, 56, 57, 58]
    assert ended.error_lines == ["skipped corrupt offset 59 of partition 1 (4011 cannot_read_message)"]
    refused = cli.run("message", "poll", "orders", "eu", "--group", "g", "--skip-corrupt", ok=False)
    assert refused.returncode == 2 and "--skip-corrupt" in refused.stderr
