"""The C twin of stamp_batch (``_stamp.c``) against the Python reference, on the same inputs.

Every case runs both implementations and requires the same outcome: the same records and index
bytes, or the same exception (type, status code, message). The C status itself is checked too,
so that a region the twin wrongly rejects cannot hide behind the reference it falls back to.
Ids of zero become UUIDv7s, which are random: every test here swaps the generator for one that
gives fixed bytes (an autouse fixture), and one test checks the real ids the twin gets.
"""

from __future__ import annotations

import os
import platform
import struct
import sys
import threading
import uuid
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rill.errors import InvalidMessagesCount, TooBigHeadersPayload, TooBigMessagePayload
from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.headers import HeaderKind, HeaderValue, encode_header_map
from rill.protocol.iggy.messages import Message, encode_messages, iter_polled_messages
from rill.protocol.iggy.stored import uuid7_block
from rill.server.storage.formats import iggy_v1
from rill.server.storage.formats.iggy_v1 import (
    MAX_HEADERS_BYTES,
    MAX_PAYLOAD_BYTES,
    stamp_batch_python,
)
from rill.server.storage.index_entry import MAX_POSITION

try:
    from rill.server.storage.formats import _stamp
except ImportError:  # pragma: no cover - depends on the build
    _stamp = None

needs_twin = pytest.mark.skipif(
    _stamp is None or not iggy_v1.ACCELERATED,
    reason="the C extension is not built, or RILL_PURE_PYTHON=1 switched it off",
)

TIMESTAMP = 1_700_000_000_123_456
_U32 = struct.Struct("<I")


def fixed_uuid7_block(count: int, unix_ms: int) -> bytes:
    """Same ids whatever the block size: the reference asks for blocks of guessed sizes, the
    twin for one exact block, so only a position-independent id compares byte for byte."""
    one = (unix_ms & 0xFFFF_FFFF_FFFF).to_bytes(6, "big") + b"\x70\x00\x80" + bytes(7)
    return one * count


@pytest.fixture(autouse=True)
def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(iggy_v1, "uuid7_block", fixed_uuid7_block)


def outcome(function, *args):  # type: ignore[no-untyped-def]
    """("ok", records, index entries, count, first, last, timestamp) or ("error", ...)."""
    try:
        batch = function(*args)
    except Exception as error:  # noqa: BLE001 - compared, not handled
        return ("error", type(error), str(error), getattr(error, "code", None),
                getattr(error, "detail", None))
    return ("ok", bytes(batch.records), bytes(batch.index_entries), type(batch.index_entries),
            batch.count, batch.first_offset, batch.last_offset, batch.timestamp_us)


# C status -> the exception class the reference must raise for it
_STATUS_CLASSES = {
    1: DecodeError,
    2: InvalidMessagesCount,
    3: TooBigHeadersPayload,
    4: TooBigMessagePayload,
    5: ValueError,
}


def assert_same(raw, base_offset=0, timestamp_us=TIMESTAMP, base_position=0,  # type: ignore[no-untyped-def]
                segment_start=0):
    """Both implementations agree on ``raw``; returns the reference's outcome."""
    args = (raw, base_offset, timestamp_us, base_position, segment_start)
    expected = outcome(stamp_batch_python, *args)
    assert outcome(iggy_v1.stamp_batch_accelerated, *args) == expected
    status = _stamp.stamp(*args, iggy_v1.uuid7_block)
    if type(status) is tuple:
        assert expected[0] == "ok", f"the twin accepted what the reference rejects: {expected}"
        assert (bytes(status[0]), bytes(status[1]), status[2]) == expected[1:3] + (expected[4],)
    elif type(status) is str:  # malformed: the twin words the reference's message itself
        assert expected[:2] == ("error", DecodeError) and expected[4] == status, (status, expected)
    elif status == _stamp.STATUS_UNSUPPORTED:
        assert expected[0] == "error"
    else:
        assert expected[0] == "error", f"the twin rejected a valid region (status {status})"
        assert issubclass(expected[1], _STATUS_CLASSES[status]), (status, expected)
    return expected


def send_message(message_id: bytes, headers: bytes, payload: bytes) -> bytes:
    return message_id + _U32.pack(len(headers)) + headers + _U32.pack(len(payload)) + payload


