"""POLL_MESSAGES_COLUMNAR and POLL_STORED_BATCHES (rill extensions 1000 and 1001) through a
real server over TCP."""

from __future__ import annotations

import struct

import pytest

from rill import errors
from rill.client import Client, HeaderValue, Message, PollingStrategy
from rill.server.storage.formats import conversion, iggy_v1, kafka_v2


@pytest.fixture
def client(rill_server):
    with Client(rill_server.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("s", stream_id=1)
        client.create_topic(1, "t", partitions_count=1)
        yield client


def test_columns_agree_with_poll(client) -> None:
    headers = {"h": HeaderValue.string("v")}
    client.send_messages(1, 1, [Message(b"one", id=5, headers=headers), b"two"], partitioning=1)
    client.send_messages(1, 1, [b"three"], partitioning=1)
    found = client.poll_messages_columnar(1, "t", 1, 0, 100)
    polled = client.poll_messages(1, 1, partition_id=1, strategy=PollingStrategy.first(), count=100)
    assert found.messages == polled.messages
    assert (found.first_offset, found.next_offset, found.base_offset, found.count) == (0, 3, 0, 3)
    assert list(struct.unpack("<3Q", found.timestamps)) == [m.timestamp for m in polled.messages]
    boundaries = struct.unpack("<4I", found.boundaries)
    assert boundaries[-1] - boundaries[0] == len(found.records)


def test_reading_in_steps_and_bounds_only(client) -> None:
    client.send_messages(1, 1, [bytes([65 + i]) * 100 for i in range(10)], partitioning=1)
    bounds = client.poll_messages_columnar(1, 1, 1, 0, 0)
    assert (bounds.count, bounds.first_offset, bounds.next_offset) == (0, 0, 10)
    offset, seen = 3, []
    while offset < bounds.next_offset:
        found = client.poll_messages_columnar(1, 1, 1, offset, 4, max_bytes=300)
        assert found.count == min(2, 10 - offset)  # 145-byte records: two fit in 300 bytes
        seen += [message.offset for message in found.messages]
        offset = found.end_offset
    assert seen == list(range(3, 10))
    assert client.poll_messages_columnar(1, 1, 1, 50, 10).count == 0


def test_errors(client) -> None:
    with pytest.raises(errors.StreamIdNotFound):
        client.poll_messages_columnar(9, 1, 1, 0, 1)
    with pytest.raises(errors.PartitionNotFound):
        client.poll_messages_columnar(1, 1, 3, 0, 1)
    client.logout_user()
    with pytest.raises(errors.Unauthenticated):
        client.poll_messages_columnar(1, 1, 1, 0, 1)


# -- 1001 POLL_STORED_BATCHES: the stored bytes as they are ----------------------------------


def batches(data) -> list[tuple[int, bytes]]:
    """(base offset, bytes) of each RecordBatch v2 in ``data`` (big-endian head)."""
    found, at = [], 0
    while at < len(data):
        base, length = struct.unpack_from(">qi", data, at)
        found.append((base, bytes(data[at:at + 12 + length])))
        at += 12 + length
    return found


def test_stored_batches_of_a_kafka_topic_are_its_record_batches(client) -> None:
    client.create_topic(1, "k", partitions_count=1, record_format="kafka")
    for first in range(0, 30, 10):  # three sends: three stored batches
        client.send_messages(1, "k", [Message(f"v{i}".encode(),
                                              headers={"h": HeaderValue.raw(b"x")})
                                      for i in range(first, first + 10)], partitioning=1)
    whole = client.poll_stored_batches(1, "k", 1, 0, 100)
    assert (whole.partition_id, whole.first_offset, whole.next_offset,
            whole.record_format) == (1, 0, 30, "kafka")
    # the bytes are RecordBatch v2 batches: converted as the server converts them for 1000
    converted = conversion.convert(whole.records, kafka_v2.NAME, iggy_v1.NAME, 0, 30)
    columnar = client.poll_messages_columnar(1, "k", 1, 0, 100)
    assert converted.count == 30 and converted.records == bytes(columnar.records)
    # from inside a batch: the whole batch holding the offset, and those after it
    stored = batches(whole.records)
    assert [base for base, _ in stored] == [0, 10, 20]
    assert batches(client.poll_stored_batches(1, "k", 1, 15, 100).records) == stored[1:]
    # max_bytes: at least one batch, whole batches only
    assert batches(client.poll_stored_batches(1, "k", 1, 0, 100, max_bytes=1).records) == \
        stored[:1]
    assert len(client.poll_stored_batches(1, "k", 1, 30, 100).records) == 0


def test_stored_batches_of_an_iggy_topic_are_its_messages(client) -> None:
    client.send_messages(1, 1, [b"one", b"two", b"three"], partitioning=1)
    stored = client.poll_stored_batches(1, "t", 1, 1, 2)
    assert stored.record_format == "iggy"
    assert bytes(stored.records) == bytes(client.poll_messages_columnar(1, "t", 1, 1, 2).records)
    with pytest.raises(errors.PartitionNotFound):
        client.poll_stored_batches(1, 1, 3, 0, 1)
    client.logout_user()
    with pytest.raises(errors.Unauthenticated):
        client.poll_stored_batches(1, 1, 1, 0, 1)

