"""TANK bundles (tank-wire-reference §4): columns of messages <-> bundle bytes, sans-I/O.

Owns: the bundle header (codec bits, message count, SPARSE first/last sequence numbers), the
message set (per-message flags HaveKey 0x01, UseLastSpecifiedTS 0x02, SeqNumPrevPlusOne 0x04,
sequence deltas, timestamps in ms, str8 keys, varint-length contents), Snappy (codec 1: the
whole message set as one raw Snappy block, via ``cramjam``), the validation of §13's produce
path, and reading a Consume chunk (``varint(bundle_len) ++ bundle`` pairs) with its numbering
(§4.3: a non-sparse bundle continues where the previous one ended).

Columns: ``Bundle(keys, values, timestamps, seqs, sparse, codec)``: ``keys[i]`` is None for a
message without key; ``seqs`` are the explicit numbers of a sparse bundle, otherwise
``base_seq + i``.

The per-message loops are ``_bundles.c`` (``decode_set`` / ``encode_set``), with the pure-Python
twins ``decode_set_python`` / ``encode_set_python`` here as the reference, used when the C module
is not built or ``RILL_PURE_PYTHON=1`` (``ACCELERATED`` tells which runs). Both give the same
columns and bytes, and reject the same inputs with the same exception type and text
(``tests/protocol/tank/test_bundle_twins.py``). The header is parsed here, in Python, once per
bundle.

Validation on decode (each failure a ``TankDecodeError``): a non-empty bundle; codec 0 or 1;
flag bit 7 clear (the "rich producer info" TANK never implemented); at least one message;
message flags within 0x07; every length inside the message set and no byte left over; a sparse
``first_seq`` >= 1, numbers strictly increasing, the last one equal to the header's, none above
2^64-2; a Snappy block that decompresses (to no more than ``max_set_size`` bytes).
"""

from __future__ import annotations

import os
from typing import NamedTuple, Sequence

import cramjam

from rill.protocol.tank.errors import BadVarint, BundleError, LengthMismatch, Truncated
from rill.protocol.tank.primitives import MAX_U32, U64, decode_varint, encode_varint

CODEC_NONE = 0
CODEC_SNAPPY = 1
FLAG_SPARSE = 0x40
FLAG_RICH = 0x80  # "extra flags" of tank_encoding.md: unimplemented anywhere, refused
MSG_HAVE_KEY = 0x01
MSG_USE_LAST_TS = 0x02
MSG_PREV_PLUS_ONE = 0x04
MSG_KNOWN_FLAGS = 0x07
MAX_SEQ = 0xFFFF_FFFF_FFFF_FFFE  # 0 and 2^64-1 are never message numbers
MAX_U64 = 0xFFFF_FFFF_FFFF_FFFF
MAX_KEY = 255
DEFAULT_MAX_SET_SIZE = 256 * 1024 * 1024  # a Snappy block may not announce more than this

# error kinds shared with the C twin (it returns (kind, text) where the reference raises)
ERR_TRUNCATED, ERR_VARINT, ERR_BUNDLE, ERR_LENGTH = 1, 2, 3, 4
ERROR_TYPES = {ERR_TRUNCATED: Truncated, ERR_VARINT: BadVarint, ERR_BUNDLE: BundleError,
               ERR_LENGTH: LengthMismatch}


class Bundle(NamedTuple):
    keys: list
    values: list
    timestamps: list
    seqs: list
    sparse: bool = False
    codec: int = CODEC_NONE


class _Fault(Exception):
    def __init__(self, kind: int, text: str) -> None:
        super().__init__(kind, text)
        self.kind, self.text = kind, text


# --- the per-message loops: the Python reference ---------------------------------------------


def decode_set_python(data, count: int, sparse: bool, first_seq: int, last_seq: int):
    """The message set ``data`` of ``count`` messages -> (keys, values, timestamps, seqs), or
    ``(kind, text)`` when it is malformed (the C twin's convention)."""
    try:
        return _decode_set(memoryview(data).cast("B"), count, sparse, first_seq, last_seq)
    except _Fault as fault:
        return fault.kind, fault.text


def _varint(data, offset: int, end: int, index: int) -> tuple[int, int]:
    try:
        return decode_varint(data, offset, end)
    except BadVarint:
        raise _Fault(ERR_VARINT, f"message {index}: varint longer than 32 bits") from None
    except Truncated:
        raise _Fault(ERR_TRUNCATED, f"message {index}: the message set ends inside it") from None


