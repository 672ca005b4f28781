"""The record-format seam: a batch-granular format, defined here only, runs on the same partition
log, segments, recovery and verification as iggy-v1.

``test-batch-v1`` stores each client batch as it arrives, opaque, behind a tiny frame::

    first_offset u64 | count u32 | max_timestamp u64 | leader_epoch u32 | crc32(body) u32 |
    length u32 | body

with ONE 24-byte index entry per batch: first offset, position, max timestamp (the 16 bytes the
log reads), then the batch's leader epoch and 4 reserved bytes (a format-defined entry size).
A client batch is ``count u32 | body``; every batch gets the leader epoch the log stamps it with
(``PartitionLog.leader_epoch``; the tests below that do not set it use ``EPOCH``). It stands in
for kafka-v2 (kafka-notes §3): batches cannot be cut.
"""

from __future__ import annotations

import asyncio
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from rill.errors import CannotAppendMessage, CannotReadMessage
from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.messages import Message
from rill.server.storage import formats
from rill.server.storage.formats import iggy_v1
from rill.server.storage.batch_segment import BatchSegment
from rill.server.storage.formats import IGGY_V1, RecordFormat
from rill.server.storage.formats.iggy_v1_checks import KIND_CONTENT, KIND_GOOD, KIND_STRUCTURE, ScanResult
from rill.server.storage.formats.iggy_v1 import StampedBatch
from rill.server.storage.segment import Segment
from rill.server.storage.verification import verify_in_background

from storage_helpers import read_messages, region

FRAME = struct.Struct("<QIQIII")  # first_offset, count, max_timestamp, epoch, crc, length
ENTRY = struct.Struct("<IIQII")  # relative_offset, position, max_timestamp, epoch, reserved
EPOCH = 7
NAME = "test-batch-v1"
_NO_LIMIT = 0xFFFF_FFFF_FFFF_FFFF


def _stamp(raw, base_offset: int, timestamp: int, base_position: int,
           segment_start: int, leader_epoch: int) -> StampedBatch:
    view = memoryview(raw)
    if len(view) < 5:
        raise DecodeError("a client batch is count u32 | body (at least one byte)")
    count = int.from_bytes(view[:4], "little")
    if count == 0:
        raise DecodeError("a batch holds at least one record")
    body = bytes(view[4:])
    records = (FRAME.pack(base_offset, count, timestamp, leader_epoch, zlib.crc32(body), len(body))
               + body)
    entry = bytearray(ENTRY.pack(base_offset - segment_start, base_position, timestamp,
                                 leader_epoch, 0))
    return StampedBatch(records, entry, count, base_offset, base_offset + count - 1, timestamp)


def _check_batch(view: memoryview, at: int, limit: int, offset: int,
                 entry: tuple[int, int] | None) -> tuple[int, str | None, int, int, int, int]:
    """(kind, reason, end, count, max_timestamp, epoch) of the batch at ``view[at]`` as
    ``offset``; ``entry``: the (timestamp, epoch) its index entry says."""
    if limit - at < FRAME.size:
        return KIND_STRUCTURE, f"incomplete batch at byte {at}", 0, 0, 0, 0
    first, count, max_timestamp, epoch, crc, length = FRAME.unpack_from(view, at)
    end = at + FRAME.size + length
    if first != offset or count == 0 or end > limit:
        return KIND_STRUCTURE, f"batch at byte {at} is not offset {offset}", 0, 0, 0, 0
    if entry is not None and (max_timestamp, epoch) != entry:
        return KIND_STRUCTURE, f"batch at byte {at}: timestamp or epoch", 0, 0, 0, 0
    if zlib.crc32(view[at + FRAME.size : end]) != crc:
        return (KIND_CONTENT, f"batch at byte {at} (offset {offset}): bad checksum", end, count,
                0, 0)
    return KIND_GOOD, None, end, count, max_timestamp, epoch