def header_entry(key: bytes, kind: int, value: bytes) -> bytes:
    return _U32.pack(len(key)) + key + bytes([kind]) + _U32.pack(len(value)) + value


# ------------------------------------------------------------------ the build


@pytest.mark.skipif(os.environ.get("RILL_PURE_PYTHON") == "1", reason="reference forced")
def test_the_twin_is_built_and_used_on_linux_cpython() -> None:
    if not (sys.platform.startswith("linux") and platform.python_implementation() == "CPython"):
        pytest.skip("the build is only promised on Linux CPython")
    assert _stamp is not None, "rill.server.storage.formats._stamp did not build (pip install -e .)"
    assert iggy_v1.ACCELERATED
    assert iggy_v1.stamp_batch is iggy_v1.stamp_batch_accelerated


@needs_twin
def test_the_twin_has_the_reference_limits() -> None:
    assert (_stamp.MAX_PAYLOAD_BYTES, _stamp.MAX_HEADERS_BYTES, _stamp.MAX_POSITION) == (
        MAX_PAYLOAD_BYTES, MAX_HEADERS_BYTES, MAX_POSITION)
    assert _stamp.RECORD_GROWTH == iggy_v1.RECORD_GROWTH


# ------------------------------------------------------------------ CRC-32


@needs_twin
@pytest.mark.parametrize("mode", [(True, True), (True, False), (False, False)],
                         ids=["512-bit folding", "128-bit folding", "tables"])
def test_crc32_is_zlibs_for_every_length_alignment_and_start(mode: tuple[bool, bool]) -> None:
    """Each path the CPU allows (the others fall back to the next one down)."""
    data = os.urandom(1200)
    try:
        _stamp.set_pclmul(*mode)
        for length in range(1100):
            for start in (0, 1, 3, 8):
                chunk = data[start : start + length]
                for value in (0, 0xDEADBEEF):
                    assert _stamp.crc32(chunk, value) == zlib.crc32(chunk, value)
        big = os.urandom(100_003)
        assert _stamp.crc32(big) == zlib.crc32(big)
    finally:
        _stamp.set_pclmul()


@needs_twin
@given(st.binary(max_size=5000), st.integers(0, 0xFFFF_FFFF))
def test_crc32_matches_zlib_on_random_data(data: bytes, value: int) -> None:
    assert _stamp.crc32(data, value) == zlib.crc32(data, value)


@needs_twin
def test_crc32_is_the_reference_checksum() -> None:
    assert _stamp.crc32(b"hello") == 0x3610A686 == iggy_v1.crc32(b"hello")


# ------------------------------------------------------------------ valid batches


messages_strategy = st.lists(
    st.tuples(
        st.one_of(st.just(bytes(16)), st.binary(min_size=16, max_size=16)),
        st.one_of(
            st.none(),
            st.dictionaries(
                st.text(min_size=1, max_size=6),
                st.builds(HeaderValue, st.sampled_from(list(HeaderKind)),
                          st.binary(min_size=1, max_size=20)),
                max_size=4,
            ),
        ),
        st.binary(min_size=1, max_size=300),
    ),
    min_size=1,
    max_size=12,
)


def encode(messages: list[tuple[bytes, dict | None, bytes]]) -> bytes:
    return b"".join(send_message(i, encode_header_map(h), p) for i, h, p in messages)


@needs_twin
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages_strategy, st.integers(0, 2**32 - 13), st.integers(0, 2**20),
       st.integers(0, 2**62), st.sampled_from(["bytes", "bytearray", "memoryview"]))
def test_random_valid_batches_give_identical_bytes(
    fixed_ids: None, messages: list, relative: int, base_position: int, timestamp: int,
    kind: str,
) -> None:
    raw = encode(messages)
    raw = {"bytes": raw, "bytearray": bytearray(raw), "memoryview": memoryview(raw)}[kind]
    result = assert_same(raw, 1000 + relative, timestamp, base_position, 1000)
    assert result[0] == "ok"


