"""rill's extension commands (docs/extensions.md): exact bytes, replies, bad payloads.

Round trips, truncated prefixes and trailing bytes of every command run in test_commands.py
and test_responses.py (the samples include the extensions); this module pins the layouts.
"""

from __future__ import annotations

import struct
import zlib

import pytest

from rill.protocol.iggy import codes
from rill.protocol.buffer import DecodeError, Reader
from rill.protocol.iggy.commands.columnar import PollMessagesColumnar
from rill.protocol.iggy.commands.transactions import (
    AbortStagedMessages,
    CommitStagedMessages,
    GetProducerState,
    StageMessages,
)
from rill.protocol.iggy.headers import HeaderValue
from rill.protocol.iggy.messages import POLLED_FIXED, Message, iter_polled_messages
from rill.protocol.iggy.stored import encode_stored_records
from rill.protocol.iggy.primitives import Identifier, Partitioning
from rill.protocol.iggy.responses.columnar import ColumnarMessages
from rill.protocol.iggy.responses.transactions import (
    CommitOutcome,
    CommitResult,
    ProducerState,
    StagedHandle,
    StageOutcome,
    StageResult,
)


def _hex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def test_poll_messages_columnar_bytes() -> None:
    command = PollMessagesColumnar(Identifier(1), Identifier("t"), 2, 5, 100, 4096)
    assert command.to_frame() == _hex(
        "21 00 00 00 e8 03 00 00"  # length 4 + 29, code 1000
        "01 04 01 00 00 00  02 01 74"  # ident 1, ident "t"
        "02 00 00 00  05 00 00 00 00 00 00 00  64 00 00 00  00 10 00 00"
    )
    assert codes.decode_command(1000, command.encode()) == command


def _records(payloads: list[bytes], first_offset: int) -> tuple[bytes, list[int]]:
    """Stored records (POLL layout) and their start positions."""
    out = bytearray()
    starts = []
    for index, payload in enumerate(payloads):
        starts.append(len(out))
        out += POLLED_FIXED.pack(first_offset + index, 1, 1000 + index, bytes(16), 0, 0)
        out += struct.pack("<I", len(payload)) + payload
    return bytes(out), starts


def test_columnar_reply_layout_and_messages() -> None:
    records, starts = _records([b"a", b"bc"], first_offset=7)
    base = 500
    boundaries = struct.pack("<3I", base + starts[0], base + starts[1], base + len(records))
    reply = ColumnarMessages(4, 2, 9, 7, 2, base, struct.pack("<2Q", 1000, 1001), boundaries,
                             records)
    data = reply.to_bytes()
    assert data[:36] == struct.pack("<IQQQII", 4, 2, 9, 7, 2, base)
    assert data[36:52] == struct.pack("<2Q", 1000, 1001)
    assert data[52:64] == boundaries and data[64:] == records
    decoded = PollMessagesColumnar.decode_response(data)
    assert decoded == reply and decoded.end_offset == 9 and len(decoded) == 2
    assert [(m.offset, m.timestamp, m.payload) for m in decoded.messages] == [
        (7, 1000, b"a"), (8, 1001, b"bc")]


def test_columnar_reply_rejects_boundaries_that_disagree_with_the_region() -> None:
    records, _ = _records([b"a"], 0)
    good = ColumnarMessages(1, 0, 1, 0, 1, 0, bytes(8), struct.pack("<2I", 0, len(records)),
                            records).to_bytes()
    with pytest.raises(DecodeError):
        ColumnarMessages.from_payload(good + b"x")  # region longer than the last boundary
    bad_start = ColumnarMessages(1, 0, 1, 0, 1, 9, bytes(8),
                                 struct.pack("<2I", 0, len(records)), records).to_bytes()
    with pytest.raises(DecodeError):
        ColumnarMessages.from_payload(bad_start)
    with pytest.raises(DecodeError):  # a count the payload cannot hold
        ColumnarMessages.from_payload(struct.pack("<IQQQII", 1, 0, 0, 0, 10**6, 0))


def test_stage_messages_bytes_and_zero_copy_parts() -> None:
    command = StageMessages.of("p", 3, 9, 1, 2, 1, 1, Partitioning.partition_id(2),
                               [Message(b"hi", id=5)])
    head = _hex(
        "01 70  03 00 00 00 00 00 00 00  09 00 00 00 00 00 00 00"
        "01 00 00 00  02 00 00 00 00 00 00 00"
        "01 04 01 00 00 00  01 04 01 00 00 00  02 04 02 00 00 00"
        "01 00 00 00  00 00 00 00"  # one position: 0
    )
    record = (bytes(8) + b"\x01" + bytes(8) + (5).to_bytes(16, "little")
              + zlib.crc32(b"hi").to_bytes(4, "little") + bytes(4) + _hex("02 00 00 00") + b"hi")
    assert command.encode() == head + record
    assert command.encode_parts() == (head, record)
    decoded = StageMessages.decode(head + record)
    assert decoded == command and bytes(decoded.records) == record


