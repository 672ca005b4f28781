"""TANK bundles (reference §4, §13 "Produce path"): flags, counts, keys, timestamps, sparse
numbering, Snappy, chunks, and every bundle the produce path must refuse."""

from __future__ import annotations

import cramjam
import pytest

from rill.protocol.tank.bundles import (
    CODEC_SNAPPY,
    decode_bundle,
    decode_chunk,
    decode_header,
    encode_bundle,
    frame_bundle,
    split_chunk,
)
from rill.protocol.tank.errors import BadVarint, BundleError, LengthMismatch, Truncated
from rill.protocol.tank.primitives import U64, encode_varint

TS = 1_700_000_000_000


def message(flags: int, *, delta: bytes = b"", ts: int | None = TS, key: bytes | None = None,
            value: bytes = b"v") -> bytes:
    out = bytes([flags]) + delta
    if ts is not None:
        out += U64.pack(ts)
    if key is not None:
        out += bytes([len(key)]) + key
    return out + encode_varint(len(value)) + value


def sparse_header(count: int, first: int, last: int) -> bytes:
    head = bytes([0x40 | (count << 2)]) + U64.pack(first)
    return head + (encode_varint(last - first - 1) if count != 1 else b"")


def test_sparse_decode_with_prev_plus_one_on_a_middle_message():
    bundle = sparse_header(4, 10, 20) + message(0) + message(0x04 | 0x02, ts=None) + \
        message(0x00, delta=encode_varint(4), ts=TS + 5) + message(0x02, ts=None)
    decoded = decode_bundle(bundle)
    assert decoded.sparse and decoded.seqs == [10, 11, 16, 20]
    assert decoded.timestamps == [TS, TS, TS + 5, TS + 5]


def test_prev_plus_one_is_tested_before_the_first_and_last_rules():
    # flags 0x04 on the last message: previous + 1, which must then equal the header's last
    bundle = sparse_header(2, 10, 11) + message(0) + message(0x04)
    assert decode_bundle(bundle).seqs == [10, 11]
    wrong = sparse_header(2, 10, 12) + message(0) + message(0x04)
    with pytest.raises(BundleError, match="disagrees with the header"):
        decode_bundle(wrong)


def test_non_sparse_bundles_are_numbered_from_the_base():
    bundle = encode_bundle([b"a", b"b", b"c"], [None, b"", b"k"], [1, 1, 2])
    decoded = decode_bundle(bundle, base_seq=41)
    assert decoded.seqs == [41, 42, 43]
    assert decoded.keys == [None, b"", b"k"]  # an empty key is not an absent one
    assert decoded.timestamps == [1, 1, 2]


def test_use_last_timestamp_on_the_first_message_means_0():
    bundle = bytes([1 << 2]) + message(0x02, ts=None)
    assert decode_bundle(bundle).timestamps == [0]


def test_the_encoder_sets_use_last_ts_only_for_repeats_and_writes_the_first_always():
    bundle = encode_bundle([b"a", b"b", b"c", b"d"], None, [7, 7, 8, 7])
    flags = []
    at = 1
    for _ in range(4):
        flags.append(bundle[at])
        at += 1 + (0 if bundle[at] & 0x02 else 8) + 2
    assert flags == [0x00, 0x02, 0x00, 0x00]


def test_many_messages_put_their_count_in_a_varint():
    values = [bytes([i % 256]) * (i % 7) for i in range(1000)]
    bundle = encode_bundle(values, None, 3)
    assert bundle[0] == 0 and bundle[1:3] == encode_varint(1000)
    assert decode_bundle(bundle).values == values


def test_snappy_round_trip_is_one_raw_block():
    values = [b"payload-%05d" % i * 10 for i in range(600)]
    keys = [b"key%d" % (i % 5) for i in range(600)]
    bundle = encode_bundle(values, keys, list(range(600)), codec=CODEC_SNAPPY)
    header = decode_header(bundle)
    assert header.codec == CODEC_SNAPPY and header.count == 600
    plain = encode_bundle(values, keys, list(range(600)))
    raw_set = bytes(cramjam.snappy.decompress_raw(bytes(bundle[header.set_offset :])))
    assert raw_set == plain[header.set_offset :]  # the message set, compressed whole
    assert len(bundle) < len(plain)
    decoded = decode_bundle(bundle)
    assert decoded.values == values and decoded.keys == keys and decoded.codec == CODEC_SNAPPY
    sparse = encode_bundle(values[:3], None, 1, [5, 9, 10], codec=CODEC_SNAPPY)
    assert decode_bundle(sparse).seqs == [5, 9, 10]


