"""TANK bundles <-> RecordBatch v2 (``record_batches``): the C twins of the per-record loops
(``_bundles.encode_records`` / ``decode_records``) against the Python reference, on the same
random inputs (fixed seeds), valid and malformed; and the batches they make read back by an
independent Kafka decoder (kafka-python's ``DefaultRecordBatch``) with keys, values and
timestamps, the CRC-32C checked."""

from __future__ import annotations

import random

import pytest
from kafka.record.default_records import DefaultRecordBatch

from rill.protocol.tank import _bundles, record_batches
from rill.protocol.tank.record_batches import (
    HEADER_SIZE,
    InvalidColumns,
    batch_columns,
    batch_from_bundle,
    batch_from_set,
    batch_head,
    contiguous_bundle,
    decode_records_python,
    encode_records_python,
    records_to_set_python,
    set_to_records_python,
    stored_chunk_python,
)
from rill.protocol.tank.bundles import decode_bundle, encode_set, frame_bundle, split_chunk
from rill.protocol.tank.primitives import encode_varint

SEEDS = range(40)


def random_columns(rng: random.Random):
    count = rng.choice([1, 2, 15, 16, rng.randint(1, 300)])
    keys = [None if rng.random() < 0.3 else rng.randbytes(rng.choice([0, 1, 8, 255]))
            for _ in range(count)] if rng.random() < 0.8 else None
    values = [rng.randbytes(rng.choice([0, 1, 63, 64, 127, 128, rng.randint(0, 20_000)]))
              for _ in range(count)]
    base = rng.choice([0, 1_700_000_000_000, rng.randint(0, (1 << 63) - 1)])
    timestamps = [max(0, min((1 << 63) - 1, base + rng.randint(-10_000, 10_000)))
                  for _ in range(count)]
    return keys, values, timestamps


def test_the_accelerator_is_built_and_used():
    # the server's hot paths must run the C loops (built in place by setup.py)
    assert record_batches.encode_records is _bundles.encode_records
    assert record_batches.decode_records is _bundles.decode_records
    assert record_batches.records_to_set is _bundles.records_to_set
    assert record_batches.set_to_records is _bundles.set_to_records
    assert record_batches.stored_chunk is _bundles.stored_chunk


@pytest.mark.parametrize("seed", SEEDS)
def test_twins_agree_on_valid_columns(seed):
    rng = random.Random(seed)
    keys, values, timestamps = random_columns(rng)
    base = timestamps[0]
    records = _bundles.encode_records(keys, values, timestamps, base)
    assert records == encode_records_python(keys, values, timestamps, base)
    for append_time in (-1, 1_800_000_000_000):
        found = _bundles.decode_records(records, len(values), base, append_time)
        assert found == decode_records_python(records, len(values), base, append_time)
        got_keys, got_values, got_timestamps, deltas = found
        assert got_keys == (keys if keys is not None else [None] * len(values))
        assert got_values == values
        assert got_timestamps == (timestamps if append_time < 0 else [append_time] * len(values))
        assert deltas == list(range(len(values)))


@pytest.mark.parametrize("seed", SEEDS)
def test_twins_agree_on_malformed_records(seed):
    rng = random.Random(1000 + seed)
    keys, values, timestamps = random_columns(rng)
    records = _bundles.encode_records(keys, values, timestamps, timestamps[0])
    for broken, count in mutations(rng, records, len(values)):
        c = _bundles.decode_records(broken, count, 5, -1)
        python = decode_records_python(broken, count, 5, -1)
        assert c == python


def mutations(rng: random.Random, data: bytes, count: int, rounds: int = 20):
    """``rounds`` (bytes, count) pairs: ``data`` cut short, a byte changed or bytes added, and
    the count of its items sometimes wrong."""
    for _ in range(rounds):
        broken = bytearray(data)
        choice = rng.random()
        if choice < 0.4:
            broken = broken[: rng.randrange(len(broken))]
        elif choice < 0.7:
            broken[rng.randrange(len(broken))] = rng.randrange(256)
        else:
            broken += rng.randbytes(rng.randint(1, 12))
        yield bytes(broken), count + rng.choice([0, 0, 1, -1, 1 << 20])


