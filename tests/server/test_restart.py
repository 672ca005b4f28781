"""Restart and crash: metadata, messages and offsets come back after a clean stop and after
kill -9; with fsync = "always" every acknowledged batch survives a SIGKILL mid-stream."""

from __future__ import annotations

import threading
import time
import zlib

import pytest

from rill import errors
from rill.client import Client, Consumer, PollingStrategy


def populate(client: Client) -> None:
    client.login_user("iggy", "iggy")
    client.create_stream("orders", stream_id=3)
    client.create_topic(3, "eu", partitions_count=2, message_expiry=3_600_000_000)
    client.create_topic(3, "us", partitions_count=1)
    for batch in range(10):
        client.send_messages(3, "eu", [f"eu-{batch}-{i}".encode() for i in range(100)],
                             partitioning=batch % 2 + 1)
    client.store_consumer_offset(3, "eu", 250, consumer=Consumer.regular("audit"), partition_id=1)
    client.poll_messages(3, "eu", consumer=8, partition_id=2, strategy=PollingStrategy.next(),
                         count=42, auto_commit=True)


def check(client: Client) -> None:
    client.login_user("iggy", "iggy")
    stream = client.get_stream("orders")
    assert stream.id == 3 and [t.name for t in stream.topics] == ["eu", "us"]
    eu = client.get_topic(3, "eu")
    assert eu.topic.message_expiry == 3_600_000_000
    assert [(p.id, p.messages_count, p.current_offset) for p in eu.partitions] == [
        (1, 500, 499), (2, 500, 499)]
    audit = client.get_consumer_offset(3, "eu", consumer=Consumer.regular("audit"), partition_id=1)
    assert audit.stored_offset == 250
    assert client.get_consumer_offset(3, "eu", consumer=8, partition_id=2).stored_offset == 41
    polled = client.poll_messages(3, "eu", consumer=8, partition_id=2,
                                  strategy=PollingStrategy.next(), count=3)
    assert [(m.offset, m.payload) for m in polled.messages] == [
        (42, b"eu-1-42"), (43, b"eu-1-43"), (44, b"eu-1-44")]
    everything = client.poll_messages(3, "eu", partition_id=1, strategy=PollingStrategy.first(),
                                      count=1000).messages
    assert [m.offset for m in everything] == list(range(500))
    assert all(m.checksum == zlib.crc32(m.payload) for m in everything)
    # new writes continue after the recovered offsets
    client.send_messages(3, "eu", [b"after restart"], partitioning=1)
    assert client.get_topic(3, "eu").partitions[0].current_offset == 500


@pytest.mark.parametrize("how", ["clean stop", "kill -9"])
def test_everything_comes_back(rill_factory, how):
    server = rill_factory().start()
    with Client(server.address) as client:
        populate(client)
    if how == "clean stop":
        assert server.stop() == 0
        server.start()
    else:
        server.kill()
        server.start()
    with Client(server.address) as client:
        check(client)


def test_kill_during_acknowledged_sends_with_fsync_always(rill_factory):
    server = rill_factory({"RILL_SYSTEM_FSYNC": "always"}).start()
    producers = 3
    with Client(server.address) as admin:
        admin.login_user("iggy", "iggy")
        admin.create_stream("crash", stream_id=1)
        admin.create_topic(1, "t", partitions_count=producers)
    acknowledged: dict[int, list[int]] = {p: [] for p in range(1, producers + 1)}
    stop = threading.Event()

    def produce(partition: int) -> None:
        client = Client(server.address, reconnect=False)
        client.connect()
        client.login_user("iggy", "iggy")
        batch = 0
        try:
            while not stop.is_set():
                payloads = [f"{partition}:{batch}:{i}".encode() * 8 for i in range(50)]
                client.send_messages(1, 1, payloads, partitioning=partition)
                acknowledged[partition].append(batch)
                batch += 1
        except errors.RillError:
            pass  # the server died under us: everything acknowledged so far must survive
        finally:
            try:
                client.close()
            except Exception:
                pass

    threads = [threading.Thread(target=produce, args=(p,)) for p in acknowledged]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    server.kill()
    stop.set()
    for thread in threads:
        thread.join(30)
    assert all(len(batches) > 3 for batches in acknowledged.values())
    server.start()
    with Client(server.address) as client:
        client.login_user("iggy", "iggy")
        for partition, batches in acknowledged.items():
            stored = client.poll_messages(1, 1, partition_id=partition,
                                          strategy=PollingStrategy.first(), count=1_000_000).messages
            assert [m.offset for m in stored] == list(range(len(stored)))
            assert all(m.checksum == zlib.crc32(m.payload) for m in stored)
            # the acknowledged batches whole, in order, and at most the beginning of one more:
            # a kill -9 can cut the write of an unacknowledged batch at a page (the kernel
            # stops a write to the page cache there), and an Iggy log keeps every record whose
            # checksum holds (docs/reliability.md, known limits)
            assert len(batches) * 50 <= len(stored) <= (len(batches) + 1) * 50
            for m in stored:
                batch, index = divmod(m.offset, 50)
                assert m.payload == f"{partition}:{batch}:{index}".encode() * 8
