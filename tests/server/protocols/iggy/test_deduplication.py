"""Message deduplication (wire §6.4): the filter on its own, then through a real server."""

from __future__ import annotations

import struct
import time

import pytest

from rill import errors
from rill.client import Client, Message, PollingStrategy
from rill.server.config import MessageDeduplicationConfig
from rill.server.protocols.iggy.deduplication import MessageDeduplicator
from rill.server.storage.formats.iggy_v1 import stamp_batch

DEDUP_ON = {"RILL_SYSTEM_MESSAGE_DEDUPLICATION_ENABLED": "true"}


def send_message(message_id: int, payload: bytes, headers: bytes = b"") -> bytes:
    return (
        message_id.to_bytes(16, "little")
        + struct.pack("<I", len(headers)) + headers
        + struct.pack("<I", len(payload)) + payload
    )


def region(*messages: tuple[int, bytes]) -> bytes:
    return b"".join(send_message(message_id, payload) for message_id, payload in messages)


class FakeLog:
    """Stands in for a PartitionLog: validates like the real one and keeps what it got."""

    def __init__(self, reject: bool = False) -> None:
        self.batches: list[bytes] = []
        self.next_offset = 0
        self.reject = reject

    def append(self, raw, now_us):
        if self.reject:
            raise errors.TooBigMessagePayload()
        batch = stamp_batch(raw, self.next_offset, now_us, 0, 0)
        self.batches.append(bytes(raw))
        self.next_offset += batch.count
        return batch.first_offset, batch.last_offset


class FakePartition:
    def __init__(self, reject: bool = False) -> None:
        self.log = FakeLog(reject)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def payloads(raw: bytes) -> list[bytes]:
    found, position = [], 0
    while position < len(raw):
        (headers_length,) = struct.unpack_from("<I", raw, position + 16)
        start = position + 24 + headers_length
        (length,) = struct.unpack_from("<I", raw, start - 4)
        found.append(bytes(raw[start : start + length]))
        position = start + length
    return found


# -- the filter --------------------------------------------------------------------------------


def test_disabled_config_builds_no_deduplicator():
    assert MessageDeduplicator.from_config(MessageDeduplicationConfig()) is None
    enabled = MessageDeduplicator.from_config(
        MessageDeduplicationConfig(enabled=True, max_entries=7, expiry=30.0)
    )
    assert (enabled.max_entries, enabled.expiry) == (7, 30.0)


def test_messages_with_headers_are_walked_correctly():
    deduplicator = MessageDeduplicator(10, 60.0, Clock())
    partition = FakePartition()
    headers = b"\x01\x00\x00\x00k\x01\x01\x00\x00\x00v"  # {"k": raw b"v"}
    with_headers = send_message(5, b"abc", headers=headers)
    assert deduplicator.append(partition, with_headers + region((0, b"z")), 1) == 2
    assert deduplicator.append(partition, region((6, b"y")) + with_headers, 2) == 1
    assert payloads(partition.log.batches[-1]) == [b"y"]


def test_nothing_dropped_returns_the_same_object():
    deduplicator = MessageDeduplicator(10, 60.0, Clock())
    raw = region((1, b"a"), (2, b"b"))
    filtered, new_ids = deduplicator.filter(FakePartition(), raw)
    assert filtered is raw and len(new_ids) == 2


def test_duplicates_are_dropped_and_the_rest_stays_in_order():
    deduplicator = MessageDeduplicator(10, 60.0, Clock())
    partition = FakePartition()
    assert deduplicator.append(partition, region((1, b"a"), (2, b"b")), 1) == 2
    appended = deduplicator.append(
        partition, region((3, b"c"), (1, b"a-again"), (4, b"d"), (2, b"b-again"), (5, b"e")), 2
    )
    assert appended == 3
    assert payloads(partition.log.batches[-1]) == [b"c", b"d", b"e"]
    assert partition.log.next_offset == 5  # dense: 0..4