@needs_twin
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages_strategy.filter(lambda m: sum(len(encode([x])) for x in m) < 600))
def test_every_truncation_fails_the_same_way(fixed_ids: None, messages: list) -> None:
    raw = encode(messages)
    for length in range(len(raw) + 1):
        assert_same(raw[:length])


@needs_twin
@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages_strategy, st.data())
def test_random_corruptions_fail_or_pass_the_same_way(fixed_ids: None, messages: list,
                                                      data: st.DataObject) -> None:
    raw = bytearray(encode(messages))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(raw) - 1))
        raw[position] = data.draw(st.sampled_from([0, 1, 0xFF, 0x80, 0xC3, 0xED, 0xF4,
                                                   raw[position] ^ 1]))
    assert_same(bytes(raw))
    assert_same(bytes(raw) + data.draw(st.binary(max_size=30)))


# ------------------------------------------------------------------ header maps

_GOOD_ENTRY = header_entry(b"k", 1, b"v")


@needs_twin
@pytest.mark.parametrize(
    "headers",
    [
        header_entry(b"", 1, b"v"),  # empty key
        header_entry(b"k" * 256, 1, b"v"),  # key too long
        header_entry(b"k" * 255, 1, b"v"),  # longest key: valid
        header_entry(b"k", 0, b"v"),  # kind 0
        header_entry(b"k", 16, b"v"),  # kind 16
        header_entry(b"k", 15, b"v"),  # kind 15: valid
        header_entry(b"k", 1, b""),  # empty value
        header_entry(b"k", 1, b"v" * 256),  # value too long
        header_entry(b"k", 1, b"v" * 255),  # longest value: valid
        _GOOD_ENTRY + _GOOD_ENTRY,  # duplicate key
        _GOOD_ENTRY + header_entry(b"j", 1, b"v"),  # two keys: valid
        b"".join(header_entry(b"k%d" % n, 1, b"v") for n in range(40)),  # many keys: valid
        b"".join(header_entry(b"k%d" % n, 1, b"v") for n in range(40))
        + header_entry(b"k7", 2, b"w"),  # many keys, one repeated (the sorted check)
        _GOOD_ENTRY[:-1],  # truncated value
        _GOOD_ENTRY + b"\x00",  # a stray byte after the last entry
        _GOOD_ENTRY + b"\x01\x00\x00",  # a short key length
        header_entry("é".encode(), 1, b"v"),  # UTF-8 key: valid
        header_entry("€𝄞".encode(), 1, b"v"),  # 3- and 4-byte sequences: valid
        header_entry(b"\x00", 1, b"v"),  # NUL is valid UTF-8
        header_entry(b"\xff", 1, b"v"),
        header_entry(b"\xc0\x80", 1, b"v"),  # overlong NUL
        header_entry(b"\xe0\x80\x80", 1, b"v"),  # overlong
        header_entry(b"\xed\xa0\x80", 1, b"v"),  # surrogate
        header_entry(b"\xf4\x90\x80\x80", 1, b"v"),  # past U+10FFFF
        header_entry(b"\xf0\x8f\xbf\xbf", 1, b"v"),  # overlong 4-byte
        header_entry(b"\xc3", 1, b"v"),  # truncated sequence
        header_entry(b"a\x80", 1, b"v"),  # stray continuation byte
        header_entry(b"\xe2\x82", 1, b"v"),
        header_entry("é".encode(), 1, b"v") + header_entry("é".encode(), 2, b"w"),  # duplicate
    ],
)
def test_header_maps_are_judged_the_same_way(fixed_ids: None, headers: bytes) -> None:
    raw = send_message(bytes(16), headers, b"payload") + send_message(b"\x01" * 16, b"", b"p")
    assert_same(raw)


@needs_twin
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.binary(min_size=0, max_size=6), st.integers(0, 17),
                          st.binary(min_size=0, max_size=4)), min_size=1, max_size=5))
def test_random_header_entries_are_judged_the_same_way(fixed_ids: None, entries: list) -> None:
    headers = b"".join(header_entry(k, kind, v) for k, kind, v in entries)
    assert_same(send_message(b"\x05" * 16, headers, b"x"))


# ------------------------------------------------------------------ limits and arguments


