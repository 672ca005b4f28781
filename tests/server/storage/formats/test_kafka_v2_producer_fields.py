"""``kafka_v2.producer_batches``: the producer fields of every whole RecordBatch v2 in a
produced ``records`` field or in stored batches (baseOffset as stored), read from the headers
only; a trailing partial batch is left out."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder

from rill.server.storage.formats.kafka_v2 import producer_batches, stamp_batches


def batch(producer_id: int, epoch: int, sequence: int, count: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=producer_id, producer_epoch=epoch,
                                        base_sequence=sequence, batch_size=1 << 20)
    for offset in range(count):
        builder.append(offset, timestamp=1_700_000_000_000, key=None, value=b"v%d" % offset,
                       headers=[])
    return bytes(builder.build())


def test_the_producer_fields_of_produced_batches():
    raw = batch(7, 3, 100, 4) + batch(-1, -1, -1, 2)
    assert producer_batches(raw) == [(0, 3, 7, 3, 100), (0, 1, -1, -1, -1)]


def test_stored_batches_carry_their_log_offsets():
    raw = batch(9, 0, 0, 3) + batch(9, 0, 3, 2)
    stamped = stamp_batches(raw, 40, 1, 0, 40)
    assert producer_batches(stamped.records) == [(40, 2, 9, 0, 0), (43, 1, 9, 0, 3)]


def test_a_partial_or_broken_batch_ends_the_walk():
    whole = batch(5, 1, 10, 2)
    assert producer_batches(whole + whole[:30]) == [(0, 1, 5, 1, 10)]
    assert producer_batches(whole + whole[:-1]) == [(0, 1, 5, 1, 10)]
    assert producer_batches(b"") == []
