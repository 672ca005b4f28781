"""Record formats: how a topic's partitions lay their records out, chosen per topic and
recorded in the metadata store (``topics.record_format``, ``LogSettings.record_format``).

Owns: ``RecordFormat`` (what a partition log asks of a format), ``FORMATS`` (the formats this
server can store, by name) and ``format_named``. One format today, ``iggy-v1``: Iggy's stored
layout (``rill.protocol.layout``), stamped from SEND regions by ``storage.records`` and its C
twin, one 16-byte index entry per record.

What the seam is for: Kafka's record batches cannot be cut at any offset and carry their own
CRC over the whole batch (../shared/spec/kafka-notes.md §3), so a ``kafka-v2`` format will store
client batches as they arrive and keep a **batch-granular** index (one entry per batch: first
offset, position, max timestamp; the last offset is where the next entry starts), with a
leader epoch per batch for replication (cluster-design.md). ``batch_index`` tells the log
which kind a format keeps. Today the write path (stamp, restamp, checks of stored records)
goes through the format; reads, recovery and index rebuilds still call the ``iggy-v1``
functions directly (``record_checks``), the next step of the seam.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Callable

from rill.errors import FeatureUnavailable
from rill.server.storage.records import RECORD_FORMAT, RECORD_GROWTH, StampedBatch, stamp_batch
from rill.server.storage.staged_records import check_stored_records, restamp_records


@dataclass(frozen=True)
class RecordFormat:
    name: str
    # one index entry per batch (True) or per record (False: any offset can start a read)
    batch_index: bool
    # bytes a record grows by when a client message is stored (a segment's room check)
    growth_per_message: int
    # a client batch (for iggy-v1 a SEND region) -> records and index entries at an offset
    stamp: Callable[[bytes | bytearray | memoryview, int, int, int, int], StampedBatch]
    # stored records whose offsets and timestamp are set at commit (staged appends)
    restamp: Callable[[bytearray, array, int, int], None]
    # checks stored records a client or a leader built; their start positions
    check_stored: Callable[[bytes, bytes | memoryview], array]


IGGY_V1 = RecordFormat(
    name=RECORD_FORMAT,
    batch_index=False,
    growth_per_message=RECORD_GROWTH,
    stamp=stamp_batch,
    restamp=restamp_records,
    check_stored=check_stored_records,
)

FORMATS: dict[str, RecordFormat] = {IGGY_V1.name: IGGY_V1}


def format_named(name: str) -> RecordFormat:
    found = FORMATS.get(name)
    if found is None:
        raise FeatureUnavailable(reason=f"record format {name!r} is not available "
                                        f"(this server stores: {', '.join(sorted(FORMATS))})")
    return found
