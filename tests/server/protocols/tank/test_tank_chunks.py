"""Consume chunks built from stored RecordBatch v2 bytes (``protocols.tank.data.build_chunk``):
one bundle per stored batch, SPARSE wherever the numbering does not continue from the bundle
before it (a gap between batches, or holes inside a compacted batch), control batches skipped,
Kafka codecs inflated."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder

from rill.protocol.tank.bundles import decode_bundle, split_chunk
from rill.server.protocols.tank.data import build_chunk


def kafka_batch(base_offset: int, offsets: list[int], *, compression: int = 0,
                control: bool = False) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression,
                                        is_transactional=control, producer_id=7 if control else -1,
                                        producer_epoch=0 if control else -1,
                                        base_sequence=0 if control else -1, batch_size=1 << 20)
    for offset in offsets:
        builder.append(offset - base_offset, timestamp=1000 + offset, key=b"k%d" % offset,
                       value=b"v%d" % offset, headers=[])
    raw = bytearray(builder.build())
    raw[0:8] = base_offset.to_bytes(8, "big")
    if control:
        raw[22] |= 0x20  # attributes: control 
    return bytes(raw)


def test_bundles_are_sparse_wherever_numbering_jumps():
    stored = (kafka_batch(0, [0, 1]) + kafka_batch(2, [2, 3], compression=1)
              + kafka_batch(5, [5, 6], compression=1) + kafka_batch(10, [10, 12]))
    chunk, base = build_chunk(stored)
    assert base == 1
    bundles = [decode_bundle(raw, 0) for raw in split_chunk(b"".join(chunk))[0]]
    assert [b.sparse for b in bundles] == [False, False, True, True]
    assert [b.seqs for b in bundles[2:]] == [[6, 7], [11, 13]]
    assert [b.values for b in bundles] == [[b"v0", b"v1"], [b"v2", b"v3"], [b"v5", b"v6"],
                                           [b"v10", b"v12"]]
    assert bundles[3].keys == [b"k10", b"k12"] and bundles[3].timestamps == [1010, 1012]


def test_control_batches_are_skipped_and_a_first_sparse_bundle_gives_the_base():
    stored = kafka_batch(3, [3, 5]) + kafka_batch(6, [6], control=True) + kafka_batch(7, [7])
    chunk, base = build_chunk(stored)
    assert base == 4
    bundles = [decode_bundle(raw, 0) for raw in split_chunk(b"".join(chunk))[0]]
    assert [(b.sparse, b.seqs) for b in bundles] == [(True, [4, 6]), (True, [8])]