def _payloads_totalling(total: int, size: int = 1_000_000) -> bytes:
    parts, remaining = [], total
    while remaining:
        parts.append(send_message(b"\x01" * 16, b"", b"a" * min(size, remaining)))
        remaining -= min(size, remaining)
    return b"".join(parts)


def _headers_totalling(total: int) -> bytes:
    return encode_messages(
        [Message(b"p", id=n + 1, headers=h) for n, h in enumerate(_header_maps(total))])


def _header_maps(total: int) -> list[dict[str, HeaderValue]]:
    maps, remaining = [], total
    while remaining:
        entries = {}
        for key in range(50):
            size = min(255, remaining)
            if not size:
                break
            entries[f"h{key}"] = HeaderValue.raw(b"v" * size)
            remaining -= size
        maps.append(entries)
    return maps


@needs_twin
def test_empty_region() -> None:
    assert assert_same(b"")[1] is InvalidMessagesCount


@needs_twin
@pytest.mark.parametrize("total,error", [(MAX_PAYLOAD_BYTES, None),
                                         (MAX_PAYLOAD_BYTES + 1, TooBigMessagePayload)])
def test_payload_limit(total: int, error: type | None) -> None:
    result = assert_same(_payloads_totalling(total))
    assert result[0] == "ok" if error is None else result[1] is error


@needs_twin
@pytest.mark.parametrize("total,error", [(MAX_HEADERS_BYTES, None),
                                         (MAX_HEADERS_BYTES + 1, TooBigHeadersPayload)])
def test_headers_limit(total: int, error: type | None) -> None:
    result = assert_same(_headers_totalling(total))
    assert result[0] == "ok" if error is None else result[1] is error


@needs_twin
def test_limits_are_met_as_soon_as_a_running_total_passes_them() -> None:
    both = _headers_totalling(MAX_HEADERS_BYTES + 1) + _payloads_totalling(MAX_PAYLOAD_BYTES + 1)
    assert assert_same(both)[1] is TooBigHeadersPayload
    assert assert_same(both + b"\x00" * 5)[1] is TooBigHeadersPayload  # the tail is never read
    payloads_first = _payloads_totalling(MAX_PAYLOAD_BYTES + 1) + _headers_totalling(
        MAX_HEADERS_BYTES + 1)
    assert assert_same(payloads_first)[1] is TooBigMessagePayload
    assert assert_same(b"\x00" * 5 + both)[1] is DecodeError  # what comes first wins


@needs_twin
def test_the_headers_limit_is_met_inside_one_map() -> None:
    """One message whose map has more value bytes than a batch may: the walk stops at the
    entry that passes the limit (whatever follows, even a repeated key or garbage)..."""
    entries = [header_entry(b"k%d" % n, 1, b"v" * 200) for n in range(600)]
    over = b"".join(entries) + header_entry(b"k1", 1, b"v") + b"\x07"
    assert assert_same(send_message(b"\x01" * 16, over, b"p"))[1] is TooBigHeadersPayload
    # ... unless a repeated key came before it: the reference checks keys as it goes
    repeated = b"".join(entries[:5]) + header_entry(b"k1", 1, b"v") + b"".join(entries[5:])
    early = send_message(b"\x01" * 16, repeated, b"p")
    result = assert_same(early)
    assert result[1] is DecodeError and result[4] == "message 0: duplicate header key 'k1'"


@needs_twin
@pytest.mark.parametrize("tail", [b"\x00" * 5, b"\x00" * 16 + _U32.pack(3) + b"abc",
                                  send_message(bytes(16), b"", b"")])
def test_many_messages_with_a_malformed_tail_are_worded_by_the_twin(tail: bytes) -> None:
    """The pathological SEND: a large region, valid up to a malformed tail. The twin words
    the reference's message itself (no second pass in Python)."""
    body = send_message(b"\x01" * 16, header_entry(b"k", 1, b"v"), b"x") * 20_000
    status = _stamp.stamp(body + tail, 0, TIMESTAMP, 0, 0, iggy_v1.uuid7_block)
    assert type(status) is str and status.startswith("message 20000: ")
    assert assert_same(body + tail)[4] == status


