"""kcat-style ``rill message`` against a live server: ``--json`` anywhere, bytes never mangled,
following every partition, ``--format``, ``--exit-at-end``, ``--key-separator``."""

from __future__ import annotations

import json
import subprocess
import time

import httpx

from rill.cli.output import message_id
from rill.client import Message, PollingStrategy
from rill.protocol.iggy.headers import KEY_HEADER, HeaderKind, HeaderValue
from rill.protocol.iggy.primitives import Consumer

from .helpers import RILL


def make_topic(cli, partitions: int = 3) -> None:
    with cli.sdk() as client:
        client.create_stream("orders")
        client.create_topic("orders", "eu", partitions)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_json_is_accepted_anywhere_on_the_command_line(cli):
    make_topic(cli)
    cli.run("message", "send", "orders", "eu", "hello", "--partition", "1")
    assert cli.run("stream", "list", "--json").json() == cli.run("--json", "stream", "list").json()
    assert cli.run("stream", "--json", "list").json()[0]["name"] == "orders"
    poll = ("message", "poll", "orders", "eu", "--partition", "1", "--first")
    before, middle, after = (cli.run(*args).json() for args in (
        ("--json", *poll), (*poll[:4], "--json", *poll[4:]), (*poll, "--json")))
    assert before == middle == after
    assert [m["payload"] for m in after["messages"]] == ["hello"]
    # after "--" it is an argument like any other
    cli.run("message", "send", "orders", "eu", "--partition", "1", "--", "--json")
    last = cli.run("message", "poll", "orders", "eu", "--partition", "1", "--last", "--count", "1", "--json")
    assert last.json()["messages"][0]["payload"] == "--json"


def test_bytes_that_are_not_utf8_are_base64_and_marked_everywhere(cli):
    make_topic(cli, partitions=1)
    with cli.sdk() as client:
        client.send_messages("orders", "eu", [
            Message(b"\xff\x00\xfe", headers={KEY_HEADER: HeaderValue.raw(b"\xfe\xff")}),
            Message("wörld".encode(), headers={"label": HeaderValue.string("ok")}),
            Message(b"x", headers={"label": HeaderValue(HeaderKind.STRING, b"\xc3\x28")}),
        ], partitioning=1)
    poll = ("message", "poll", "orders", "eu", "--partition", "1", "--first")

    [binary] = cli.run("--json", *poll, "--count", "1").json()["messages"]
    assert binary["payload"] == "/wD+" and binary["payload_encoding"] == "base64"
    assert binary["headers"][KEY_HEADER] == {"kind": "raw", "value": "feff"}
    assert "/wD+" in cli.run(*poll, "--count", "1").stdout

    _, text, bad_header = cli.run("--json", *poll).json()["messages"]
    assert (text["payload"], text["payload_encoding"]) == ("wörld", "text")
    assert text["headers"]["label"] == {"kind": "string", "value": "ok"}
    assert bad_header["headers"]["label"] == {"kind": "string", "value": "wyg=", "encoding": "base64"}

    table = cli.run(*poll).stdout
    streamed = cli.run(*poll, "--exit-at-end").stdout
    formatted = cli.run(*poll, "--format", "%k|%s|%h").stdout
    for output in (table, streamed, formatted):
        assert "\ufffd" not in output
        assert "base64:/wD+" in output and "label=base64:wyg=" in output and "wörld" in output
    assert formatted.splitlines() == [f"base64:/v8=|base64:/wD+|{KEY_HEADER}=hex:feff",
                                      "|wörld|label=ok", "|x|label=base64:wyg="]
    assert "\ufffd" not in cli.run(*poll, "--json", "--exit-at-end").stdout


