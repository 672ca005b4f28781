"""Runs under iggy-py 0.4.0 (not rill's interpreter): drives a server and prints a JSON report."""

import asyncio
import json
import os
import sys

from iggy_py import IggyClient, PollingStrategy, SendMessage


def describe(messages):
    return [
        {
            "offset": m.offset(),
            "payload": bytes(m.payload()).decode(),
            "id": m.id(),
            "timestamp": m.timestamp(),
            "checksum": m.checksum(),
            "state": str(m.state()).split(".")[-1],
            "length": m.length(),
        }
        for m in messages
    ]


async def main(address: str) -> None:
    client = IggyClient(address)
    await client.connect()
    await client.ping()
    await client.login_user("iggy", "iggy")
    await client.create_stream("interop", 10)
    duplicate_error = ""
    try:
        await client.create_stream("interop", 10)
    except Exception as error:  # noqa: BLE001 - we report what the client raised
        duplicate_error = str(error)
    stream = await client.get_stream(10)
    await client.create_topic(10, "events", 1, None, None, None)
    topic = await client.get_topic(10, "events")
    sent = [f"message-{i}" for i in range(10)]
    await client.send_messages(10, 1, 1, [SendMessage(text) for text in sent])
    poll = lambda strategy, count, auto_commit=False: client.poll_messages(  # noqa: E731
        10, 1, 1, strategy, count, auto_commit)
    report = {
        "sent": sent,
        "stream": {"id": stream.id, "name": stream.name, "topics_count": stream.topics_count},
        "topic": {"id": topic.id, "name": topic.name},
        "duplicate_stream_error": duplicate_error,
        "offset": describe(await poll(PollingStrategy.Offset(value=2), 5)),
        "first": describe(await poll(PollingStrategy.First(), 3)),
        "last": describe(await poll(PollingStrategy.Last(), 3)),
        "timestamp": describe(await poll(PollingStrategy.Timestamp(value=0), 100)),
        "next_first": describe(await poll(PollingStrategy.Next(), 4, True)),
        "next_second": describe(await poll(PollingStrategy.Next(), 4, True)),
    }
    # a second session as a user rill's own SDK created with read-only rights (issue 3)
    reader = IggyClient(address)
    await reader.connect()
    await reader.login_user("reader", "reader-pass")
    report["reader_stream_name"] = (await reader.get_stream(10)).name
    report["reader_poll_count"] = len(await reader.poll_messages(10, 1, 1, PollingStrategy.First(), 100, False))
    try:
        await reader.create_stream("not-allowed", 11)
        report["reader_create_error"] = ""
    except Exception as error:  # noqa: BLE001 - we report what the client raised
        report["reader_create_error"] = str(error)
    print(json.dumps(report))


asyncio.run(main(sys.argv[1]))
sys.stdout.flush()
# iggy-py's Rust runtime sometimes aborts while the interpreter tears down its background
# threads (after all work is done and reported); leave without running that teardown.
os._exit(0)