def _verify(data, entries, first_offset: int, relative_first: int, base_position: int):
    view, index = memoryview(data), bytes(entries)
    numbers = len(index) // ENTRY.size
    verified, at = 0, 0
    for number in range(numbers):
        relative, position, timestamp, epoch, _ = ENTRY.unpack_from(index, number * ENTRY.size)
        following = (ENTRY.unpack_from(index, (number + 1) * ENTRY.size)[1]
                     - base_position if number + 1 < numbers else len(view))
        if relative != relative_first + verified or position - base_position != at:
            return verified, KIND_STRUCTURE, f"entry {number} is not where the batch is"
        kind, reason, end, count, _, _ = _check_batch(view, at, following,
                                                      first_offset + verified, (timestamp, epoch))
        if kind:
            return verified, kind, reason
        if end != following:
            return verified, KIND_STRUCTURE, f"batch at byte {position} ends at {end}"
        verified += count
        at = end
    return verified, KIND_GOOD, None


def _scan(data, start_position: int, expected_offset: int, segment_start: int,
          previous_timestamp: int = 0, max_count: int = _NO_LIMIT,
          verify_checksums: bool = True) -> ScanResult:
    view = memoryview(data)
    entries = bytearray()
    at, offset, previous = start_position, expected_offset, previous_timestamp
    first_timestamp = None
    kind, reason = KIND_GOOD, None
    while at < len(view) and offset - expected_offset < max_count:
        kind, reason, end, count, timestamp, epoch = _check_batch(view, at, len(view), offset,
                                                                  None)
        if kind == KIND_GOOD and timestamp < previous:
            kind, reason = 3, f"batch at byte {at}: timestamp {timestamp} before {previous}"
        if kind:
            break
        entries += ENTRY.pack(offset - segment_start, at, timestamp, epoch, 0)
        first_timestamp = timestamp if first_timestamp is None else first_timestamp
        previous, offset, at = timestamp, offset + count, end
    found = offset - expected_offset
    return ScanResult(found, at, entries, first_timestamp, previous if found else None, kind,
                      reason)


def _record_head(view, position: int) -> tuple[int, int, int]:
    first, count, max_timestamp, _, _, _ = FRAME.unpack_from(view, position)
    return first, count, max_timestamp


def _record_end(view, position: int) -> int | None:
    if len(view) - position < FRAME.size:
        return None
    end = position + FRAME.size + FRAME.unpack_from(view, position)[5]
    return end if end <= len(view) else None


def _entry_epoch(index, position: int) -> int:
    return ENTRY.unpack_from(index, position)[3]


def _not_per_record(*args):
    raise DecodeError(f"{NAME} stores client batches, not per-record layouts")


TEST_BATCH_V1 = RecordFormat(
    name=NAME, batch_index=True, growth_per_message=FRAME.size, stamp=_stamp,
    restamp=_not_per_record, check_stored=_not_per_record, verify=_verify, scan=_scan,
    find=lambda *args: None, record_end=_record_end, record_head=_record_head,
    min_record_size=FRAME.size, index_entry_size=ENTRY.size, entry_epoch=_entry_epoch,
)


def client_batch(count: int, body: bytes) -> bytes:
    return count.to_bytes(4, "little") + body


def batches_of(data: bytes) -> list[tuple[int, int, bytes]]:
    """(first offset, count, body) of each stored batch in ``data``."""
    found, at = [], 0
    while at < len(data):
        first, count, _, _, _, length = FRAME.unpack_from(data, at)
        found.append((first, count, data[at + FRAME.size : at + FRAME.size + length]))
        at += FRAME.size + length
    return found


@pytest.fixture
def batch_log(open_log, monkeypatch):
    """``open_log`` for a topic of the test batch format (registered for this test only)."""
    monkeypatch.setitem(formats.FORMATS, NAME, TEST_BATCH_V1)

    def opener(epoch: int = EPOCH, **options):
        log = open_log(record_format=NAME, **options)
        log.leader_epoch = epoch
        return log

    return opener


def fill(log, sizes: list[int], now: int = 1_000) -> list[tuple[int, int]]:
    """Append one batch per size (``size`` records, body ``b"batch <n>"``); their offsets."""
    return [log.append(client_batch(size, b"batch %d" % number), now + number)
            for number, size in enumerate(sizes)]


def read_batches(log, offset: int, count: int, max_bytes: int | None = None):
    returned, chunks = log.read(offset, count, max_bytes)
    return returned, batches_of(b"".join(chunks))