@needs_twin
def test_positions_limit() -> None:
    raw = send_message(b"\x01" * 16, b"", b"abc")  # a 48-byte record
    assert assert_same(raw, base_position=MAX_POSITION + 1 - 48)[0] == "ok"
    assert assert_same(raw, base_position=MAX_POSITION + 2 - 48)[1] is ValueError
    assert assert_same(raw, base_position=2**64 + 5)[0] == "error"


@needs_twin
@pytest.mark.parametrize(
    "base_offset,segment_start,timestamp",
    [
        (2**64 - 1, 2**64 - 1, TIMESTAMP),  # the last offset there is: valid
        (2**64 - 1, 2**64 - 2, TIMESTAMP),  # the second message's offset overflows u64
        (2**64, 2**64, TIMESTAMP),
        (5, 6, TIMESTAMP),  # below the segment start
        (2**32 - 1, 0, TIMESTAMP),  # last relative offset that fits u32: valid for one
        (2**32 - 2, 0, TIMESTAMP),  # the second relative offset is 2**32 - 1: valid
        (2**32 - 1 + 1, 0, TIMESTAMP),  # relative offset past u32
        (0, 0, -1),  # negative timestamp
        (0, 0, 2**64),  # timestamp past u64
        (-1, 0, TIMESTAMP),
    ],
)
def test_out_of_range_arguments(base_offset: int, segment_start: int, timestamp: int) -> None:
    raw = send_message(b"\x01" * 16, b"", b"a") + send_message(bytes(16), b"", b"b")
    assert_same(raw[:26], base_offset, timestamp, 0, segment_start)
    assert_same(raw, base_offset, timestamp, 0, segment_start)


@needs_twin
@pytest.mark.parametrize("raw", ["text", 12, None, memoryview(b"x" * 60)[::2],
                                 memoryview(bytearray(64)).cast("I")])
def test_odd_region_objects(raw: object) -> None:
    assert_same(raw)


@needs_twin
def test_a_region_viewed_as_words_is_read_as_bytes(fixed_ids: None) -> None:
    raw = encode_messages([Message(b"abc", id=1), Message(b"d" * 5, id=2)])
    padded = raw + b"\x01" * 16 + _U32.pack(0) + _U32.pack(4 - len(raw) % 4 + 4)
    padded += b"z" * (4 - len(raw) % 4 + 4)
    assert len(padded) % 4 == 0
    assert assert_same(memoryview(padded).cast("I"))[0] == "ok"


# ------------------------------------------------------------------ ids and threads


@needs_twin
def test_the_twin_gives_zero_ids_distinct_uuid7s_of_the_batch_millisecond() -> None:
    now_us = 1_750_000_000_000_000 + 987
    raw = encode_messages([b"a", Message(b"b", id=42), b"c", b"d" * 3000])
    found, _, count = _stamp.stamp(raw, 0, now_us, 0, 0, uuid7_block)  # the real generator
    polled = list(iter_polled_messages(found, count))
    assert polled[1].id == 42
    generated = [uuid.UUID(bytes=m.id_bytes) for m in (polled[0], polled[2], polled[3])]
    assert len(set(generated)) == 3
    for value in generated:
        assert value.version == 7 and value.variant == uuid.RFC_4122
        assert int.from_bytes(value.bytes[:6], "big") == now_us // 1000


# the bits of a UUIDv7 that are not random: the 48-bit millisecond, the version, the variant
_FIXED_BITS = bytes([0xFF] * 6 + [0xF0, 0x00, 0xC0] + [0x00] * 7)


def _fixed_part(block: bytes) -> bytes:
    return bytes(byte & _FIXED_BITS[index % 16] for index, byte in enumerate(block))


@needs_twin
@pytest.mark.parametrize("count", [0, 1, 3, 1000])
@pytest.mark.parametrize("unix_ms", [0, 1_750_000_000_987, (1 << 48) - 1, 1 << 48, -1,
                                     (1 << 64) + 5, -(1 << 70)])
