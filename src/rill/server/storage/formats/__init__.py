"""Record formats: how a topic's partitions lay their records out, chosen per topic and
recorded in the metadata store (``topics.record_format``, ``LogSettings.record_format``).

Owns: ``RecordFormat`` (what a partition log asks of a format), ``FORMATS`` (the formats this
server can store, by name) and ``format_named``. One module per format in this folder, each
naming its format (``NAME``), with the C units of the ``_stamp`` extension beside them
(``iggy_v1`` loads it), and ``conversion`` between them. Two formats:
  * ``iggy-v1``: Iggy's stored layout (``rill.protocol.iggy.layout``), stamped from SEND regions by
    ``iggy_v1`` and its C twin, checked by ``iggy_v1_checks``, one 16-byte index entry per
    record (``storage.index_entry``);
  * ``kafka-v2``: Kafka's RecordBatch v2 as the client sent it (``kafka_v2`` owns the layout): validated (lengths, magic, CRC-32C, counts, codec), only baseOffset and
    partitionLeaderEpoch rewritten, never decompressed; one 24-byte index entry per batch
    with its leader epoch. Its index timestamp is the log's append timestamp, which the Kafka
    handler sets to the batch's maxTimestamp (``kafka_v2.batch_time_us``): see there.

What the seam is for: Kafka's record batches cannot be cut at any offset and carry their own
CRC over the whole batch (../shared/spec/kafka-notes.md §3), so ``kafka-v2`` stores client
batches as they arrive and keeps a **batch-granular** index (one entry per batch: first
offset, position, max timestamp; the last offset is where the next entry starts), with a
leader epoch per batch for replication (cluster-design.md). ``batch_index`` tells the log
which kind a format keeps.

Every record-layout question of storage goes through the log's format: the write path
(``stamp``, ``restamp``, ``check_stored``), reads and the background verifier (``verify``),
recovery's structural check (``record_head``, ``record_end``, ``min_record_size``) and index
rebuilds (``scan``, ``find``). Only ``iggy_v1``, ``iggy_v1_checks`` and this
module name iggy-v1's functions; the rest of storage is handed a ``RecordFormat``
(``PartitionLog`` -> ``Segment``, ``recover_segments``, ``locate_records``, the verifier's
jobs), ``IGGY_V1`` by default.

What a batch-index format (``batch_index=True``) must give, and how the log uses it
(``storage.batch_segment``; ``tests/server/storage/formats/test_formats.py`` runs one):
  * ``stamp`` returns ONE index entry for the client batch, ``relative_offset u32`` (its first
    offset - segment start) | ``position u32`` | ``timestamp u64`` (its max timestamp), and the
    batch's offset ``count``; the log never cuts a batch: reads return whole batches from the
    one holding the offset asked for.
  * ``verify(data, entries, first_offset, relative_first, base_position)`` checks whole
    batches against their entries and returns the OFFSETS of the good batches before the first
    bad one (a per-record format's count of records is the same thing), so the log marks
    verified and bad ranges by offset whichever the granularity.
  * ``scan`` returns ``count`` in offsets and one entry per batch; ``record_head`` gives a
    batch's (first offset, offset count, max timestamp); ``find`` may give None (a batch is
    not searched for again after a broken one: a tail is cut there, a sealed segment's later
    offsets are refused).

Leader epochs (cluster-design.md, replication): the log passes its ``leader_epoch`` (the
epoch of the leader writing it; 0 for a log without replication) to ``stamp`` on every append,
as it passes the timestamp. A format that keeps epochs writes it into the batch itself (as
Kafka's partitionLeaderEpoch) and into the batch's index entry: the first 16 bytes of an entry
keep the layout above, which is all the log reads for offsets and positions; such a format
declares a larger ``index_entry_size``, e.g. 24 bytes ``... | leader_epoch u32 | reserved u32``,
and the log steps over entries by that size (``BatchSegment``, recovery's structural check,
``LocatedRecords``); its ``stamp`` and ``scan`` write the whole entry (the epoch being in the
batch, a rebuilt index has it again), and its ``entry_epoch(index, entry_position)`` reads the
epoch back from an entry. The log keeps epochs non-decreasing along its batches, so
``PartitionLog.epoch_end`` (Kafka's OffsetsForLeaderEpoch) is a binary search over each
segment's entries. A format without epochs in its entries (iggy-v1: ``entry_epoch`` None)
accepts and ignores the epoch given to ``stamp``; its logs keep their epoch boundaries in a
checkpoint beside the log (``storage.checkpoints``, ``storage.replica``).

Holes (offsets without a record): a batch-index format whose batches may hold fewer records
than offsets (``stamp_sparse``: TANK's explicit sequence numbers; a leader's compacted batch)
keeps each batch's count of holes in its index entry -- ``kafka-v2``: the entry's last u32,
set here around ``kafka_v2``' ``stamp_sparse`` and ``scan`` from the batch header
(lastOffsetDelta + 1 - recordsCount), 0 for a dense batch -- and gives ``holes_in`` to sum
them, so a log counts its records from its index alone (``BatchSegment.records_count``);
readers answer from the next stored record (``LogReads.read_as``). Indexes written before
this kept 0 there: their sparse batches count as dense until the index is rebuilt.

A follower (``PartitionLog.append_replicated``) appends a leader's stored bytes verbatim: a
per-record format checks them with ``check_stored``; a batch-index format with ``scan`` over
the given bytes, whose entries (epochs included) become the follower's index entries.
"""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass
from typing import Callable

