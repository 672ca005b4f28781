"""The C twin of the bundle loops (``_bundles.c``) against the Python reference
(``bundles.decode_set_python`` / ``encode_set_python``), on the same inputs: the same columns
and bytes for valid input, the same (kind, text) or message for every malformed one.
Inputs are random with fixed seeds, so a failure reproduces."""

from __future__ import annotations

import random

import pytest

from rill.protocol.tank import _bundles, bundles
from rill.protocol.tank.bundles import (
    MAX_SEQ,
    decode_header,
    decode_set_python,
    encode_bundle,
    encode_set_python,
)

SEEDS = range(40)


def random_columns(rng: random.Random, sparse: bool):
    count = rng.choice([1, 2, 3, 15, 16, 17, rng.randint(1, 400)])
    keyed = rng.random() < 0.6
    keys = [None if not keyed or rng.random() < 0.2 else rng.randbytes(rng.choice([0, 1, 8, 255]))
            for _ in range(count)] if rng.random() < 0.8 else None
    values = [rng.randbytes(rng.choice([0, 1, 100, 127, 128, rng.randint(0, 20_000)]))
              for _ in range(count)]
    timestamps = []
    ts = rng.randint(0, (1 << 64) - 1) if rng.random() < 0.1 else 1_700_000_000_000
    for _ in range(count):
        if rng.random() < 0.3:
            ts = rng.choice([min(ts + 1, (1 << 64) - 1), 0, (1 << 64) - 1,
                             rng.randint(0, 1 << 50)])
        timestamps.append(ts)
    seqs = None
    if sparse:
        steps = [rng.choice([1, 1, 2, 128, rng.randint(1, 1 << 32)]) for _ in range(count - 1)]
        span = sum(steps)
        seq = rng.choice([1, rng.randint(1, 1 << 40), MAX_SEQ - span])
        seqs = [seq]
        for step in steps:
            seq += step
            seqs.append(seq)
    return keys, values, timestamps, seqs


def both_decode(message_set, count, sparse, first, last):
    c = _bundles.decode_set(message_set, count, sparse, first, last)
    python = decode_set_python(message_set, count, sparse, first, last)
    assert c == python
    return c


@pytest.mark.parametrize("seed", SEEDS)
def test_valid_columns_encode_and_decode_the_same(seed):
    rng = random.Random(seed)
    sparse = seed % 2 == 1
    keys, values, timestamps, seqs = random_columns(rng, sparse)
    c_bytes = _bundles.encode_set(keys, values, timestamps, seqs)
    assert type(c_bytes) is bytes
    assert c_bytes == encode_set_python(keys, values, timestamps, seqs)
    first = seqs[0] if sparse else 7
    last = seqs[-1] if sparse else 0
    decoded = both_decode(c_bytes, len(values), sparse, first, last)
    assert len(decoded) == 4
    got_keys, got_values, got_timestamps, got_seqs = decoded
    assert got_values == values
    assert got_keys == (keys if keys is not None else [None] * len(values))
    assert got_timestamps == timestamps
    assert got_seqs == (seqs if sparse else list(range(7, 7 + len(values))))


@pytest.mark.parametrize("seed", SEEDS)
def test_malformed_message_sets_get_the_same_answer(seed):
    rng = random.Random(1000 + seed)
    sparse = seed % 2 == 0
    keys, values, timestamps, seqs = random_columns(rng, sparse)
    good = encode_set_python(keys, values, timestamps, seqs)
    count = len(values)
    first = seqs[0] if sparse else 1
    last = seqs[-1] if sparse else 0
    faults = 0
    for _ in range(60):
        data = bytearray(good)
        mutation = rng.randrange(6)
        if mutation == 0 and data:
            del data[rng.randrange(len(data)) :]  # truncate
        elif mutation == 1:
            data += rng.randbytes(rng.randint(1, 9))  # bytes left over
        elif mutation == 2 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)  # one byte changed
        elif mutation == 3 and data:
            for _ in range(rng.randint(2, 10)):
                data[rng.randrange(len(data))] = rng.choice([0x80, 0xFF, 0x07, 0x04, 0x02])
        elif mutation == 4:
            count_used = rng.choice([0, count + 1, max(1, count - 1), 1 << 31])
            result = both_decode(bytes(data), count_used, sparse, first, last)
            faults += len(result) == 2
            continue
        else:
            bad_last = last + rng.choice([-1, 1, 5]) if sparse else last
            bad_last = min(max(bad_last, 0), 2**64 - 1)
            result = both_decode(bytes(data), count, sparse, first, bad_last)
            faults += len(result) == 2
            continue
        result = both_decode(bytes(data), count, sparse, first, last)
        faults += len(result) == 2
    assert faults  # the mutations do reach the error paths