def test_twins_agree_on_invalid_columns():
    for keys, values, timestamps in [
        (None, [], []),
        (None, [b"a"], [1, 2]),
        ([b"k"], [b"a", b"b"], [1, 2]),
        (None, [b"a"], [1 << 63]),
        (None, [b"a"], [-1]),
    ]:
        c = _bundles.encode_records(keys, values, timestamps, 0)
        assert type(c) is str
        assert c == encode_records_python(keys, values, timestamps, 0)


def test_long_keys_null_values_and_headers_as_tank_reads_them():
    # a Kafka record with a 300-byte key (TANK keys are str8: dropped), a null value (empty),
    # a header (skipped) and a negative timestamp delta, built by kafka-python
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=1000, key=b"k" * 300, value=None, headers=[])
    builder.append(1, timestamp=900, key=b"ok", value=b"v", headers=[("h", b"x")])
    raw = bytes(builder.build())
    head = batch_head(raw)
    for decode in (_bundles.decode_records, decode_records_python):
        found = decode(raw[HEADER_SIZE:], head.count, head.base_timestamp, head.append_time)
        assert found == ([None, b"ok"], [b"", b"v"], [1000, 900], [0, 1])
    assert batch_columns(head, raw[HEADER_SIZE:])[1] == [b"", b"v"]


@pytest.mark.parametrize("seed", range(10))
def test_batches_read_back_by_kafka_python(seed):
    rng = random.Random(2000 + seed)
    keys, values, timestamps = random_columns(rng)
    raw = batch_from_bundle(keys, values, timestamps)
    batch = DefaultRecordBatch(raw)
    assert batch.validate_crc()
    assert batch.magic == 2 and batch.compression_type == 0
    records = list(batch)
    assert [r.value for r in records] == values
    assert [r.key for r in records] == (keys if keys is not None else [None] * len(values))
    assert [r.timestamp for r in records] == timestamps
    assert [r.offset for r in records] == list(range(len(values)))
    head = batch_head(raw)
    assert (head.length, head.count, head.max_timestamp) == (len(raw), len(values),
                                                             max(timestamps))


def test_a_timestamp_kafka_cannot_hold_is_refused():
    with pytest.raises(InvalidColumns, match="timestamp"):
        batch_from_bundle(None, [b"a"], [1 << 63])


@pytest.mark.parametrize("seed", SEEDS)
def test_records_to_set_twins_agree_and_make_the_bundle_of_the_columns(seed):
    rng = random.Random(3000 + seed)
    keys, values, timestamps = random_columns(rng)
    raw = batch_from_bundle(keys, values, timestamps)
    head = batch_head(raw)
    records = raw[HEADER_SIZE:]
    for append_time in (-1, 1_800_000_000_000):
        c = _bundles.records_to_set(records, head.count, head.base_timestamp, append_time)
        assert c == records_to_set_python(records, head.count, head.base_timestamp, append_time)
        assert c[1:] == (0, len(values) - 1)
        # framed: the whole uncompressed bundle in its chunk frame, from both twins
        framed = _bundles.records_to_set(records, head.count, head.base_timestamp,
                                         append_time, True)
        assert framed == records_to_set_python(records, head.count, head.base_timestamp,
                                               append_time, True)
        assert framed[0] == frame_bundle(bytes((len(values) << 2,)) + c[0] if len(values) < 16
                                         else b"\x00" + encode_varint(len(values)) + c[0])
    framed, first, last = contiguous_bundle(head, records)
    (bundle,), partial = split_chunk(framed)
    assert not partial
    decoded = decode_bundle(bundle, 1)
    assert not decoded.sparse and decoded.values == values
    assert decoded.keys == (keys if keys is not None else [None] * len(values))
    assert decoded.timestamps == timestamps and decoded.seqs == list(range(1, len(values) + 1))
    # malformed: the same kind and text from both
    for _ in range(10):
        broken = bytearray(records)
        broken[rng.randrange(len(broken))] = rng.randrange(256)
        cut = bytes(broken[: rng.randrange(1, len(broken) + 1)])
        count = head.count + rng.choice([0, 0, 1, -1])
        for framed in (False, True):
            assert (_bundles.records_to_set(cut, count, 0, -1, framed)
                    == records_to_set_python(cut, count, 0, -1, framed))