from rill.errors import FeatureUnavailable
from rill.server.storage.formats.iggy_v1_checks import (
    ScanResult,
    find_record,
    record_end,
    record_header,
    scan_records,
    verify_records,
)
from rill.server.storage.formats import iggy_v1, kafka_v2
from rill.server.storage.formats.iggy_v1 import (
    RECORD_GROWTH,
    RECORD_OVERHEAD,
    StampedBatch,
    check_stored_records,
    restamp_records,
    stamp_batch,
)
from rill.server.storage.index_entry import INDEX_ENTRY_SIZE


@dataclass(frozen=True)
class RecordFormat:
    name: str
    # one index entry per batch (True) or per record (False: any offset can start a read)
    batch_index: bool
    # bytes a record grows by when a client message is stored (a segment's room check)
    growth_per_message: int
    # a client batch (for iggy-v1 a SEND region) -> records and index entries at an offset:
    # (raw, base offset, timestamp, base position, segment start, leader epoch)
    stamp: Callable[[bytes | bytearray | memoryview, int, int, int, int, int], StampedBatch]
    # stored records whose offsets and timestamp are set at commit (staged appends)
    restamp: Callable[[bytearray, array, int, int], None]
    # checks stored records a client or a leader built; their start positions
    check_stored: Callable[[bytes, bytes | memoryview], array]
    # reads and the background verifier: stored bytes against their index entries
    # (data, entries, first offset, relative offset of the first entry, position of data[0])
    # -> (entries verified, kind, reason); see ``record_checks.verify_records``
    verify: Callable[[bytes | bytearray | memoryview, bytes | bytearray | memoryview, int, int,
                      int], tuple[int, int, str | None]]
    # recovery and index rebuilds: walk the log from a position without an index
    # (data, position, offset, segment start, previous timestamp, max offsets, checksums)
    # -> ScanResult (``count`` offsets, one index entry per record or per batch)
    scan: Callable[..., ScanResult]
    # where records can be found again after bytes that are not records (per-record formats):
    # (data, from position, first offset, last offset) -> (position, offset) or None
    find: Callable[[bytes | bytearray | memoryview, int, int, int], tuple[int, int] | None]
    # end of the record (or batch) at a position by its own lengths; None if it overruns
    record_end: Callable[[bytes | bytearray | memoryview, int], int | None]
    # (first offset, offsets it holds, index timestamp) of the record (or batch) at a position
    record_head: Callable[[bytes | bytearray | memoryview, int], tuple[int, int, int]]
    # the fewest bytes a stored record (or batch) takes: headers read before lengths are known
    min_record_size: int
    # bytes per index entry: the first 16 are ``relative_offset u32 | position u32 |
    # timestamp u64``, all the log reads; a batch-index format may add its own after them (a
    # leader epoch); a per-record format keeps 16 (its segments index entries directly)
    index_entry_size: int = INDEX_ENTRY_SIZE
    # ``stamp`` of a batch whose offsets may skip (a server-built batch: TANK's explicit
    # sequence numbers); None: every stamped batch holds dense offsets
    stamp_sparse: Callable[[bytes | bytearray | memoryview, int, int, int, int, int],
                           StampedBatch] | None = None
    # the leader epoch an index entry carries: (index bytes, byte position of the entry) ->
    # epoch; None for a format without epochs (only a batch-index format can have them)
    entry_epoch: Callable[[bytes | bytearray | memoryview, int], int] | None = None
    # offsets that hold no record (holes: a sparse batch, TANK's explicit sequence numbers) in
    # index entries (bytes of whole entries) -> their sum; None: one record per offset. A
    # format with holes keeps each batch's in its entry, set by its ``stamp_sparse`` and
    # ``scan``, so a log counts records from its index alone (``BatchSegment.records_count``)
    holes_in: Callable[[bytes | bytearray | memoryview], int] | None = None