def test_duplicates_inside_one_batch_keep_the_first():
    deduplicator = MessageDeduplicator(10, 60.0, Clock())
    partition = FakePartition()
    assert deduplicator.append(partition, region((7, b"x"), (7, b"y"), (8, b"z"), (7, b"w")), 1) == 2
    assert payloads(partition.log.batches[-1]) == [b"x", b"z"]


def test_zero_ids_are_never_duplicates():
    deduplicator = MessageDeduplicator(10, 60.0, Clock())
    partition = FakePartition()
    raw = region((0, b"a"), (0, b"b"))
    assert deduplicator.append(partition, raw, 1) == 2
    assert deduplicator.append(partition, raw, 2) == 2
    assert not deduplicator.window(partition).seen


def test_a_batch_of_only_duplicates_appends_nothing():
    deduplicator = MessageDeduplicator(10, 60.0, Clock())
    partition = FakePartition()
    deduplicator.append(partition, region((1, b"a")), 1)
    assert deduplicator.append(partition, region((1, b"a"), (1, b"b")), 2) == 0
    assert len(partition.log.batches) == 1


def test_ids_expire_after_the_window():
    clock = Clock()
    deduplicator = MessageDeduplicator(10, 60.0, clock)
    partition = FakePartition()
    deduplicator.append(partition, region((1, b"a")), 1)
    clock.now += 59.9
    assert deduplicator.append(partition, region((1, b"dup")), 2) == 0
    clock.now += 0.1  # 60 s after the first acceptance: a duplicate did not refresh it
    assert deduplicator.append(partition, region((1, b"new")), 3) == 1


def test_oldest_ids_are_evicted_past_max_entries():
    deduplicator = MessageDeduplicator(3, float("inf"), Clock())
    partition = FakePartition()
    deduplicator.append(partition, region((1, b"a"), (2, b"b"), (3, b"c"), (4, b"d")), 1)
    window = deduplicator.window(partition)
    expected = [i.to_bytes(16, "little") for i in (2, 3, 4)]
    assert list(window.order) == expected and sorted(window.seen) == sorted(expected)
    assert deduplicator.append(partition, region((1, b"a"), (4, b"d")), 2) == 1  # 1 was evicted
    assert payloads(partition.log.batches[-1]) == [b"a"]


def test_zero_max_entries_remembers_nothing_across_batches():
    deduplicator = MessageDeduplicator(0, 60.0, Clock())
    partition = FakePartition()
    deduplicator.append(partition, region((1, b"a")), 1)
    assert deduplicator.append(partition, region((1, b"a"), (1, b"b")), 2) == 1


def test_partitions_have_separate_windows():
    deduplicator = MessageDeduplicator(10, 60.0, Clock())
    first, second = FakePartition(), FakePartition()
    deduplicator.append(first, region((1, b"a")), 1)
    assert deduplicator.append(second, region((1, b"a")), 1) == 1


def test_a_rejected_batch_is_not_remembered():
    deduplicator = MessageDeduplicator(10, 60.0, Clock())
    partition = FakePartition(reject=True)
    with pytest.raises(errors.TooBigMessagePayload):
        deduplicator.append(partition, region((1, b"a")), 1)
    partition.log.reject = False
    assert deduplicator.append(partition, region((1, b"a")), 2) == 1


def test_a_malformed_region_reaches_the_log_unchanged():
    deduplicator = MessageDeduplicator(10, 60.0, Clock())
    partition = FakePartition()
    deduplicator.append(partition, region((1, b"a")), 1)
    for garbage in (region((1, b"a"))[:-1], region((1, b"a")) + b"\x00" * 10,
                    region((1, b"a")) + send_message(2, b"")):
        filtered, new_ids = deduplicator.filter(partition, garbage)
        assert filtered is garbage and new_ids == []


def test_memoryview_regions_are_rewritten_too():
    deduplicator = MessageDeduplicator(10, 60.0, Clock())
    partition = FakePartition()
    deduplicator.append(partition, region((1, b"a")), 1)
    view = memoryview(bytearray(region((2, b"b"), (1, b"a"), (3, b"c"))))
    assert deduplicator.append(partition, view, 2) == 2
    assert payloads(partition.log.batches[-1]) == [b"b", b"c"]


# -- through a real server ---------------------------------------------------------------------


