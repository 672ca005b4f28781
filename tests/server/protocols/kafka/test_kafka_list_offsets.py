"""ListOffsets by timestamp exact to the record for every codec (issue 13 item 6), on a real
server's Kafka listener: batches built with kafka-python's ``DefaultRecordBatchBuilder`` and
compressed with cramjam (none, gzip, snappy, lz4, zstd), records out of time order inside a
batch, so that only an answer that opens the batch (``broker.record_at_or_after``, storage's
every-codec lookup) finds the right record; the same after the topic's records before it
are gone (retention, at the storage level: tests/server/storage/formats/test_conversion.py)."""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

from test_kafka_data import list_offset, new_topic, produce
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def compressed_batch(timestamps: list[int], codec: int) -> bytes:
    """A RecordBatch v2 of one record per timestamp (ms), its records block compressed with
    ``codec`` as a client would (the CRC-32C over the compressed bytes)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for offset, timestamp in enumerate(timestamps):
        builder.append(offset, timestamp=timestamp, key=None, value=b"v%d" % offset, headers=[])
    raw = bytes(builder.build())
    block = raw[61:]
    block = {0: lambda b: b, 1: gzip.compress,
             2: lambda b: bytes(cramjam.snappy.compress_raw(b)),
             3: lambda b: bytes(cramjam.lz4.compress(b)),
             4: lambda b: bytes(cramjam.zstd.compress(b))}[codec](block)
    out = bytearray(raw[:61]) + block
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, codec)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


@pytest.mark.parametrize("codec", list(CODECS))
def test_list_offsets_by_time_is_exact_inside_a_batch_of_every_codec(raw, codec):
    topic = new_topic(raw)
    for timestamps in ([1000, 2000, 3000], [4000, 6000, 5000, 8000]):  # offsets 0-2, 3-6
        assert produce(raw, topic, compressed_batch(timestamps, CODECS[codec])).error_code == 0
    answers = {t: (p.offset, p.timestamp) for t in (0, 2500, 4001, 5500, 6001, 8000, 8001)
               for p in [list_offset(raw, topic, t)]}
    # a batch-granular answer would give (3, 8000) for every time inside the second batch
    assert answers == {0: (0, 1000), 2500: (2, 3000), 4001: (4, 6000), 5500: (4, 6000),
                       6001: (6, 8000), 8000: (6, 8000), 8001: (-1, -1)}
    maximum = list_offset(raw, topic, -3)
    assert (maximum.offset, maximum.timestamp) == (6, 8000)
    oldest = list_offset(raw, topic, 4500, version=0)  # the seed's Offsets API, exact too
    assert oldest.old_style_offsets[0] == 4