def _iggy_record_head(view: bytes | bytearray | memoryview, position: int
                     ) -> tuple[int, int, int]:
    offset, _, timestamp, _, _ = record_header(view, position)
    return offset, 1, timestamp


# kafka-v2 holes: a batch holds lastOffsetDelta + 1 offsets and recordsCount records; the
# difference is kept in its index entry's reserved u32 (0 for every dense batch)
_HOLES = struct.Struct("<I")
_HOLES_AT = 20  # in a 24-byte entry: relative_offset, position, timestamp, epoch, holes
_ENTRY_POSITION = struct.Struct("<4xI")
_LITTLE_ENDIAN_HOST = sys.byteorder == "little"


def _mark_kafka_holes(data: bytes | bytearray | memoryview, entries: bytearray,
                      base_position: int) -> None:
    """Set each entry's holes from its batch's header (``data[entry position - base]``)."""
    header, size = kafka_v2.BATCH_HEADER.unpack_from, kafka_v2.INDEX_ENTRY_SIZE
    for at in range(0, len(entries) - size + 1, size):
        fields = header(data, _ENTRY_POSITION.unpack_from(entries, at)[0] - base_position)
        holes = fields[6] + 1 - fields[12]  # lastOffsetDelta + 1 - recordsCount
        if holes > 0:
            _HOLES.pack_into(entries, at + _HOLES_AT, holes)


def _kafka_stamp_sparse(raw: bytes | bytearray | memoryview, base_offset: int, timestamp_us: int,
                        base_position: int, segment_start: int, leader_epoch: int = 0
                        ) -> StampedBatch:
    stamped = kafka_v2.stamp_sparse(raw, base_offset, timestamp_us, base_position,
                                         segment_start, leader_epoch)
    _mark_kafka_holes(stamped.records, stamped.index_entries, base_position)
    return stamped


def _kafka_scan(data: bytes | bytearray | memoryview, *args: object, **options: object
                ) -> ScanResult:
    scanned = kafka_v2.scan_batches(data, *args, **options)
    _mark_kafka_holes(data, scanned.index_entries, 0)
    return scanned


def _kafka_holes_in(entries: bytes | bytearray | memoryview) -> int:
    size = kafka_v2.INDEX_ENTRY_SIZE
    with memoryview(entries) as view:
        used = len(view) - len(view) % size
        if _LITTLE_ENDIAN_HOST:
            with view[:used].cast("B").cast("I") as words:
                return sum(words[5::6])  # the sixth u32 of each 24-byte entry
        return sum(_HOLES.unpack_from(view, at + _HOLES_AT)[0] for at in range(0, used, size))


IGGY_V1 = RecordFormat(
    name=iggy_v1.NAME,
    batch_index=False,
    growth_per_message=RECORD_GROWTH,
    stamp=stamp_batch,
    restamp=restamp_records,
    check_stored=check_stored_records,
    verify=verify_records,
    scan=scan_records,
    find=find_record,
    record_end=record_end,
    record_head=_iggy_record_head,
    min_record_size=RECORD_OVERHEAD,
)

KAFKA_V2 = RecordFormat(
    name=kafka_v2.NAME,
    batch_index=True,
    growth_per_message=0,  # stored as sent
    stamp=kafka_v2.stamp_batches,
    stamp_sparse=_kafka_stamp_sparse,
    restamp=kafka_v2.no_staged_appends,
    check_stored=kafka_v2.no_staged_appends,
    verify=kafka_v2.verify_batches,
    scan=_kafka_scan,
    find=kafka_v2.no_search,
    record_end=kafka_v2.batch_end,
    record_head=kafka_v2.batch_head,
    min_record_size=kafka_v2.BATCH_HEADER_SIZE,
    index_entry_size=kafka_v2.INDEX_ENTRY_SIZE,
    entry_epoch=kafka_v2.entry_epoch,
    holes_in=_kafka_holes_in,
)

FORMATS: dict[str, RecordFormat] = {IGGY_V1.name: IGGY_V1, KAFKA_V2.name: KAFKA_V2}


def format_named(name: str) -> RecordFormat:
    found = FORMATS.get(name)
    if found is None:
        raise FeatureUnavailable(reason=f"record format {name!r} is not available "
                                        f"(this server stores: {', '.join(sorted(FORMATS))})")
    return found