# --- refused ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("bundle", "error", "text"), [
    (b"", BundleError, "empty bundle"),
    (b"\x00\x00", BundleError, "0 messages"),
    (bytes([0x80 | 4]) + message(0), BundleError, "bit 7"),
    (bytes([2 | 4]) + message(0), BundleError, "codec 2"),
    (bytes([3 | 4]) + message(0), BundleError, "codec 3"),
    (bytes([4]) + message(0x08), BundleError, "unknown flags 0x08"),
    (bytes([4]) + message(0x81), BundleError, "unknown flags 0x81"),
    (sparse_header(1, 0, 0) + message(0), BundleError, "first_seq is 0"),
    (bytes([0x44]) + b"\x01\x00", Truncated, "first_seq"),
    (sparse_header(3, 10, 12) + message(0) + message(0, delta=b"\x05") + message(0),
     BundleError, "do not increase"),
    (sparse_header(2, 0xFFFF_FFFF_FFFF_FFFE, 0xFFFF_FFFF_FFFF_FFFF) + message(0) + message(0),
     BundleError, "above 2\\^64-2"),
    (bytes([8]) + message(0), Truncated, "message 1"),
    (bytes([4]) + message(0) + b"\x00", LengthMismatch, "1 bytes left"),
    (bytes([4]) + message(0)[:-1], Truncated, "message 0"),
    (bytes([4, 0]) + b"\x00" * 8 + b"\x80\x80\x80\x80\x80\x01", BadVarint, "message 0"),
    (bytes([0]) + b"\xff\xff\xff\xff\x0f" + message(0), Truncated, "cannot fit"),
    (bytes([0]) + b"\x80\x80\x80\x80\x80\x01", BadVarint, "varint"),
    (bytes([4]) + message(0x01, key=b"abc")[:12], Truncated, "message 0"),
], ids=["empty", "zero-count", "bit7", "codec2", "codec3", "msg-flag-0x08", "msg-flag-0x81",
        "sparse-first-0", "sparse-cut", "sparse-not-increasing", "seq-overflow",
        "count-above-messages", "bytes-left-over", "content-cut", "content-len-varint",
        "lying-count", "count-varint", "key-cut"])
def test_invalid_bundles_are_refused(bundle, error, text):
    with pytest.raises(error, match=text):
        decode_bundle(bundle)


def test_a_corrupt_snappy_block_is_refused():
    good = encode_bundle([b"x" * 100] * 20, None, 1, codec=CODEC_SNAPPY)
    with pytest.raises(BundleError, match="Snappy"):
        decode_bundle(good[:2] + b"\xff" * (len(good) - 2))
    with pytest.raises(BundleError, match="Snappy"):
        decode_bundle(good[:-3])
    with pytest.raises(BundleError, match="Snappy"):
        decode_bundle(good, max_set_size=100)  # announces more than the limit


def test_encode_refuses_columns_that_cannot_be_a_bundle():
    with pytest.raises(ValueError, match="at least one"):
        encode_bundle([], None, 0)
    with pytest.raises(ValueError, match="255"):
        encode_bundle([b"v"], [b"k" * 256], 0)
    with pytest.raises(ValueError, match="increase"):
        encode_bundle([b"a", b"b"], None, 0, [5, 5])
    with pytest.raises(ValueError, match="1..2"):
        encode_bundle([b"a"], None, 0, [0])
    with pytest.raises(ValueError, match="differ in length"):
        encode_bundle([b"a", b"b"], None, [1])


# --- chunks ----------------------------------------------------------------------------------


def test_a_chunk_numbers_non_sparse_bundles_after_the_previous_one():
    chunk = (frame_bundle(encode_bundle([b"a", b"b"], None, 1))
             + frame_bundle(encode_bundle([b"c"], None, 1, [10]))
             + frame_bundle(encode_bundle([b"d", b"e"], None, 1)))
    read = decode_chunk(chunk, base_seq=5)
    assert read.seqs == [5, 6, 10, 11, 12]
    assert read.values == [b"a", b"b", b"c", b"d", b"e"]
    assert read.next_seq == 13 and read.partial_bundle_size == 0


def test_a_chunk_cut_inside_a_bundle_yields_the_whole_ones_and_the_size_needed():
    first = frame_bundle(encode_bundle([b"a"], None, 1))
    second = frame_bundle(encode_bundle([b"b" * 50], None, 1))
    bundles, partial = split_chunk(first + second[:10])
    assert [bytes(b) for b in bundles] == [first[1:]]
    assert partial == len(second)
    read = decode_chunk(first + second[:10], 1)
    assert read.values == [b"a"] and read.partial_bundle_size == len(second)