def _decode_set(data, count, sparse, first_seq, last_seq):
    end = len(data)
    if count > end // 2:
        raise _Fault(ERR_TRUNCATED, f"{count} messages cannot fit in {end} bytes")
    keys, values, timestamps, seqs = [], [], [], []
    offset = 0
    timestamp = 0
    previous = first_seq - 1 if sparse else 0
    last_index = count - 1
    for index in range(count):
        if offset >= end:
            raise _Fault(ERR_TRUNCATED, f"message {index}: the message set ends inside it")
        flags = data[offset]
        offset += 1
        if flags & ~MSG_KNOWN_FLAGS:
            raise _Fault(ERR_BUNDLE, f"message {index}: unknown flags 0x{flags:02x}")
        if sparse:
            if flags & MSG_PREV_PLUS_ONE:
                seq = previous + 1
            elif index == 0:
                seq = first_seq
            elif index == last_index:
                seq = last_seq
            else:
                delta, offset = _varint(data, offset, end, index)
                seq = previous + delta + 1
            if index and seq <= previous:
                raise _Fault(ERR_BUNDLE, f"message {index}: sequence numbers do not increase")
            if seq > MAX_SEQ:
                raise _Fault(ERR_BUNDLE, f"message {index}: sequence number above 2^64-2")
            previous = seq
        else:
            seq = first_seq + index
        if not flags & MSG_USE_LAST_TS:
            if offset + 8 > end:
                raise _Fault(ERR_TRUNCATED, f"message {index}: the message set ends inside it")
            timestamp = U64.unpack_from(data, offset)[0]
            offset += 8
        key = None
        if flags & MSG_HAVE_KEY:
            if offset >= end:
                raise _Fault(ERR_TRUNCATED, f"message {index}: the message set ends inside it")
            size = data[offset]
            offset += 1
            if offset + size > end:
                raise _Fault(ERR_TRUNCATED, f"message {index}: the message set ends inside it")
            key = bytes(data[offset : offset + size])
            offset += size
        size, offset = _varint(data, offset, end, index)
        if size > end - offset:
            raise _Fault(ERR_TRUNCATED, f"message {index}: the message set ends inside it")
        values.append(bytes(data[offset : offset + size]))
        offset += size
        keys.append(key)
        timestamps.append(timestamp)
        seqs.append(seq)
    if sparse and count and seqs[-1] != last_seq:
        raise _Fault(ERR_BUNDLE, "the last sequence number disagrees with the header")
    if offset != end:
        raise _Fault(ERR_LENGTH, f"{end - offset} bytes left after the last message")
    return keys, values, timestamps, seqs


def encode_set_python(keys, values, timestamps, seqs):
    """(keys or None, values, timestamps, seqs or None) -> the message set, or a ``str`` naming
    what is wrong with the columns (the C twin's convention)."""
    count = len(values)
    if not count:
        return "a bundle needs at least one message"
    if len(timestamps) != count or (keys is not None and len(keys) != count) or (
            seqs is not None and len(seqs) != count):
        return "the columns differ in length"
    out = bytearray()
    last_timestamp = None
    previous = 0
    last_index = count - 1
    for index in range(count):
        key = None if keys is None else keys[index]
        timestamp = timestamps[index]
        if not 0 <= timestamp <= MAX_U64:
            return f"message {index}: timestamp outside 0..2^64-1"
        flags = 0
        if key is not None:
            flags |= MSG_HAVE_KEY
            if len(key) > MAX_KEY:
                return f"message {index}: key longer than 255 bytes"
        if index and timestamp == last_timestamp:
            flags |= MSG_USE_LAST_TS
        delta = None
        if seqs is not None:
            seq = seqs[index]
            if index == 0:
                if not 1 <= seq <= MAX_SEQ:
                    return f"message {index}: sequence number outside 1..2^64-2"
            else:
                if not previous < seq <= MAX_SEQ:
                    return f"message {index}: sequence numbers do not increase"
                if index != last_index:
                    if seq == previous + 1:
                        flags |= MSG_PREV_PLUS_ONE
                    elif seq - previous - 1 > MAX_U32:
                        return f"message {index}: sequence gap wider than 2^32-1"
                    else:
                        delta = seq - previous - 1
            previous = seq
        value = values[index]
        if len(value) > MAX_U32:
            return f"message {index}: content longer than 2^32-1 bytes"
        out.append(flags)
        if delta is not None:
            out += encode_varint(delta)
        if not flags & MSG_USE_LAST_TS:
            out += U64.pack(timestamp)
            last_timestamp = timestamp
        if key is not None:
            out.append(len(key))
            out += key
        out += encode_varint(len(value))
        out += value
    return bytes(out)