# ---------------------------------------------------------------------- append and read
def test_a_batch_format_has_one_index_entry_per_batch(batch_log, partition_dir: Path) -> None:
    log = batch_log()
    assert fill(log, [3, 1, 5]) == [(0, 2), (3, 3), (4, 8)]
    assert log.next_offset == 9 and log.messages_count == 9
    segment = log.segments[-1]
    assert isinstance(segment, BatchSegment)
    assert segment.entries_count == 3
    index = (partition_dir / "00000000000000000000.index").read_bytes()
    assert [ENTRY.unpack_from(index, at) for at in range(0, len(index), ENTRY.size)] == [
        (0, 0, 1_000, EPOCH, 0), (3, 39, 1_001, EPOCH, 0), (4, 78, 1_002, EPOCH, 0)]
    assert [segment.index_entry(offset)[:2] for offset in (0, 2, 3, 4, 8)] == [
        (0, 0), (0, 0), (3, 39), (4, 78), (4, 78)]


def test_a_read_inside_a_batch_returns_whole_batches_from_the_one_holding_it(batch_log) -> None:
    log = batch_log()
    fill(log, [3, 1, 5, 2])  # offsets 0-2, 3, 4-8, 9-10
    returned, batches = read_batches(log, 6, 1)
    assert [(first, count) for first, count, _ in batches] == [(4, 5)]
    assert returned == 3  # offsets 6..8: the reader goes on at 9
    returned, batches = read_batches(log, 1, 3)  # offsets 1..3: two batches
    assert [(first, count, body) for first, count, body in batches] == [
        (0, 3, b"batch 0"), (3, 1, b"batch 1")]
    assert returned == 3
    returned, batches = read_batches(log, 2, 100)
    assert [first for first, _, _ in batches] == [0, 3, 4, 9] and returned == 9


def test_max_bytes_cuts_between_batches_and_returns_at_least_one(batch_log) -> None:
    log = batch_log()
    fill(log, [3, 1, 5, 2])  # each stored batch is 39 bytes
    assert [b[0] for b in read_batches(log, 1, 100, max_bytes=79)[1]] == [0, 3]
    assert [b[0] for b in read_batches(log, 1, 100, max_bytes=77)[1]] == [0]
    assert [b[0] for b in read_batches(log, 5, 100, max_bytes=1)[1]] == [4]
    assert log.bytes_after(5) == 78  # from the batch holding offset 5


def test_offset_for_timestamp_finds_the_first_batch_at_or_after_it(batch_log) -> None:
    log = batch_log()
    fill(log, [3, 1, 5, 2], now=1_000)  # batches stamped 1000, 1001, 1002, 1003
    assert log.offset_for_timestamp(0) == 0
    assert log.offset_for_timestamp(1_001) == 3
    assert log.offset_for_timestamp(1_002) == 4
    assert log.offset_for_timestamp(1_003) == 9
    assert log.offset_for_timestamp(1_004) is None


def test_rollover_and_a_clean_reopen_keep_every_batch(batch_log, partition_dir: Path) -> None:
    log = batch_log(segment_size=80)  # three 39-byte batches per segment
    fill(log, [2, 3, 1, 4, 2, 2, 1])
    assert log.segments_count >= 3
    starts = [segment.start_offset for segment in log.segments]
    before = read_batches(log, 0, 100)
    assert before[0] == 15 and [b[0] for b in before[1]] == [0, 2, 5, 6, 10, 12, 14]
    assert read_batches(log, 7, 1)[1][0][:2] == (6, 4)  # inside a batch of a sealed segment
    indexes = {path.name: path.read_bytes() for path in partition_dir.glob("*.index")}
    log.close()
    reopened = batch_log(segment_size=80)
    assert [segment.start_offset for segment in reopened.segments] == starts
    assert all(isinstance(segment, BatchSegment) for segment in reopened.segments)
    assert {path.name: path.read_bytes() for path in partition_dir.glob("*.index")} == indexes
    assert read_batches(reopened, 0, 100) == before
    assert [(s.first_timestamp, s.last_timestamp) for s in reopened.segments] == [
        (1_000, 1_002), (1_003, 1_005), (1_006, 1_006)]
    assert reopened.append(client_batch(2, b"after"), 5_000) == (15, 16)
    assert reopened.offset_for_timestamp(1_003) == 6