def test_the_twin_of_the_uuid7_generator_lays_out_the_same_ids(count: int, unix_ms: int) -> None:
    """``_stamp.uuid7_block`` against ``stored.uuid7_block``: the same length, millisecond
    (its low 48 bits, of any int), version and variant; random bits that differ from id to id
    and from call to call."""
    made, reference = _stamp.uuid7_block(count, unix_ms), uuid7_block(count, unix_ms)
    assert type(made) is bytes and len(made) == len(reference) == 16 * count
    assert _fixed_part(made) == _fixed_part(reference)
    ids = [uuid.UUID(bytes=made[16 * n : 16 * n + 16]) for n in range(count)]
    assert all(i.version == 7 and i.variant == uuid.RFC_4122 for i in ids)
    assert all(int.from_bytes(i.bytes[:6], "big") == unix_ms & (1 << 48) - 1 for i in ids)
    assert len(set(ids)) == count
    if count:
        assert _stamp.uuid7_block(count, unix_ms) != made  # 74 random bits each time


@needs_twin
def test_the_twins_ids_of_one_batch_sort_in_its_order() -> None:
    """RFC 9562 6.2's monotonic random: one draw per batch, counted up by one per id."""
    made = _stamp.uuid7_block(1000, 1_750_000_000_987)
    ids = [made[16 * n : 16 * n + 16] for n in range(1000)]
    assert ids == sorted(ids)
    tails = [int.from_bytes(i[8:], "big") & (1 << 62) - 1 for i in ids]
    assert tails == list(range(tails[0], tails[0] + 1000)) and tails[-1] < 1 << 62


@needs_twin
def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    """The twin's pool of random bytes is dropped in a child after fork: a server's worker
    process and its parent never hand out the same ids."""
    _stamp.uuid7_block(1, 0)  # the pool holds bytes now
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.write(writer, _stamp.uuid7_block(4, 0))
        os._exit(0)
    os.close(writer)
    os.waitpid(child, 0)
    from_child = os.read(reader, 64)
    os.close(reader)
    assert len(from_child) == 64 and from_child != _stamp.uuid7_block(4, 0)


@needs_twin
def test_the_twin_of_the_uuid7_generator_refuses_what_the_reference_refuses() -> None:
    for bad in (-1, -(1 << 40)):
        with pytest.raises(ValueError):
            uuid7_block(bad, 0)
        with pytest.raises(ValueError):
            _stamp.uuid7_block(bad, 0)
    for wrong in ((1.5, 0), ("3", 0), (3, 1.5), (3,), (3, 0, 0)):
        with pytest.raises(TypeError):
            _stamp.uuid7_block(*wrong)


@needs_twin
def test_stamping_takes_its_ids_from_the_twin_of_the_generator() -> None:
    """What the server stamps a message sent without an id with is the C generator (the
    reference is the Python one, ten times slower on a batch of ten)."""
    import subprocess  # (the module as a server imports it, without this file's fixture)
    found = subprocess.run(
        [sys.executable, "-c", "from rill.server.storage.formats import _stamp, iggy_v1; "
         "print(iggy_v1.ACCELERATED, iggy_v1.uuid7_block is _stamp.uuid7_block)"],
        capture_output=True, text=True, check=True, env={**os.environ, "RILL_PURE_PYTHON": "0"})
    assert found.stdout.split() == ["True", "True"]


@needs_twin
def test_threads_stamping_at_once_get_their_own_results() -> None:
    """Stamping releases the GIL: many threads at once must not mix their batches up."""
    regions = [encode_messages([Message(bytes([n]) * 2000, id=i + 1) for i in range(50)])
               for n in range(8)]
    expected = [bytes(stamp_batch_python(r, 7, TIMESTAMP, 0, 0).records) for r in regions]
    failures: list[str] = []

    def work(number: int) -> None:
        for _ in range(20):
            got = iggy_v1.stamp_batch_accelerated(bytearray(regions[number]), 7, TIMESTAMP, 0, 0)
            if got.records != expected[number]:
                failures.append(f"thread {number}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


@needs_twin
def test_a_pinned_bytearray_cannot_be_resized_while_stamped() -> None:
    """The buffer export taken for the GIL-free loop is released afterwards."""
    raw = bytearray(encode_messages([Message(b"x" * 40_000, id=1)]))
    iggy_v1.stamp_batch_accelerated(raw, 0, TIMESTAMP, 0, 0)
    raw += b"more"  # would raise BufferError if the export leaked