def _load_accelerator():  # type: ignore[no-untyped-def]
    """The C twin, or None when it is not built or disabled."""
    if os.environ.get("RILL_PURE_PYTHON") == "1":
        return None
    try:
        from rill.protocol.tank import _bundles
    except ImportError:
        return None
    if (_bundles.ERR_TRUNCATED, _bundles.ERR_VARINT, _bundles.ERR_BUNDLE,
            _bundles.ERR_LENGTH) != (ERR_TRUNCATED, ERR_VARINT, ERR_BUNDLE, ERR_LENGTH):
        return None  # built from another source: never run a twin that disagrees
    return _bundles


ACCELERATOR = _load_accelerator()
ACCELERATED = ACCELERATOR is not None
decode_set = ACCELERATOR.decode_set if ACCELERATED else decode_set_python
encode_set = ACCELERATOR.encode_set if ACCELERATED else encode_set_python


# --- bundles ---------------------------------------------------------------------------------


class BundleHeader(NamedTuple):
    codec: int
    count: int
    sparse: bool
    first_seq: int  # sparse only (else 0)
    last_seq: int  # sparse only (else 0)
    set_offset: int  # where the message set starts


def decode_header(bundle) -> BundleHeader:
    """The header of ``bundle`` (§4.1), validated."""
    end = len(bundle)
    if not end:
        raise BundleError("an empty bundle")
    flags = bundle[0]
    if flags & FLAG_RICH:
        raise BundleError("bundle flag bit 7 (unimplemented extra flags) is set")
    codec = flags & 3
    if codec > CODEC_SNAPPY:
        raise BundleError(f"unknown compression codec {codec}")
    count = (flags >> 2) & 0x0F
    offset = 1
    if not count:
        count, offset = decode_varint(bundle, offset, end)
        if not count:
            raise BundleError("a bundle of 0 messages")
    sparse = bool(flags & FLAG_SPARSE)
    first = last = 0
    if sparse:
        if offset + 8 > end:
            raise Truncated("the bundle ends inside first_seq")
        first = U64.unpack_from(bundle, offset)[0]
        offset += 8
        if not first:
            raise BundleError("a sparse bundle's first_seq is 0")
        last = first
        if count != 1:
            span, offset = decode_varint(bundle, offset, end)
            last = first + span + 1
        if last > MAX_SEQ:
            raise BundleError("a sparse bundle's last_seq is above 2^64-2")
    return BundleHeader(codec, count, sparse, first, last, offset)


def message_set(bundle, header: BundleHeader,
                max_set_size: int = DEFAULT_MAX_SET_SIZE) -> memoryview:
    """The (decompressed) message set of ``bundle``."""
    raw = memoryview(bundle)[header.set_offset :]
    if header.codec == CODEC_NONE:
        return raw
    try:
        announced, _ = decode_varint(raw)
    except (Truncated, BadVarint):
        raise BundleError("corrupt Snappy block (bad length preamble)") from None
    if announced > max_set_size:
        raise BundleError(f"Snappy block announces {announced} bytes (limit {max_set_size})")
    try:
        return memoryview(cramjam.snappy.decompress_raw(raw))  # no copy either way
    except Exception as error:  # cramjam raises its own DecompressionError
        raise BundleError(f"corrupt Snappy block: {error}") from None


def decode_bundle(bundle: bytes | bytearray | memoryview, base_seq: int = 1, *,
                  max_set_size: int = DEFAULT_MAX_SET_SIZE) -> Bundle:
    """``bundle`` as columns; a non-sparse bundle's messages are numbered from ``base_seq``."""
    header = decode_header(bundle)
    found = decode_set(message_set(bundle, header, max_set_size), header.count, header.sparse,
                       header.first_seq if header.sparse else base_seq, header.last_seq)
    if len(found) == 2:
        kind, text = found
        raise ERROR_TYPES[kind](text)
    return Bundle(*found, header.sparse, header.codec)


