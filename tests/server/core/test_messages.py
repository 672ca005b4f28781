"""Sending and polling through a real server over TCP (wire §3.4, §6.3-§6.5, §6.11)."""

from __future__ import annotations

import time
import uuid
import zlib

import pytest
import xxhash

from rill import errors
from rill.client import Client, Consumer, HeaderKind, HeaderValue, Message, Partitioning
from rill.client import PollingStrategy


@pytest.fixture
def client(rill_server):
    with Client(rill_server.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("s", stream_id=1)
        client.create_topic(1, "t", partitions_count=3)
        yield client


def offsets_and_payloads(polled):
    return [(m.offset, m.payload) for m in polled.messages]


def test_send_and_poll_back_exactly(client):
    headers = {
        "trace": HeaderValue.string("abc"),
        "n": HeaderValue.int(HeaderKind.INT32, -5),
        "ok": HeaderValue.bool(True),
    }
    sent_id = 0x0123456789ABCDEF0123456789ABCDEF
    before = time.time_ns() // 1000
    client.send_messages(1, 1, [Message(b"first", id=sent_id, headers=headers), Message(b"second")],
                         partitioning=Partitioning.partition_id(2))
    after = time.time_ns() // 1000
    polled = client.poll_messages(1, 1, consumer=1, partition_id=2,
                                  strategy=PollingStrategy.offset(0), count=10)
    assert polled.partition_id == 2 and polled.current_offset == 1 and polled.count == 2
    first, second = polled.messages
    assert (first.offset, first.payload, first.id, first.state) == (0, b"first", sent_id, 1)
    assert first.headers == headers
    assert first.checksum == zlib.crc32(b"first")
    assert before <= first.timestamp <= second.timestamp <= after
    generated = uuid.UUID(bytes=second.id_bytes)  # id 0 became a UUIDv7
    assert generated.version == 7
    assert abs((int.from_bytes(second.id_bytes[:6], "big") * 1000) - first.timestamp) < 5_000_000


def test_balanced_partitioning_round_robins_batches(client):
    for index in range(6):
        client.send_messages(1, 1, [f"m{index}".encode()])
    per_partition = {
        pid: offsets_and_payloads(client.poll_messages(1, 1, partition_id=pid,
                                                       strategy=PollingStrategy.first()))
        for pid in (1, 2, 3)
    }
    assert per_partition == {
        1: [(0, b"m0"), (1, b"m3")],
        2: [(0, b"m1"), (1, b"m4")],
        3: [(0, b"m2"), (1, b"m5")],
    }


@pytest.mark.parametrize("key, partition", [(b"hello", 1), (b"abc", 3), (b"a", 3)])
def test_messages_key_partitioning_uses_xxhash32(client, key, partition):
    assert (xxhash.xxh32_intdigest(key) % 3 or 3) == partition  # wire §6.3 vectors
    client.send_messages(1, 1, [b"keyed"], partitioning=Partitioning.messages_key(key))
    topic = client.get_topic(1, 1)
    counts = {p.id: p.messages_count for p in topic.partitions}
    assert counts[partition] == 1 and sum(counts.values()) == 1


def test_partitioning_errors(client):
    with pytest.raises(errors.PartitionNotFound):
        client.send_messages(1, 1, [b"x"], partitioning=9)
    with pytest.raises(errors.InvalidNumberEncoding):
        client.send_messages(1, 1, [b"x"], partitioning=Partitioning(Partitioning.partition_id(1).kind, b"\x01\x00"))
    with pytest.raises(errors.InvalidKeyValueLength):
        client.send_messages(1, 1, [b"x"], partitioning=Partitioning.messages_key(b""))
    with pytest.raises(errors.InvalidMessagesCount):
        client.send_messages(1, 1, [])
    client.create_topic(1, "empty", partitions_count=0)
    with pytest.raises(errors.NoPartitions):
        client.send_messages(1, "empty", [b"x"])


def test_polling_strategies(client):
    for batch in range(5):
        client.send_messages(1, 1, [f"{batch}-{i}".encode() for i in range(2)], partitioning=1)
    poll = lambda strategy, count=3, consumer=1: client.poll_messages(  # noqa: E731
        1, 1, consumer=consumer, partition_id=1, strategy=strategy, count=count)
    assert [m.offset for m in poll(PollingStrategy.offset(4)).messages] == [4, 5, 6]
    assert [m.offset for m in poll(PollingStrategy.offset(9), count=5).messages] == [9]
    assert poll(PollingStrategy.offset(10)).count == 0
    assert [m.offset for m in poll(PollingStrategy.first()).messages] == [0, 1, 2]
    assert [m.offset for m in poll(PollingStrategy.last()).messages] == [7, 8, 9]
    assert [m.offset for m in poll(PollingStrategy.last(), count=50).messages] == list(range(10))
    everything = poll(PollingStrategy.first(), count=100).messages
    middle = everything[5].timestamp
    by_time = poll(PollingStrategy.timestamp(middle), count=100).messages
    assert by_time and all(m.timestamp >= middle for m in by_time)
    assert by_time[0].offset == min(m.offset for m in everything if m.timestamp >= middle)
    assert poll(PollingStrategy.timestamp(everything[-1].timestamp + 1)).count == 0
    # next: from the start without a stored offset, then after the stored one
    assert [m.offset for m in poll(PollingStrategy.next(), consumer=42).messages] == [0, 1, 2]
    client.store_consumer_offset(1, 1, 6, consumer=42, partition_id=1)
    assert [m.offset for m in poll(PollingStrategy.next(), consumer=42).messages] == [7, 8, 9]
    client.store_consumer_offset(1, 1, 9, consumer=42, partition_id=1)
    assert poll(PollingStrategy.next(), consumer=42).count == 0
    with pytest.raises(errors.InvalidMessagesCount):
        poll(PollingStrategy.first(), count=0)


def test_auto_commit_and_consumer_offsets(client):
    client.send_messages(1, 1, [str(i).encode() for i in range(5)], partitioning=1)
    named = Consumer.regular("billing")
    first = client.poll_messages(1, 1, consumer=named, partition_id=1,
                                 strategy=PollingStrategy.next(), count=2, auto_commit=True)
    assert [m.offset for m in first.messages] == [0, 1]
    stored = client.get_consumer_offset(1, 1, consumer=named, partition_id=1)
    assert (stored.partition_id, stored.current_offset, stored.stored_offset) == (1, 4, 1)
    second = client.poll_messages(1, 1, consumer=named, partition_id=1,
                                  strategy=PollingStrategy.next(), count=10, auto_commit=True)
    assert [m.offset for m in second.messages] == [2, 3, 4]
    # a named consumer's offsets are stored under xxHash32(name): the same as that numeric id
    hashed = xxhash.xxh32_intdigest(b"billing")
    assert client.get_consumer_offset(1, 1, consumer=hashed, partition_id=1).stored_offset == 4
    # never stored: stored_offset 0 (as Iggy 0.4.95; it used to be an empty answer)
    never = client.get_consumer_offset(1, 1, consumer=2, partition_id=1)
    assert (never.partition_id, never.current_offset, never.stored_offset) == (1, 4, 0)
    with pytest.raises(errors.InvalidOffset):
        client.store_consumer_offset(1, 1, 5, consumer=2, partition_id=1)
    without = client.poll_messages(1, 1, consumer=3, partition_id=1,
                                   strategy=PollingStrategy.next(), count=10)
    assert without.count == 5
    assert client.get_consumer_offset(1, 1, consumer=3, partition_id=1).stored_offset == 0
    # polling without auto-commit stored nothing: only "billing" has a committed offset
    assert [(row.consumer_id, row.committed) for row in client.get_consumer_lag(1, 1)] == [(hashed, 1)]


def test_default_partition_for_regular_consumers_is_one(client):
    client.send_messages(1, 1, [b"one"], partitioning=1)
    polled = client.poll_messages(1, 1, consumer=1, strategy=PollingStrategy.first())
    assert polled.partition_id == 1 and offsets_and_payloads(polled) == [(0, b"one")]


def test_consumer_group_poll_without_groups_is_a_clear_error(client):
    with pytest.raises(errors.ConsumerGroupIdNotFound):
        client.poll_messages(1, 1, consumer=Consumer.group(1), strategy=PollingStrategy.next())


def test_rejected_send_writes_nothing(client):
    good = Message(b"ok")
    too_big_headers = Message(b"x", headers={f"k{i}": HeaderValue.raw(b"v" * 255) for i in range(400)})
    with pytest.raises(errors.TooBigHeadersPayload):
        client.send_messages(1, 1, [good, too_big_headers], partitioning=1)
    with pytest.raises(errors.TooBigMessagePayload):
        client.send_messages(1, 1, [good] + [Message(b"y" * 1_000_000)] * 11, partitioning=1)
    topic = client.get_topic(1, 1)
    assert topic.topic.messages_count == 0 and topic.topic.size_bytes == 0


def test_flush_unsaved_buffer(client):
    client.send_messages(1, 1, [b"x"], partitioning=1)
    client.flush_unsaved_buffer(1, 1, 1, fsync=True)
    with pytest.raises(errors.PartitionNotFound):
        client.flush_unsaved_buffer(1, 1, 7)


def test_a_poll_reply_is_capped_by_max_poll_size(rill_factory):
    server = rill_factory({"RILL_SYSTEM_MAX_POLL_SIZE": "1 MiB", "RILL_SYSTEM_SEGMENT_SIZE": "3 MiB"}).start()
    payloads = [bytes([n % 256]) * 100_000 for n in range(50)]  # 5 MB over two segments
    with Client(server.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("big", stream_id=1)
        client.create_topic(1, "t", partitions_count=1)
        for start in range(0, 50, 10):
            client.send_messages(1, "t", payloads[start:start + 10], partitioning=1)
        received: list[bytes] = []
        while len(received) < 50:
            polled = client.poll_messages(1, "t", consumer=1, partition_id=1,
                                          strategy=PollingStrategy.next(), count=2**32 - 1,
                                          auto_commit=True)
            assert 1 <= polled.count <= 10  # 10 records of 100,045 bytes fit in 1 MiB
            assert sum(len(m.payload) + 45 for m in polled.messages) <= 1024 * 1024
            received += [m.payload for m in polled.messages]
        assert received == payloads
