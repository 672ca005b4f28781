"""POLL_MESSAGES_COLUMNAR (rill extension 1000) through a real server over TCP."""

from __future__ import annotations

import struct

import pytest

from rill import errors
from rill.client import Client, HeaderValue, Message, PollingStrategy


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
