"""PartitionLog over offset holes (issue 27 item 2): a batch appended with ``gaps`` (TANK's
explicit sequence numbers) holds fewer records than offsets. Every converted read answers
``count`` records from the next stored one (Kafka's rule for a sparse log), the last records
are found by walking back over records, and ``messages_count`` counts records, after a reopen
and across segments too. The tests taking ``make_log`` run on both implementations of the
partition-log port (files and the memory twin)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rill.protocol.iggy.layout import STORED_HEAD
from rill.protocol.tank.record_batches import batch_from_bundle
from rill.server.storage.partition_log import PartitionLog

TS = 1_700_000_000_000  # ms


def sparse(values: list[bytes], offsets: list[int], base: int,
           times: list[int] | None = None) -> bytes:
    """One batch as the TANK listener builds it for explicit numbers: records at ``offsets``
    (the log's), the batch appended at ``base`` (the log's next offset)."""
    return batch_from_bundle([None] * len(values), values, times or [TS] * len(values),
                             [offset - base for offset in offsets])


def holed(log: PartitionLog) -> PartitionLog:
    """Seqs 10-12 then 10000-10001 (seq = offset + 1): records at 9, 10, 11, 9999, 10000."""
    assert log.append(sparse([b"a", b"b", b"c"], [9, 10, 11], 0), TS * 1000, gaps=True) == (0, 11)
    assert log.append(sparse([b"x", b"y"], [9999, 10000], 12), TS * 1000, gaps=True) == (12, 10000)
    return log


def offsets(log: PartitionLog, offset: int, count: int, max_bytes: int | None = None
            ) -> tuple[list[int], int]:
    converted = log.read_as("iggy-v1", offset, count, max_bytes)
    found = [STORED_HEAD.unpack_from(converted.records, position)[0]
             for position in converted.positions[:-1]]
    assert converted.count == len(found) and converted.first_offset == (found or [offset])[0]
    return found, converted.end_offset


@pytest.mark.parametrize(("offset", "count", "expected"), [
    (0, 3, [9, 10, 11]),  # the example of the issue: the range 0..2 is a hole
    (0, 2, [9, 10]),
    (5, 4, [9, 10, 11, 9999]),
    (11, 3, [11, 9999, 10000]),  # across the hole between the batches
    (12, 1, [9999]),
    (5000, 10, [9999, 10000]),
    (10000, 5, [10000]),
    (10001, 5, []),
])
def test_a_converted_read_answers_from_the_next_stored_record(make_log, offset, count,
                                                              expected) -> None:
    log = holed(make_log(record_format="kafka-v2"))
    found, end = offsets(log, offset, count)
    assert found == expected
    assert end == (expected[-1] + 1 if expected else offset)


def test_a_reader_going_on_from_each_end_reads_every_record_once(make_log) -> None:
    log = holed(make_log(record_format="kafka-v2"))
    for count in (1, 2, 3, 100):
        position, seen = 0, []
        while True:
            found, position = offsets(log, position, count)
            if not found:
                break
            seen += found
        assert seen == [9, 10, 11, 9999, 10000] and position == log.next_offset


def test_max_bytes_still_returns_at_least_one_record_past_a_hole(make_log) -> None:
    log = holed(make_log(record_format="kafka-v2"))
    assert offsets(log, 12, 10, max_bytes=1) == ([9999, 10000], 10001)  # one whole batch


def test_the_columnar_read_answers_from_the_next_stored_record(make_log) -> None:
    log = holed(make_log(record_format="kafka-v2"))
    columns = log.read_columnar(0, 3, 1 << 20)
    assert (columns.base_offset, columns.count) == (9, 3)
    assert log.read_columnar(12, 5, 1 << 20).base_offset == 9999


def test_the_last_records_are_counted_as_records(make_log) -> None:
    log = holed(make_log(record_format="kafka-v2"))
    assert [log.start_of_last(count) for count in (1, 2, 3, 5, 6)] == [10000, 9999, 11, 9, 0]
    assert offsets(log, log.start_of_last(3), 3)[0] == [11, 9999, 10000]


def test_messages_count_counts_records_not_offsets(make_log, caplog) -> None:
    log = holed(make_log(record_format="kafka-v2", segment_size=1))  # a segment per batch
    assert (log.messages_count, log.next_offset, log.segments_count) == (5, 10001, 3)
    log.close()
    caplog.set_level(logging.WARNING, logger="rill.server.storage")
    reopened = make_log(record_format="kafka-v2", segment_size=1)
    assert caplog.records == []  # the holes kept in the index pass recovery's checks
    assert (reopened.messages_count, reopened.next_offset) == (5, 10001)
    reopened.append(sparse([b"z"], [10005], 10001), TS * 1000, gaps=True)
    assert reopened.messages_count == 6
    assert offsets(reopened, 0, 10)[0] == [9, 10, 11, 9999, 10000, 10005]


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_a_rebuilt_index_keeps_the_holes(open_log, partition_dir: Path,
                                         clean_shutdown: bool) -> None:
    holed(open_log(record_format="kafka-v2")).close()
    (partition_dir / "00000000000000000000.index").unlink()
    rebuilt = open_log(record_format="kafka-v2", clean_shutdown=clean_shutdown)
    assert (rebuilt.messages_count, rebuilt.next_offset) == (5, 10001)
    assert offsets(rebuilt, 0, 3)[0] == [9, 10, 11]


def test_a_follower_counts_the_leaders_records(make_log) -> None:
    leader = holed(make_log(record_format="kafka-v2"))
    returned, chunks = leader.read(0, leader.next_offset)
    follower = make_log(record_format="kafka-v2", name="follower")
    assert follower.append_replicated(b"".join(chunks), 0) == (0, 10000)
    assert (follower.messages_count, follower.next_offset) == (5, 10001)


def test_a_timestamp_search_finds_the_record_after_a_hole_inside_a_batch(make_log) -> None:
    log = make_log(record_format="kafka-v2")
    log.append(sparse([b"a", b"b", b"c"], [4, 5, 8], 0, [TS, TS + 1, TS + 2]), (TS + 2) * 1000,
               gaps=True)
    log.append(sparse([b"d", b"e"], [20, 30], 9, [TS + 3, TS + 4]), (TS + 4) * 1000, gaps=True)
    assert log.record_at_or_after((TS + 2) * 1000) == (8, (TS + 2) * 1000)
    assert log.record_at_or_after((TS + 4) * 1000) == (30, (TS + 4) * 1000)
    assert log.record_at_or_after((TS + 5) * 1000) is None