@pytest.mark.parametrize("count", [4095, 4096, 4097, 9000])
def test_records_to_set_twins_agree_past_the_records_the_c_twin_recalls(count):
    """The C twin's second pass reads the first 4,096 records from what its first pass kept
    and parses the rest again: the same set either side of that line, and the same fault
    for a record broken before it or after it."""
    rng = random.Random(count)
    keys = [None if index % 3 == 0 else b"k%d" % index for index in range(count)]
    values = [rng.randbytes(rng.choice([0, 1, 20, 130])) for _ in range(count)]
    timestamps = [1_700_000_000_000 + index // 5 for index in range(count)]
    raw = batch_from_bundle(keys, values, timestamps)
    head = batch_head(raw)
    records = raw[HEADER_SIZE:]
    for framed in (False, True):
        c = _bundles.records_to_set(records, count, head.base_timestamp, -1, framed)
        assert c == records_to_set_python(records, count, head.base_timestamp, -1, framed)
    assert decode_bundle(split_chunk(c[0])[0][0], 1).values == values
    for at in (len(records) // 3, len(records) - 5, len(records) - 1):  # before and after
        broken = bytearray(records)
        broken[at] ^= 0xFF
        for framed in (False, True):
            c = _bundles.records_to_set(bytes(broken), count, 0, -1, framed)
            assert c == records_to_set_python(bytes(broken), count, 0, -1, framed)


@pytest.mark.parametrize("seed", SEEDS)
def test_set_to_records_twins_agree_and_make_the_batch_of_the_columns(seed):
    """The Produce hot path (a bundle's message set straight into a batch) stores exactly the
    batch the columns path makes, from both twins; TANK's "same timestamp as the last" flag
    included (encode_set writes it for runs of equal times)."""
    rng = random.Random(4000 + seed)
    keys, values, timestamps = random_columns(rng)
    if rng.random() < 0.5:  # runs of equal timestamps, as TANK's client sends them
        timestamps = [timestamps[index // 7 * 7] for index in range(len(timestamps))]
    message_set = encode_set(keys, values, timestamps, None)
    c = _bundles.set_to_records(message_set, len(values))
    assert c == set_to_records_python(message_set, len(values))
    assert c[1:] == (timestamps[0], max(timestamps))
    # with room for the batch header before the records: the same section after zeros
    roomy = _bundles.set_to_records(message_set, len(values), 61)
    assert roomy == set_to_records_python(message_set, len(values), 61)
    assert type(roomy[0]) is bytearray and roomy[0] == bytes(61) + c[0] and roomy[1:] == c[1:]
    for compress in (False, True):
        assert (batch_from_set(message_set, len(values), compress=compress)
                == batch_from_bundle(keys, values, timestamps, compress=compress))


@pytest.mark.parametrize("seed", SEEDS)
def test_set_to_records_twins_agree_on_malformed_sets(seed):
    rng = random.Random(5000 + seed)
    keys, values, timestamps = random_columns(rng)
    message_set = encode_set(keys, values, timestamps, None)
    for broken, count in mutations(rng, message_set, len(values)):
        found = _bundles.set_to_records(broken, count)
        assert found == set_to_records_python(broken, count)
        assert (_bundles.set_to_records(broken, count, 61)
                == set_to_records_python(broken, count, 61))
        if len(found) == 3:  # still a valid set: the columns path agrees
            assert found[0] == encode_records_python(
                *decode_bundle_columns(broken, count), found[1])


def decode_bundle_columns(message_set: bytes, count: int):
    from rill.protocol.tank.bundles import decode_set_python

    keys, values, timestamps, _seqs = decode_set_python(message_set, count, False, 1, 0)
    return keys, values, timestamps


def test_set_to_records_twins_agree_on_sets_no_batch_can_hold():
    for keys, values, timestamps in [
        (None, [b"a"], [1 << 63]),  # above Kafka's signed 64-bit time
        (None, [b"a", b"b"], [5, (1 << 64) - 1]),
    ]:
        message_set = encode_set(keys, values, timestamps, None)
        c = _bundles.set_to_records(message_set, len(values))
        assert type(c) is str and c.startswith("timestamp ")
        assert c == set_to_records_python(message_set, len(values))
        with pytest.raises(InvalidColumns, match="above 2"):
            batch_from_set(message_set, len(values))
    assert (_bundles.set_to_records(b"", 0) == set_to_records_python(b"", 0)
            == "a batch needs at least one record")


def test_set_to_records_twins_refuse_a_head_room_out_of_range():
    message_set = encode_set(None, [b"a"], [5], None)
    for twin in (_bundles.set_to_records, set_to_records_python):
        for head_room in (-1, 4097):
            with pytest.raises(ValueError):
                twin(message_set, 1, head_room)


def stored_batches(rng: random.Random, first_offset: int = 0) -> tuple[bytes, list[list[bytes]]]:
    """Batches as a log stores them, back to back from ``first_offset`` (base offsets
    stamped), uncompressed, each with its values; sometimes a control batch first (one
    between two would be a jump in the numbers)."""
    out = bytearray()
    offset = first_offset
    values_of = []
    for number in range(rng.randint(1, 5)):
        keys, values, timestamps = random_columns(rng)
        values = [value[:300] for value in values]
        raw = bytearray(batch_from_bundle(keys, values, timestamps))
        raw[0:8] = offset.to_bytes(8, "big")
        if number == 0 and rng.random() < 0.3:  # a control batch (a transaction marker)
            raw[22] |= 0x20
        else:
            values_of.append(values)
        out += raw
        offset += len(values)
    return bytes(out), values_of


@pytest.mark.parametrize("seed", SEEDS)
def test_stored_chunk_twins_agree_and_make_one_bundle_per_batch(seed):
    rng = random.Random(5000 + seed)
    first_offset = rng.choice([0, 1, 41, 1 << 40])
    data, values_of = stored_batches(rng, first_offset)
    found = _bundles.stored_chunk(data)
    assert found == stored_chunk_python(data)
    chunk, base = found
    bundles, partial = split_chunk(chunk)
    assert not partial and len(bundles) == len(values_of)
    seq = base
    for bundle, values in zip(bundles, values_of):
        decoded = decode_bundle(bundle, seq)
        assert not decoded.sparse and decoded.values == values
        seq += len(values)
    if values_of:
        assert base == first_offset + 1 + (0 if data[22] & 0x20 == 0 else
                                           batch_head(data).count)
    # a partial batch at the end is left out, as a read cut by its budget gives it
    assert _bundles.stored_chunk(data + data[: batch_head(data).length - 1]) == found


@pytest.mark.parametrize("seed", SEEDS)
def test_stored_chunk_twins_agree_on_what_they_leave_to_the_caller(seed):
    """Compressed batches, holes, a jump between batches and malformed bytes: None from both
    (TANK's ``build_chunk`` takes them its own way); any mutation: the same answer."""
    rng = random.Random(6000 + seed)
    data, _values = stored_batches(rng)
    compressed = batch_from_bundle(None, [b"x" * 200] * 3, [1, 2, 3], compress=True)
    holes = batch_from_bundle(None, [b"a", b"b"], [1, 2], [0, 5])
    jump = bytearray(batch_from_bundle(None, [b"j"], [1]))
    jump[0:8] = (1 << 30).to_bytes(8, "big")
    for odd in (compressed, holes, bytes(jump)):
        mixed = data + odd
        assert _bundles.stored_chunk(mixed) is None
        assert stored_chunk_python(mixed) is None
    for broken, _count in mutations(rng, data, 0, rounds=40):
        assert _bundles.stored_chunk(broken) == stored_chunk_python(broken)
    assert _bundles.stored_chunk(b"") == stored_chunk_python(b"") == (b"", 0)