ERROR_INPUTS = [
    (b"", 1, False, 1, 0),
    (b"\x00", 1, False, 1, 0),
    (b"\x08\x00", 1, False, 1, 0),
    (b"\x02\x80\x80\x80\x80\x80\x01", 1, False, 1, 0),
    (b"\x02\x00\x02\x00", 2, True, 5, 4),
    (b"\x02\x00\x02\x01\x00", 3, True, 5, 10),
    (b"\x02\x00\x02\x00", 2, True, MAX_SEQ, MAX_SEQ + 1),
    (b"\x02\x00\x00\x80\x80\x80\x80\x10\x02\x00", 3, True, 5, 10),
    (b"\x03\x05ab\x00", 1, False, 1, 0),
    (b"\x02\x05ab", 1, False, 1, 0),
]


@pytest.mark.parametrize("case", ERROR_INPUTS)
def test_hand_made_faults_get_the_same_kind_and_text(case):
    result = both_decode(*case)
    assert len(result) == 2 and isinstance(result[1], str)


@pytest.mark.parametrize(("keys", "values", "timestamps", "seqs"), [
    (None, [], [], None),
    (None, [b"a"], [1, 2], None),
    ([b"k"], [b"a", b"b"], [1, 2], None),
    (None, [b"a"], [-1], None),
    (None, [b"a"], [1 << 64], None),
    ([b"x" * 256], [b"a"], [1], None),
    (None, [b"a", b"b"], [1, 1], [0, 1]),
    (None, [b"a", b"b"], [1, 1], [3, 3]),
    (None, [b"a", b"b"], [1, 1], [3, MAX_SEQ + 1]),
    (None, [b"a", b"b", b"c"], [1, 1, 1], [3, 3 + (1 << 32) + 1, 1 << 40]),
    (None, [b"a", b"b"], [1, 1], [3]),
])
def test_invalid_columns_are_refused_with_the_same_text(keys, values, timestamps, seqs):
    c = _bundles.encode_set(keys, values, timestamps, seqs)
    python = encode_set_python(keys, values, timestamps, seqs)
    assert type(c) is str and c == python


def test_the_c_twin_is_the_one_that_runs_and_its_bundles_match():
    assert bundles.ACCELERATED and bundles.decode_set is _bundles.decode_set
    values = [b"v%d" % i for i in range(50)]
    bundle = encode_bundle(values, [b"k"] * 50, 1, list(range(3, 103, 2)))
    header = decode_header(bundle)
    view = memoryview(bundle)[header.set_offset :]
    assert _bundles.decode_set(view, 50, True, 3, 101) == decode_set_python(view, 50, True, 3, 101)


def test_numbers_outside_u64_are_refused_not_wrapped():
    with pytest.raises(OverflowError):
        _bundles.decode_set(b"\x00", 1, True, 1 << 64, 1)
    with pytest.raises(OverflowError):
        _bundles.decode_set(b"\x00", -1, False, 1, 0)


def test_encode_takes_any_bytes_like_values():
    values = [b"a", bytearray(b"bc"), memoryview(b"def")]
    keys = [bytearray(b"k"), None, memoryview(b"kk")]
    assert _bundles.encode_set(keys, values, [1, 2, 2], None) == encode_set_python(
        keys, values, [1, 2, 2], None)