def test_an_iggy_log_keeps_per_record_segments(open_log) -> None:
    log = open_log()
    log.append(region(b"a", b"b"), 1)
    assert type(log.segments[-1]) is Segment and log.format is IGGY_V1
    assert [m.payload for m in read_messages(log, 1, 1)] == [b"b"]  # cut at any offset


# ---------------------------------------------------------------------- recovery
def test_a_torn_last_batch_is_cut_after_an_unclean_stop(batch_log, partition_dir: Path) -> None:
    log = batch_log()
    fill(log, [3, 2])
    log.close()
    log_path = partition_dir / "00000000000000000000.log"
    index_path = partition_dir / "00000000000000000000.index"
    whole = log_path.read_bytes()
    torn = FRAME.pack(5, 4, 2_000, EPOCH, 0, 100) + b"only part of it"
    log_path.write_bytes(whole + torn)
    index_path.write_bytes(index_path.read_bytes() + ENTRY.pack(5, len(whole), 2_000, EPOCH, 0))
    recovered = batch_log(clean_shutdown=False)
    assert recovered.next_offset == 5 and recovered.last_timestamp == 1_001
    assert log_path.read_bytes() == whole
    assert index_path.stat().st_size == 2 * ENTRY.size
    assert recovered.append(client_batch(1, b"next"), 3_000) == (5, 5)
    assert [b[:2] for b in read_batches(recovered, 0, 10)[1]] == [(0, 3), (3, 2), (5, 1)]


def test_a_torn_batch_without_its_index_entry_is_cut_too(batch_log, partition_dir: Path) -> None:
    log = batch_log()
    fill(log, [3, 2])
    log.close()
    log_path = partition_dir / "00000000000000000000.log"
    whole = log_path.read_bytes()
    log_path.write_bytes(whole + FRAME.pack(5, 4, 2_000, EPOCH, 0, 100)[:20])
    recovered = batch_log(clean_shutdown=False)
    assert recovered.next_offset == 5 and log_path.read_bytes() == whole


def test_a_lost_index_of_a_sealed_segment_is_rebuilt_from_its_batches(
    batch_log, partition_dir: Path
) -> None:
    log = batch_log(segment_size=80)
    fill(log, [2, 3, 1, 4, 2])
    before = read_batches(log, 0, 100)
    first_index = partition_dir / "00000000000000000000.index"
    entries = first_index.read_bytes()
    log.close()
    first_index.unlink()
    reopened = batch_log(segment_size=80)
    assert first_index.read_bytes() == entries
    assert (reopened.segments[0].first_timestamp, reopened.segments[0].last_timestamp) == (
        1_000, 1_002)
    assert read_batches(reopened, 0, 100) == before


def test_a_corrupt_batch_is_refused_whole_and_the_others_are_served(
    batch_log, partition_dir: Path
) -> None:
    log = batch_log(segment_size=1_000)
    fill(log, [3, 2, 4])  # offsets 0-2, 3-4, 5-8; 39 bytes each
    log.close()
    log_path = partition_dir / "00000000000000000000.log"
    data = bytearray(log_path.read_bytes())
    data[39 + FRAME.size] ^= 0xFF  # the second batch's body
    log_path.write_bytes(bytes(data))
    reopened = batch_log(segment_size=1_000)  # clean: opened unverified, checked when read
    with pytest.raises(CannotReadMessage, match="offset 3"):
        reopened.read(4, 1)
    returned, batches = read_batches(reopened, 1, 10)
    assert [b[0] for b in batches] == [0] and returned == 2  # stops before the bad batch
    assert [b[0] for b in read_batches(reopened, 5, 10)[1]] == [5]
    assert reopened.segments[0].verification.bad.keys() == {3, 4}


def test_the_background_verifier_checks_batches(batch_log, partition_dir: Path) -> None:
    log = batch_log(segment_size=80)
    fill(log, [2, 3, 1, 4, 2])
    log.close()
    first_log = partition_dir / "00000000000000000000.log"
    data = bytearray(first_log.read_bytes())
    data[39 + FRAME.size] ^= 0xFF  # offsets 2-4 of the sealed first segment
    first_log.write_bytes(bytes(data))
    reopened = batch_log(segment_size=80, clean_shutdown=False)
    asyncio.run(verify_in_background(lambda: [reopened], chunk_bytes=1))
    first = reopened.segments[0]
    assert first.verification.bad.keys() == {2, 3, 4}
    assert first.verification.intervals == [(0, 2), (5, 6)]  # batches 0-1, 2-4 (bad), 5
    assert all(segment.verification.is_verified(segment.start_offset, segment.next_offset)
               for segment in reopened.segments[1:])