def poll_all(client, partition_id=1):
    polled = client.poll_messages(1, 1, partition_id=partition_id,
                                  strategy=PollingStrategy.first(), count=1000)
    return [(m.offset, m.id, m.payload) for m in polled.messages]


def connect(server):
    client = Client(server.address)
    client.connect()
    client.login_user("iggy", "iggy")
    client.create_stream("s", stream_id=1)
    client.create_topic(1, "t", partitions_count=2)
    return client


def test_server_drops_duplicate_ids_and_keeps_offsets_dense(rill_factory):
    server = rill_factory(DEDUP_ON).start()
    with connect(server) as client:
        client.send_messages(1, 1, [Message(b"a", id=1), Message(b"b", id=2)], partitioning=1)
        client.send_messages(1, 1, [Message(b"a2", id=1), Message(b"c", id=3),
                                    Message(b"b2", id=2), Message(b"d", id=4)], partitioning=1)
        client.send_messages(1, 1, [Message(b"a3", id=1)], partitioning=1)  # all duplicates: OK
        client.send_messages(1, 1, [Message(b"z1"), Message(b"z2")], partitioning=1)  # id 0
        client.send_messages(1, 1, [Message(b"z1"), Message(b"z2")], partitioning=1)
        client.send_messages(1, 1, [Message(b"other", id=1)], partitioning=2)
        stored = poll_all(client)
        assert [(offset, payload) for offset, _, payload in stored] == [
            (0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"),
            (4, b"z1"), (5, b"z2"), (6, b"z1"), (7, b"z2"),
        ]
        assert [message_id for _, message_id, _ in stored[:4]] == [1, 2, 3, 4]
        assert len({message_id for _, message_id, _ in stored[4:]}) == 4  # fresh UUIDv7s
        assert poll_all(client, partition_id=2) == [(0, 1, b"other")]
        assert client.get_stats().messages_count == 9


def test_server_evicts_past_max_entries(rill_factory):
    env = dict(DEDUP_ON, RILL_SYSTEM_MESSAGE_DEDUPLICATION_MAX_ENTRIES="3")
    server = rill_factory(env).start()
    with connect(server) as client:
        client.send_messages(1, 1, [Message(f"m{i}".encode(), id=i) for i in (1, 2, 3, 4)],
                             partitioning=1)
        client.send_messages(1, 1, [Message(b"again1", id=1), Message(b"again4", id=4)],
                             partitioning=1)
        assert [payload for _, _, payload in poll_all(client)] == [
            b"m1", b"m2", b"m3", b"m4", b"again1",
        ]


def test_server_forgets_ids_after_the_expiry(rill_factory):
    env = dict(DEDUP_ON, RILL_SYSTEM_MESSAGE_DEDUPLICATION_EXPIRY="200 ms")
    server = rill_factory(env).start()
    with connect(server) as client:
        client.send_messages(1, 1, [Message(b"first", id=9)], partitioning=1)
        deadline = time.monotonic() + 20
        while len(poll_all(client)) < 2:
            assert time.monotonic() < deadline, "the id was never forgotten"
            client.send_messages(1, 1, [Message(b"later", id=9)], partitioning=1)
            time.sleep(0.05)
        assert [payload for _, _, payload in poll_all(client)] == [b"first", b"later"]


def test_server_without_deduplication_keeps_duplicates(rill_server):
    with connect(rill_server) as client:
        client.send_messages(1, 1, [Message(b"a", id=1), Message(b"a", id=1)], partitioning=1)
        assert [(offset, message_id) for offset, message_id, _ in poll_all(client)] == [(0, 1), (1, 1)]


def test_server_rejects_malformed_regions_with_deduplication_on(rill_factory):
    server = rill_factory(DEDUP_ON).start()
    with connect(server) as client:
        with pytest.raises(errors.InvalidCommand):
            client.send_messages_raw(1, 1, 1, region((1, b"abc"))[:-1])
        client.send_messages(1, 1, [Message(b"ok", id=1)], partitioning=1)
        assert [payload for _, _, payload in poll_all(client)] == [b"ok"]