def test_stored_records_get_ids_checksums_and_positions() -> None:
    positions, records = encode_stored_records(
        [b"a", Message(b"bc", id=7, headers={"k": HeaderValue.string("v")})], unix_ms=1234)
    assert struct.unpack("<2I", positions) == (0, 46)
    first, second = iter_polled_messages(records, 2)
    assert first.payload == b"a" and first.checksum == zlib.crc32(b"a")
    assert int.from_bytes(first.id_bytes[:6], "big") == 1234  # a UUIDv7 for unix_ms
    assert (first.id_bytes[6] >> 4, first.id_bytes[8] >> 6) == (7, 2)
    assert (second.id, second.headers) == (7, {"k": HeaderValue.string("v")})


def test_commit_abort_and_state_bytes() -> None:
    commit = CommitStagedMessages("p", 1, (StagedHandle(2, 3, 4),))
    assert commit.encode() == _hex(
        "01 70  01 00 00 00 00 00 00 00  01 00 00 00"
        "02 00 00 00  03 00 00 00 00 00 00 00  04 00 00 00 00 00 00 00"
    )
    zero_run = "00 00 00 00 00 00 00 00"
    assert AbortStagedMessages("p", 9).encode() == _hex(
        f"01 70  09 00 00 00 00 00 00 00  {zero_run}  00  00 00 00 00  00 00 00 00 00 00 00 00")
    assert AbortStagedMessages("p", 9, 0, True, 2, 3).encode() == _hex(
        f"01 70  09 00 00 00 00 00 00 00  {zero_run}  01  02 00 00 00  03 00 00 00 00 00 00 00")
    assert GetProducerState("p").encode() == _hex("01 70")


def test_the_owner_header_comes_first_and_no_owner_is_version_0() -> None:
    header = _hex("00 01  03") + b"own"  # marker, version 1, str8 owner
    commit = CommitStagedMessages("p", 1, (StagedHandle(2, 3, 4),), owner="own")
    assert commit.encode() == header + CommitStagedMessages("p", 1, commit.handles).encode()
    abort = AbortStagedMessages("p", 9, 7, owner="own")
    assert abort.encode() == header + AbortStagedMessages("p", 9, 7).encode()
    stage = StageMessages.of("p", 3, 9, 1, 2, 1, 1, Partitioning.partition_id(2),
                             [Message(b"hi", id=5)], owner="own")
    head, records = stage.encode_parts()
    assert head == header + StageMessages.of("p", 3, 9, 1, 2, 1, 1, Partitioning.partition_id(2),
                                             [Message(b"hi", id=5)]).encode_head()
    for command in (commit, abort, stage):
        assert codes.decode_command(command.CODE, command.encode()) == command
    with pytest.raises(ValueError):
        CommitStagedMessages("p", 1, owner="o" * 256)


@pytest.mark.parametrize("header", [
    _hex("00 02  03") + b"own",  # an unknown version
    _hex("00 01  00"),  # an empty owner (no owner is written as version 0)
])
@pytest.mark.parametrize("code, rest", [
    (1011, CommitStagedMessages("p", 1).encode()),
    (1012, AbortStagedMessages("p", 1).encode()),
    (1010, StageMessages.of("p", 1, 0, 0, 0, 1, 1, Partitioning.balanced(), [b"x"]).encode()),
], ids=["commit", "abort", "stage"])  # (a staged message's id is random: no bytes in the ids)
def test_a_bad_owner_header_is_a_decode_error(header: bytes, code: int, rest: bytes) -> None:
    with pytest.raises(DecodeError):
        codes.decode_command(code, header + rest)


def test_a_handle_count_beyond_the_payload_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        CommitStagedMessages.decode(_hex("01 70  01 00 00 00 00 00 00 00  ff ff ff ff"))


@pytest.mark.parametrize("payload", [
    _hex("00  01 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  00  00 00 00 00"
         "00 00 00 00 00 00 00 00"),  # abort with an empty producer id
    _hex("00"),  # get_producer_state with an empty producer id
])
def test_an_empty_producer_id_is_a_decode_error(payload: bytes) -> None:
    code = 1012 if len(payload) > 1 else 1013
    with pytest.raises(DecodeError):
        codes.decode_command(code, payload)
    with pytest.raises(ValueError):
        CommitStagedMessages("", 1)


def test_reply_bytes() -> None:
    assert StageResult(StageOutcome.STAGED, 2, 5).to_bytes() == _hex(
        "00  02 00 00 00  05 00 00 00 00 00 00 00")
    assert CommitResult(CommitOutcome.ALREADY_COMMITTED, 0).to_bytes() == _hex(
        "01  00 00 00 00 00 00 00 00")
    state = ProducerState.decode(Reader(_hex(
        "01  07 00 00 00 00 00 00 00  02 00 00 00  0a 00 00 00 00 00 00 00")))
    assert state == ProducerState(True, 7, 2, 10) and state.last_batch == 7
    assert ProducerState(False, 0, 0, 0).last_batch is None
    with pytest.raises(DecodeError):  # an outcome byte outside the enum
        StageResult.decode(Reader(_hex("07  02 00 00 00  05 00 00 00 00 00 00 00")))


def test_stage_messages_of_builds_the_send_region() -> None:
    command = StageMessages.of("p", 0, 0, 0, 0, "s", "t", Partitioning.balanced(),
                               [Message(b"x", id=5)])
    assert bytes(command.records)[17:33] == (5).to_bytes(16, "little")