def test_follow_without_a_group_follows_every_partition(cli):
    make_topic(cli)
    follower = subprocess.Popen(
        [RILL, "--json", "message", "poll", "orders", "eu", "--follow", "--count", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli.env(),
    )
    text_follower = subprocess.Popen(
        [RILL, "message", "poll", "orders", "eu", "--follow", "--count", "4"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli.env(),
    )
    try:
        with cli.sdk() as client:
            for partition, payload in ((3, b"c"), (1, b"a"), (2, b"b")):
                client.send_messages("orders", "eu", [payload], partitioning=partition)
            out, err = follower.communicate(timeout=30)
            client.create_partitions("orders", "eu", 1)  # found while following, read from its start
            client.send_messages("orders", "eu", [b"d"], partitioning=4)
        text_out, text_err = text_follower.communicate(timeout=30)
    finally:
        follower.kill()
        text_follower.kill()
    assert follower.returncode == 0, err
    assert sorted((m["partition_id"], m["payload"]) for m in json_lines(out)) == [(1, "a"), (2, "b"), (3, "c")]
    assert text_follower.returncode == 0, text_err
    # the partition is the first column of each line
    lines = sorted(line.split("\t") for line in text_out.splitlines())
    assert [(fields[0], fields[1], fields[-1]) for fields in lines] == [("1", "0", "a"), ("2", "0", "b"),
                                                                       ("3", "0", "c"), ("4", "0", "d")]


def test_format_string(cli):
    make_topic(cli, partitions=2)
    with cli.sdk() as client:
        client.send_messages("orders", "eu", [Message(b"hello", headers={KEY_HEADER: HeaderValue.string("k1")}),
                                              b"world"], partitioning=2)
        messages = client.poll_messages("orders", "eu", partition_id=2, strategy=PollingStrategy.first()).messages
    printed = cli.run("message", "poll", "orders", "eu", "--partition", "2", "--first",
                      "--format", r"%p %o %k %T %s\t%S|%t|%h|%i 100%%").stdout
    first, second = messages
    assert printed.splitlines() == [
        f"2 0 k1 {first.timestamp} hello\t5|eu|{KEY_HEADER}=k1|{message_id(first.id)} 100%",
        f"2 1  {second.timestamp} world\t5|eu||{message_id(second.id)} 100%",
    ]
    # a template ending in \n gets no second line break; escapes and %% work
    assert cli.run("message", "poll", "orders", "eu", "--partition", "2", "--first", "--format", r"%s\n").stdout \
        == "hello\nworld\n"
    bad = cli.run("message", "poll", "orders", "eu", "--format", "%x", ok=False)
    assert bad.returncode == 2 and "%x" in bad.stderr
    help_text = cli.run("message", "poll", "--help", login=False, COLUMNS="200").stdout
    for token in ("%p", "%o", "%k", "%T", "%s", "%S", "%h"):
        assert token in help_text


def test_exit_at_end_reads_every_partition_to_its_end_and_exits_0(cli):
    make_topic(cli)
    with cli.sdk() as client:
        for partition in (1, 2, 3):
            client.send_messages("orders", "eu", [f"{partition}-{n}".encode() for n in range(5)],
                                 partitioning=partition)
    done = cli.run("--json", "message", "poll", "orders", "eu", "--first", "--exit-at-end", "--batch-size", "2")
    assert done.returncode == 0
    got = sorted((m["partition_id"], m["offset"], m["payload"]) for m in json_lines(done.stdout))
    assert got == [(p, n, f"{p}-{n}") for p in (1, 2, 3) for n in range(5)]  # 15: past the default 10
    one = cli.run("message", "poll", "orders", "eu", "--partition", "2", "--offset", "3", "--exit-at-end",
                  "--format", "%p:%s")
    assert one.stdout.splitlines() == ["2:2-3", "2:2-4"]
    empty = cli.run("message", "poll", "orders", "eu", "--offset", "5", "--exit-at-end")
    assert empty.stdout == ""


def test_key_separator_splits_lines_into_key_and_payload(cli, tmp_path):
    make_topic(cli)
    source = tmp_path / "keyed.txt"
    source.write_text("k1:one\nk2:two\nno key here\nk1:three:with:colons\n:empty key\n", encoding="utf-8")
    cli.run("message", "send", "orders", "eu", "--file", str(source), "--key-separator", ":")
    got = json_lines(cli.run("message", "poll", "orders", "eu", "--first", "--exit-at-end", "--json").stdout)
    keyed = {m["payload"]: (m["headers"].get(KEY_HEADER, {}).get("value"), m["partition_id"]) for m in got}
    assert {payload: key for payload, (key, _) in keyed.items()} == {
        "one": "k1", "two": "k2", "no key here": None, "three:with:colons": "k1", "empty key": None}
    assert keyed["one"][1] == keyed["three:with:colons"][1]  # one key, one partition, in order
    ones = [m["payload"] for m in got if m["partition_id"] == keyed["one"][1]]
    assert ones.index("one") < ones.index("three:with:colons")

    cli.run("message", "send", "orders", "eu", "--file", "-", "--partition", "3", "--key-separator", r"\t",
            input="tab-key\tpayload\n")
    last = cli.run("message", "poll", "orders", "eu", "--partition", "3", "--last", "--count", "1",
                   "--format", "%k=%s").stdout
    assert last == "tab-key=payload\n"
    usage = cli.run("message", "send", "orders", "eu", "x", "--key-separator", ":", ok=False)
    assert usage.returncode == 2 and "--key-separator" in usage.stderr


def test_follow_with_a_group_still_polls_as_the_group(cli):
    make_topic(cli)
    with cli.sdk() as client:
        client.create_consumer_group("orders", "eu", "workers")
        for partition, payload in ((3, b"c"), (1, b"a"), (2, b"b")):
            client.send_messages("orders", "eu", [payload], partitioning=partition)
    follow = ("message", "poll", "orders", "eu", "--group", "workers", "--follow")
    usage = cli.run(*follow, ok=False)
    assert usage.returncode == 2 and "--auto-commit" in usage.stderr
    done = cli.run("--json", *follow, "--next", "--auto-commit", "--count", "3")
    got = json_lines(done.stdout)
    assert sorted((m["partition_id"], m["payload"]) for m in got) == [(1, "a"), (2, "b"), (3, "c")]
    with cli.sdk() as client:  # the group's offsets moved, the poll went through the group
        stored = [client.get_consumer_offset("orders", "eu", Consumer.group("workers"), partition)
                  for partition in (1, 2, 3)]
        # stored_offset 0 also means "never stored" (as Iggy 0.4.95): the lag rows say committed
        committed = [(row.partition_id, row.committed) for row in client.get_consumer_lag("orders", "eu")
                     if row.group_name == "workers"]
    assert [offset.stored_offset for offset in stored] == [0, 0, 0]
    assert committed == [(1, 1), (2, 1), (3, 1)]


def _requests(http_url: str, command: str) -> float:
    text = httpx.get(f"{http_url}/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("rill_requests_total{") and f'command="{command}"' in line)


def test_an_idle_follow_waits_on_the_server_instead_of_polling(cli, rill_server):
    make_topic(cli)
    follower = subprocess.Popen([RILL, "message", "poll", "orders", "eu", "--follow", "--count", "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli.env())
    try:
        deadline = time.monotonic() + 60  # the CLI's start on a loaded machine: polled
        while _requests(rill_server.http_url, "wait_for_messages") < 1:
            assert time.monotonic() < deadline and follower.poll() is None, "no wait began"
            time.sleep(0.1)
        before = _requests(rill_server.http_url, "poll_messages")
        time.sleep(3)  # idle: every partition is at its end
        polls = _requests(rill_server.http_url, "poll_messages") - before
        waits = _requests(rill_server.http_url, "wait_for_messages")
        with cli.sdk() as client:
            client.send_messages("orders", "eu", [b"late"], partitioning=2)
        out, err = follower.communicate(timeout=30)
    finally:
        follower.kill()
    assert follower.returncode == 0, err
    assert out.split("\t")[0] == "2" and out.strip().endswith("late")
    # once waiting, a poll per partition again after each 2 s wait (which also looks for new
    # partitions): at most 2 rounds in 3 s, not a poll every 0.25 s per partition (12 rounds)
    assert waits >= 1 and polls <= 2 * 3, (polls, waits)