# ---------------------------------------------------------------------- leader epochs
SIZES = [2, 3, 1, 4, 2, 2, 1]  # offsets 0-1, 2-4, 5 | 6-9, 10-11, 12-13 | 14 (segment_size=80)
EPOCHS = [1, 1, 1, 3, 3, 5, 5]  # epoch 3 starts a segment; epoch 5 spans two
ANSWERS = {0: None, 1: (1, 6), 2: (1, 6), 3: (3, 12), 4: (3, 12), 5: (5, 15), 9: (5, 15)}


def fill_epochs(log, sizes=SIZES, epochs=EPOCHS, now: int = 1_000) -> None:
    for number, (size, epoch) in enumerate(zip(sizes, epochs)):
        log.leader_epoch = epoch
        log.append(client_batch(size, b"batch %d" % number), now + number)


def epoch_answers(log) -> dict[int, tuple[int, int] | None]:
    return {epoch: log.epoch_end(epoch) for epoch in ANSWERS}


def stored_epochs(partition_dir: Path) -> list[tuple[int, int]]:
    """(frame epoch, index entry epoch) of every stored batch, oldest first."""
    found = []
    for log_path in sorted(partition_dir.glob("*.log")):
        data, index = log_path.read_bytes(), log_path.with_suffix(".index").read_bytes()
        at = 0
        for number in range(len(index) // ENTRY.size):
            found.append((FRAME.unpack_from(data, at)[3],
                          ENTRY.unpack_from(index, number * ENTRY.size)[3]))
            at += FRAME.size + FRAME.unpack_from(data, at)[5]
    return found


def test_each_batch_carries_the_leader_epoch_it_was_appended_at(
    batch_log, partition_dir: Path
) -> None:
    log = batch_log(segment_size=80, epoch=0)
    fill_epochs(log)
    assert log.segments_count == 3 and log.last_epoch == 5
    assert stored_epochs(partition_dir) == list(zip(EPOCHS, EPOCHS))


def test_an_append_off_the_event_loop_carries_the_epoch_too(
    batch_log, partition_dir: Path
) -> None:
    log = batch_log(append_threads="always", append_thread_min_size=1, epoch=4)
    assert asyncio.run(log.append_async(client_batch(2, b"threaded"), 1_000)) == (0, 1)
    assert stored_epochs(partition_dir) == [(4, 4)]


def test_epoch_end_answers_offsets_for_leader_epoch_across_segments(batch_log) -> None:
    log = batch_log(segment_size=80, epoch=0)
    assert log.epoch_end(3) is None  # nothing stored
    fill_epochs(log)
    assert log.next_offset == 15 and log.segments_count == 3
    assert epoch_answers(log) == ANSWERS


def test_epoch_end_after_retention_and_an_empty_active_segment(batch_log) -> None:
    log = batch_log(segment_size=80, epoch=0)
    fill_epochs(log, SIZES + [1, 1], EPOCHS + [6, 6])  # 15 | 16, seals: a new, empty segment
    assert log.segments_count == 4 and log.segments[-1].messages_count == 0
    assert log.epoch_end(5) == (5, 15) and log.epoch_end(6) == log.epoch_end(7) == (6, 17)
    assert log.delete_oldest_segment()  # offsets 0-5: every batch of epoch 1
    assert log.epoch_end(1) is None and log.epoch_end(2) is None
    assert log.epoch_end(3) == (3, 12) and log.epoch_end(5) == (5, 15)


def test_epoch_end_is_the_same_after_a_reopen_and_an_index_rebuild(
    batch_log, partition_dir: Path
) -> None:
    log = batch_log(segment_size=80, epoch=0)
    fill_epochs(log)
    indexes = {path.name: path.read_bytes() for path in partition_dir.glob("*.index")}
    log.close()
    reopened = batch_log(segment_size=80, epoch=0)
    assert epoch_answers(reopened) == ANSWERS and reopened.last_epoch == 5
    reopened.close()
    for path in partition_dir.glob("*.index"):
        path.unlink()
    rebuilt = batch_log(segment_size=80, clean_shutdown=False, epoch=0)
    assert {path.name: path.read_bytes() for path in partition_dir.glob("*.index")} == indexes
    assert epoch_answers(rebuilt) == ANSWERS


def test_an_append_below_the_last_stored_epoch_is_refused(batch_log, partition_dir: Path) -> None:
    log = batch_log(segment_size=80, epoch=0)
    fill_epochs(log)
    with pytest.raises(ValueError, match="leader epoch 4 is below this log's 5"):
        log.leader_epoch = 4
    log.close()
    reopened = batch_log(segment_size=80, epoch=0)  # the epoch is not kept apart: set it again
    before = {path.name: path.read_bytes() for path in partition_dir.iterdir()}
    with pytest.raises(CannotAppendMessage, match="leader epoch 0 is below the epoch 5"):
        reopened.append(client_batch(1, b"stale"), 9_000)
    assert {path.name: path.read_bytes() for path in partition_dir.iterdir()} == before
    reopened.leader_epoch = 5
    assert reopened.append(client_batch(1, b"same"), 9_000) == (15, 15)
    reopened.leader_epoch = 8
    assert reopened.append(client_batch(1, b"newer"), 9_001) == (16, 16)
    assert reopened.epoch_end(5) == (5, 16) and reopened.epoch_end(8) == (8, 17)


def test_iggy_v1_records_carry_no_epoch_the_checkpoint_keeps_it(open_log) -> None:
    raw = region(Message(b"a", id=4), Message(b"b", id=5))  # ids given: no fresh UUIDs
    plain = iggy_v1.stamp_batch_python(raw, 3, 1_000, 0, 0)
    for stamp in (iggy_v1.stamp_batch_python, iggy_v1.stamp_batch):
        with_epoch = stamp(raw, 3, 1_000, 0, 0, 9)
        assert (bytes(with_epoch.records), bytes(with_epoch.index_entries), with_epoch.count) == (
            bytes(plain.records), bytes(plain.index_entries), plain.count)
    log = open_log()
    log.leader_epoch = 9
    assert log.append(region(b"x"), 1) == (0, 0)
    assert log.last_epoch == 9 and log.epoch_end(9) == (9, 1)  # (test_replica.py)


# ---------------------------------------------------------------------- the seam itself
_IGGY_RECORD_FUNCTIONS = {
    "verify_records", "scan_records", "find_record", "record_end", "record_header",
    "stamp_batch", "restamp_records", "check_stored_records", "RECORD_OVERHEAD",
    "verify_records_python", "scan_records_python", "find_record_python",
}


def test_only_the_format_modules_name_iggy_record_functions() -> None:
    # the modules are parsed in a child process: in Python 3.11 ``ast.parse`` is not safe
    # beside another thread building ASTs (3.11 formats a traceback's carets with ast.parse;
    # gh-106905), and a test server of an earlier test may still be logging one in a thread
    storage = Path(formats.__file__).parent.parent  # storage/, beside storage/formats/
    scan = (
        "import ast, json, sys\n"
        "from pathlib import Path\n"
        "names = set(json.loads(sys.argv[2]))\n"
        "found = []\n"
        "for path in sorted(Path(sys.argv[1]).glob('*.py')):\n"
        "    for node in ast.walk(ast.parse(path.read_text())):\n"
        "        if isinstance(node, ast.ImportFrom):\n"
        "            named = {alias.name for alias in node.names}\n"
        "        elif isinstance(node, ast.Name):\n"
        "            named = {node.id}\n"
        "        else:\n"
        "            continue\n"
        "        found += [f'{path.name}: {name}' for name in sorted(named & names)]\n"
        "print(json.dumps(found))\n")
    done = subprocess.run([sys.executable, "-c", scan, str(storage),
                           json.dumps(sorted(_IGGY_RECORD_FUNCTIONS))],
                          capture_output=True, text=True, check=True, timeout=60)
    offenders = json.loads(done.stdout)
    assert offenders == []
