"""Recovery at open: torn tails are cut, indexes rebuilt, bad records refused (never served), the
rest of every segment served."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest
from storage_helpers import read_messages, region

from rill.errors import CannotReadMessage
from rill.protocol.tank.record_batches import batch_from_bundle
from rill.server.storage.paths import DataPaths

SECOND = 1_000_000


def fill(log, count: int, first: int = 0) -> None:
    for number in range(first, first + count):
        log.append(region(b"message-%03d" % number), (number + 1) * SECOND)


def tail_files(partition_dir: Path) -> tuple[Path, Path]:
    start = max(int(path.stem) for path in partition_dir.glob("*.log"))
    return DataPaths.segment_log(partition_dir, start), DataPaths.segment_index(
        partition_dir, start
    )


RECORD = 45 + len(b"message-000")  # every record in these tests has this size


def test_clean_reopen_serves_the_same_data(open_log) -> None:
    log = open_log(segment_size=300)
    fill(log, 20)
    before = read_messages(log, 0, 100)
    log.close()
    assert read_messages(open_log(segment_size=300), 0, 100) == before


@pytest.mark.parametrize("cut", [1, 10, RECORD - 1])
def test_a_log_truncated_mid_record_is_cut_back_to_the_last_whole_record(
    open_log, partition_dir: Path, cut: int
) -> None:
    log = open_log()
    fill(log, 5)
    log.close()
    log_path, index_path = tail_files(partition_dir)
    log_path.write_bytes(log_path.read_bytes()[: 5 * RECORD - cut])
    log = open_log(clean_shutdown=False)
    assert log.next_offset == 4
    assert [m.offset for m in read_messages(log, 0, 10)] == [0, 1, 2, 3]
    assert log_path.stat().st_size == 4 * RECORD
    assert index_path.stat().st_size == 4 * 16
    assert log.append(region(b"after"), 99 * SECOND) == (4, 4)
    assert read_messages(log, 4, 1)[0].payload == b"after"


def test_garbage_after_the_last_record_is_cut(open_log, partition_dir: Path) -> None:
    log = open_log()
    fill(log, 3)
    log.close()
    log_path, _ = tail_files(partition_dir)
    with log_path.open("ab") as file:
        file.write(b"\xde\xad\xbe\xef" * 40)
    log = open_log(clean_shutdown=False)
    assert log.next_offset == 3
    assert log_path.stat().st_size == 3 * RECORD
    assert [m.payload for m in read_messages(log, 0, 10)] == [
        b"message-000",
        b"message-001",
        b"message-002",
    ]


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_a_deleted_index_is_rebuilt_from_the_log(
    open_log, partition_dir: Path, clean_shutdown: bool
) -> None:
    log = open_log(segment_size=300)
    fill(log, 12)
    log.close()
    originals = {path: path.read_bytes() for path in partition_dir.glob("*.index")}
    for path in originals:
        path.unlink()
    log = open_log(segment_size=300, clean_shutdown=clean_shutdown)
    assert [m.offset for m in read_messages(log, 0, 100)] == list(range(12))
    assert {path: path.read_bytes() for path in partition_dir.glob("*.index")} == originals
    assert all(not segment.verification.bad for segment in log.segments)


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_a_short_index_is_rebuilt(open_log, partition_dir: Path, clean_shutdown: bool) -> None:
    log = open_log()
    fill(log, 6)
    log.close()
    _, index_path = tail_files(partition_dir)
    original = index_path.read_bytes()
    index_path.write_bytes(original[:40])
    log = open_log(clean_shutdown=clean_shutdown)
    assert log.next_offset == 6
    assert index_path.read_bytes() == original
    assert [m.offset for m in read_messages(log, 3, 10)] == [3, 4, 5]


def test_an_index_longer_than_the_log_is_rebuilt(open_log, partition_dir: Path) -> None:
    log = open_log()
    fill(log, 4)
    log.close()
    log_path, index_path = tail_files(partition_dir)
    log_path.write_bytes(log_path.read_bytes()[: 2 * RECORD])  # the index still has 4 entries
    log = open_log(clean_shutdown=False)
    assert log.next_offset == 2
    assert index_path.stat().st_size == 32


def flip_byte(path: Path, position: int, mask: int = 0x20) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= mask
    path.write_bytes(bytes(data))


def test_a_bad_record_inside_the_tail_is_refused_not_cut(open_log, partition_dir: Path) -> None:
    log = open_log()
    fill(log, 6)
    log.close()
    log_path, _ = tail_files(partition_dir)
    flip_byte(log_path, 3 * RECORD + 45)  # first payload byte of offset 3
    log = open_log(clean_shutdown=False)
    assert log.next_offset == 6 and log_path.stat().st_size == 6 * RECORD
    assert [m.offset for m in read_messages(log, 0, 10)] == [0, 1, 2]
    with pytest.raises(CannotReadMessage) as raised:
        log.read(3, 10)
    assert "offset 3" in raised.value.reason
    assert [m.offset for m in read_messages(log, 4, 10)] == [4, 5]


def test_a_bad_last_record_after_an_unclean_stop_is_a_torn_write_and_cut(
    open_log, partition_dir: Path
) -> None:
    log = open_log()
    fill(log, 4)
    log.close()
    log_path, _ = tail_files(partition_dir)
    flip_byte(log_path, 4 * RECORD - 1, 0x01)
    log = open_log(clean_shutdown=False)
    assert log.next_offset == 3 and log_path.stat().st_size == 3 * RECORD


def test_validate_checksum_verifies_the_tail_after_a_clean_stop_and_cuts_nothing(
    open_log, partition_dir: Path
) -> None:
    log = open_log()
    fill(log, 4)
    log.close()
    log_path, _ = tail_files(partition_dir)
    flip_byte(log_path, 4 * RECORD - 1, 0x01)
    log = open_log(validate_checksum=True)
    assert log.next_offset == 4 and log_path.stat().st_size == 4 * RECORD
    assert log.segments[-1].verification.bad.keys() == {3}
    assert [m.offset for m in read_messages(log, 0, 10)] == [0, 1, 2]


def test_bytes_after_the_last_record_of_a_cleanly_stopped_tail_are_kept(
    open_log, partition_dir: Path
) -> None:
    log = open_log()
    fill(log, 3)
    log.close()
    log_path, _ = tail_files(partition_dir)
    with log_path.open("ab") as file:
        file.write(b"\xde\xad" * 30)
    log = open_log(validate_checksum=True)  # a clean stop: nothing of what is there is cut
    assert log_path.stat().st_size == 3 * RECORD + 60
    assert [m.offset for m in read_messages(log, 0, 10)] == [0, 1, 2]
    assert log.append(region(b"next"), 99 * SECOND) == (3, 3)  # in a new segment
    assert log.segments_count == 2
    assert [m.payload for m in read_messages(log, 2, 10)] == [b"message-002", b"next"]


def corrupt_first_sealed_segment(open_log, partition_dir: Path):
    log = open_log(segment_size=3 * RECORD)
    fill(log, 10)  # segments of 3 messages: [0-2] [3-5] [6-8] [9]
    log.close()
    sealed_log = DataPaths.segment_log(partition_dir, 3)
    data = bytearray(sealed_log.read_bytes())
    data[RECORD : RECORD + 8] = b"\xff" * 8  # offset 4's record is garbage now
    data[-5:] = b"\x00" * 5  # and offset 5's payload
    sealed_log.write_bytes(bytes(data))
    return sealed_log


@pytest.mark.parametrize("clean_shutdown", [True, False])
@pytest.mark.parametrize("validate_checksum", [True, False])
def test_a_corrupt_sealed_segment_refuses_only_its_bad_records(
    open_log, partition_dir: Path, clean_shutdown: bool, validate_checksum: bool, caplog
) -> None:
    with caplog.at_level(logging.ERROR, logger="rill.server.storage"):
        sealed_log = corrupt_first_sealed_segment(open_log, partition_dir)
        log = open_log(segment_size=3 * RECORD, clean_shutdown=clean_shutdown,
                       validate_checksum=validate_checksum)
        assert [m.offset for m in read_messages(log, 0, 10)] == [0, 1, 2, 3]
        for offset in (4, 5):
            with pytest.raises(CannotReadMessage) as raised:
                log.read(offset, 3)
            assert raised.value.code == 4011 and f"offset {offset}" in raised.value.reason
    assert any(sealed_log.name in record.getMessage() and "offset 4" in record.getMessage()
               for record in caplog.records)
    assert [m.offset for m in read_messages(log, 6, 10)] == [6, 7, 8, 9]
    assert log.append(region(b"still writable"), 50 * SECOND) == (10, 10)
    assert sealed_log.stat().st_size > 0  # sealed data is never truncated


def test_a_structurally_broken_sealed_segment_refuses_what_is_missing(
    open_log, partition_dir: Path
) -> None:
    log = open_log(segment_size=3 * RECORD)
    fill(log, 10)
    log.close()
    sealed_log = DataPaths.segment_log(partition_dir, 3)
    sealed_log.write_bytes(sealed_log.read_bytes()[:-7])
    log = open_log(segment_size=3 * RECORD)
    assert [m.offset for m in read_messages(log, 3, 3)] == [3, 4]
    with pytest.raises(CannotReadMessage):
        log.read(5, 1)
    assert [m.offset for m in read_messages(log, 6, 4)] == [6, 7, 8, 9]
    assert log.messages_count == 10  # the segment still owns its offsets


def test_a_sealed_segment_without_index_is_rebuilt_not_corrupt(
    open_log, partition_dir: Path
) -> None:
    log = open_log(segment_size=3 * RECORD)
    fill(log, 7)
    log.close()
    index = DataPaths.segment_index(partition_dir, 0)
    original = index.read_bytes()
    index.unlink()
    log = open_log(segment_size=3 * RECORD)
    assert index.read_bytes() == original
    assert [m.offset for m in read_messages(log, 0, 7)] == list(range(7))


def test_a_corrupt_expired_segment_is_still_deleted_by_retention(
    open_log, partition_dir: Path
) -> None:
    corrupt_first_sealed_segment(open_log, partition_dir)
    log = open_log(segment_size=3 * RECORD, validate_checksum=True)
    assert (
        log.delete_expired_segments(now_us=7 * SECOND, expiry_us=0) == 2
    )  # [0-2] and the corrupt [3-5]
    assert log.first_offset == 6
    assert [m.offset for m in read_messages(log, 0, 10)] == [6, 7, 8, 9]


def test_offset_for_timestamp_around_a_corrupt_segment(open_log, partition_dir: Path) -> None:
    corrupt_first_sealed_segment(open_log, partition_dir)
    log = open_log(segment_size=3 * RECORD, validate_checksum=True)
    assert log.offset_for_timestamp(2 * SECOND) == 1
    assert log.offset_for_timestamp(8 * SECOND) == 7  # past the corrupt records
    assert log.offset_for_timestamp(5 * SECOND) == 4  # a bad record: polling it answers 4011
    with pytest.raises(CannotReadMessage):
        log.read(4, 1)


def test_stray_index_is_removed_and_foreign_files_left_alone(open_log, partition_dir: Path) -> None:
    log = open_log()
    fill(log, 2)
    log.close()
    stray = DataPaths.segment_index(partition_dir, 500)
    stray.write_bytes(b"\x00" * 16)
    foreign = partition_dir / "notes.txt"
    foreign.write_text("keep me")
    (partition_dir / "offsets").mkdir()
    log = open_log(clean_shutdown=False)
    assert not stray.exists()
    assert foreign.read_text() == "keep me" and (partition_dir / "offsets").is_dir()
    assert log.next_offset == 2


def test_an_empty_directory_starts_a_fresh_log(open_log, partition_dir: Path) -> None:
    partition_dir.mkdir(parents=True)
    log = open_log(clean_shutdown=False)
    assert log.is_empty and log.segments_count == 1


def test_a_full_tail_is_sealed_at_open(open_log, partition_dir: Path) -> None:
    log = open_log(segment_size=10_000)
    fill(log, 3)
    log.close()
    log = open_log(segment_size=2 * RECORD)
    assert log.segments_count == 2 and log.segments[0].sealed
    assert log.append(region(b"x"), 10 * SECOND) == (3, 3)


# ---------------------------------------------------------------- a batch index's timestamps
def kafka_batch(time_ms: int, count: int = 2) -> bytes:
    """A RecordBatch v2 of ``count`` records stamped ``time_ms`` (maxTimestamp)."""
    return batch_from_bundle([None] * count, [b"v"] * count, [time_ms] * count)


def recovery_lines(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name.startswith("rill.server.storage") and record.levelno >= logging.WARNING]


def test_batches_stamped_earlier_than_one_before_do_not_rescan_after_a_clean_stop(
    open_log, caplog
) -> None:
    """Kafka and TANK producers set timestamps freely: the last batch of each segment is
    stamped earlier than one before it, and a segment starts earlier than the one before
    ended. The batch index keeps a running maximum; recovery compares like with like."""
    log = open_log(record_format="kafka-v2", segment_size=3 * len(kafka_batch(0)) - 1)
    times = [5_000, 7_000, 1_000, 2_000, 9_000, 3_000, 4_000]  # segments of three batches
    for time_ms in times:
        log.append(kafka_batch(time_ms), time_ms * 1000)  # as the Kafka listener appends
    assert log.segments_count == 3
    log.close()
    caplog.set_level(logging.DEBUG, logger="rill.server.storage")
    for _ in range(2):
        caplog.clear()
        reopened = open_log(record_format="kafka-v2", segment_size=3 * len(kafka_batch(0)) - 1)
        assert recovery_lines(caplog) == []
        assert reopened.next_offset == 2 * len(times) and reopened.messages_count == 2 * len(times)
        converted = reopened.read_as("iggy-v1", 0, 100)
        assert list(converted.timestamps) == [t * 1000 for t in times for _ in range(2)]
        assert reopened.offset_for_timestamp(6_000_000) == 2  # the running maximum's answer
        assert reopened.offset_for_timestamp(8_000_000) == 8
        reopened.close()


def test_a_timestamp_that_disagrees_is_named_with_both_values(open_log, partition_dir: Path,
                                                              caplog) -> None:
    log = open_log(record_format="kafka-v2")
    for time_ms in (5_000, 1_000):
        log.append(kafka_batch(time_ms), time_ms * 1000)
    log.close()
    index = partition_dir / "00000000000000000000.index"
    entries = bytearray(index.read_bytes())
    struct.pack_into("<Q", entries, 24 + 8, 4_000_000)  # not max(1_000_000, 5_000_000)
    index.write_bytes(entries)
    caplog.set_level(logging.WARNING, logger="rill.server.storage")
    reopened = open_log(record_format="kafka-v2")
    assert any("record at position" in line and "timestamp 1000000, the index says 4000000"
               in line and "the entry before says 5000000" in line
               for line in recovery_lines(caplog)), recovery_lines(caplog)
    assert list(reopened.read_as("iggy-v1", 0, 10).timestamps) == [5_000_000] * 2 + [1_000_000] * 2


def test_an_offset_that_disagrees_is_named_with_both_values(open_log, partition_dir: Path,
                                                            caplog) -> None:
    log = open_log()
    fill(log, 3)
    log.close()
    _, index = tail_files(partition_dir)
    entries = bytearray(index.read_bytes())
    struct.pack_into("<I", entries, 2 * 16 + 4, RECORD)  # the last entry points at record 1
    index.write_bytes(entries)
    caplog.set_level(logging.WARNING, logger="rill.server.storage")
    reopened = open_log()
    assert any(f"record at position {RECORD}: offset 1, the index says 2" in line
               for line in recovery_lines(caplog)), recovery_lines(caplog)
    assert [m.offset for m in read_messages(reopened, 0, 10)] == [0, 1, 2]


def test_a_per_record_timestamp_that_disagrees_is_named(open_log, partition_dir: Path,
                                                        caplog) -> None:
    log = open_log()
    fill(log, 3)
    log.close()
    _, index = tail_files(partition_dir)
    entries = bytearray(index.read_bytes())
    struct.pack_into("<Q", entries, 2 * 16 + 8, 7 * SECOND)
    index.write_bytes(entries)
    caplog.set_level(logging.WARNING, logger="rill.server.storage")
    open_log()
    assert any(f"timestamp {3 * SECOND}, the index says {7 * SECOND}" in line
               for line in recovery_lines(caplog)), recovery_lines(caplog)