def flags_and_count(flags: int, count: int) -> bytes:
    """A bundle header's first bytes: ``flags`` (codec, SPARSE) with the message count in
    bits 2-5 when it is below 16, else followed by the count as a varint (§4.1)."""
    return bytes((flags | count << 2,)) if count < 16 else bytes((flags,)) + encode_varint(count)


def encode_bundle(values: Sequence, keys: Sequence | None = None,
                  timestamps: Sequence[int] | int = 0, seqs: Sequence[int] | None = None, *,
                  codec: int = CODEC_NONE) -> bytes:
    """Columns -> one bundle. ``seqs`` makes it SPARSE with those (strictly increasing)
    numbers; ``timestamps`` may be one value for all; ``codec`` 1 compresses the message set
    as one raw Snappy block."""
    if not isinstance(values, list):
        values = list(values)
    count = len(values)
    if isinstance(timestamps, int):
        timestamps = [timestamps] * count
    if keys is not None and not isinstance(keys, list):
        keys = list(keys)
    if seqs is not None and not isinstance(seqs, list):
        seqs = list(seqs)
    if not isinstance(timestamps, list):
        timestamps = list(timestamps)
    if codec not in (CODEC_NONE, CODEC_SNAPPY):
        raise ValueError(f"unknown codec {codec}")
    body = encode_set(keys, values, timestamps, seqs)
    if type(body) is str:
        raise ValueError(body)
    header = bytearray(flags_and_count(codec | (FLAG_SPARSE if seqs is not None else 0), count))
    if seqs is not None:
        header += U64.pack(seqs[0])
        if count != 1:
            header += encode_varint(seqs[-1] - seqs[0] - 1)
    if codec == CODEC_SNAPPY:
        body = cramjam.snappy.compress_raw(body)
    return b"".join((header, body))


def snappy_if_smaller(data: bytes | bytearray | memoryview) -> bytes | None:
    """``data`` as one raw Snappy block (codec 1's format, and Kafka's unframed snappy), or
    None when that would not be smaller (incompressible data is kept as it is)."""
    packed = cramjam.snappy.compress_raw(data)
    return bytes(packed) if len(packed) < len(data) else None


# --- chunks ----------------------------------------------------------------------------------


class Chunk(NamedTuple):
    """A Consume chunk read: its messages as columns (all bundles), the number the next
    non-sparse bundle would get, and, when the chunk ends inside a bundle (a broker that clips
    at fetch_size), the full size of that bundle (0 otherwise)."""

    keys: list
    values: list
    timestamps: list
    seqs: list
    next_seq: int
    partial_bundle_size: int


def split_chunk(chunk) -> tuple[list[memoryview], int]:
    """The whole bundles of ``chunk`` and the size of a trailing partial one (0 if none)."""
    view = memoryview(chunk).cast("B")
    end = len(view)
    offset = 0
    bundles = []
    while offset < end:
        try:
            size, start = decode_varint(view, offset, end)
        except Truncated:
            return bundles, 1  # even the length is cut: any larger fetch completes it
        if size > end - start:
            return bundles, start - offset + size
        bundles.append(view[start : start + size])
        offset = start + size
    return bundles, 0


def decode_chunk(chunk, base_seq: int, *,
                 max_set_size: int = DEFAULT_MAX_SET_SIZE) -> Chunk:
    """Every message of ``chunk`` (§4.3 numbering from ``base_seq``)."""
    bundles, partial = split_chunk(chunk)
    keys, values, timestamps, seqs = [], [], [], []
    next_seq = base_seq
    for raw in bundles:
        bundle = decode_bundle(raw, next_seq, max_set_size=max_set_size)
        keys += bundle.keys
        values += bundle.values
        timestamps += bundle.timestamps
        seqs += bundle.seqs
        next_seq = bundle.seqs[-1] + 1
    return Chunk(keys, values, timestamps, seqs, next_seq, partial)


def frame_bundle(bundle: bytes) -> bytes:
    """``varint(len) ++ bundle``: one bundle as it sits in a chunk (and TANK's segment files)."""
    return encode_varint(len(bundle)) + bundle
