"""Staged (transactional) appends, a rill extension (docs/extensions.md): codes 1010-1013.

A producer (any name: a Spark query id, a job id) stages messages under a handle
(producer_id, batch_id, task_id, attempt_id); nothing staged is visible to readers. One
COMMIT_STAGED_MESSAGES makes the named handles of a batch visible atomically and records the
batch as the producer's last committed one, so committing a batch again (a replay) appends
nothing. ABORT_STAGED_MESSAGES drops a batch's staged messages (or one handle's). Handles of a
batch that a commit does not name (failed or duplicate task attempts) are dropped by that
commit.

The *owner* (version 1 of STAGE, COMMIT and ABORT): who drives the producer's batch ids (a
Spark query's checkpoint). A producer whose batches were committed by one owner refuses the
requests of another (11002), so that a writer whose batch ids started again (a fresh
checkpoint) cannot take another's committed batches for its own replays. A request with an
owner starts with the *owner header* ``u8 0; u8 version = 1; str8 owner`` (non-empty) before
the version 0 fields; version 0 (no header: the payload starts with the str8 producer_id,
never empty, so never with byte 0) carries no owner and is not checked. A server that knows
only version 0 refuses a version-1 request (empty producer id: status 3), never misreads it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Iterable

from rill.protocol.buffer import DecodeError, Reader, Writer
from rill.protocol.iggy.commands.base import STR8, STRICT_BOOL, U32, U64, Command, single_response
from rill.protocol.iggy.messages import Message
from rill.protocol.iggy.primitives import Identifier, Partitioning
from rill.protocol.iggy.stored import encode_stored_records
from rill.protocol.iggy.responses.transactions import (
    CommitResult,
    ProducerState,
    StagedHandle,
    StageResult,
)


OWNER_VERSION = 1  # the one version of the owner header so far


def _check_producer_id(producer_id: str) -> None:
    if not producer_id:
        raise ValueError("producer_id must not be empty")


def _check_owner(owner: str) -> None:
    if len(owner.encode("utf-8")) > 255:
        raise ValueError("owner must be at most 255 bytes")


def _write_owner(writer: Writer, owner: str) -> Writer:
    """The owner header (nothing for no owner: the version 0 layout)."""
    if owner:
        writer.u8(0).u8(OWNER_VERSION).str8(owner)
    return writer


def _read_owner(payload: bytes | bytearray | memoryview, reader: Reader) -> str:
    """The owner of the request ("" for version 0), leaving ``reader`` at the producer_id."""
    if not len(payload) or payload[0] != 0:
        return ""
    reader.u8()
    version = reader.u8()
    if version != OWNER_VERSION:
        raise DecodeError(f"unknown owner header version {version}")
    owner = reader.str8()
    if not owner:
        raise DecodeError("an owner header with an empty owner")
    return owner


@dataclass(frozen=True, slots=True)
class StageMessages(Command):
    """1010 STAGE_MESSAGES: [owner header]; str8 producer_id; u64 batch_id; u64 run_id;
    u32 task_id; u64 attempt_id; ident stream_id; ident topic_id; partitioning; u32 count;
    count x u32 positions; then ``count`` records in the stored layout (``rill.protocol.iggy.stored``)
    until the end of the payload, record i starting at byte ``positions[i]`` of them (the first
    at 0).
    OK: StageResult. Permission: as SEND_MESSAGES on the topic.

    The writer builds the records (ids, checksums: the per-message work), the server checks
    them (layout, checksums, SEND's limits: 4009, 4017, 4022, else status 3), so a bad message
    fails this call, never the commit. The partition is chosen now, as SEND would. The records
    are kept durably, per the fsync policy, until the batch is committed or aborted; offsets
    and timestamps are written at commit. A batch already committed drops them (outcome
    ALREADY_COMMITTED), and so does a run that was aborted (outcome ABORTED): ``run_id`` names
    one execution of a batch (a job, a micro-batch run), so that late calls of its failed task
    attempts cannot stage anything after its abort, while a later run (a replay) can. A
    producer whose batches another ``owner`` committed refuses the call (11002).
    """

    CODE = 1010
    NAME = "stage_messages"
    producer_id: str
    batch_id: int
    run_id: int
    task_id: int
    attempt_id: int
    stream_id: Identifier
    topic_id: Identifier
    partitioning: Partitioning
    positions: bytes | memoryview
    records: bytes | memoryview
    owner: str = ""

    def __post_init__(self) -> None:
        _check_producer_id(self.producer_id)
        _check_owner(self.owner)

    @classmethod
    def of(
        cls,
        producer_id: str,
        batch_id: int,
        run_id: int,
        task_id: int,
        attempt_id: int,
        stream_id: int | str | Identifier,
        topic_id: int | str | Identifier,
        partitioning: Partitioning,
        messages: Iterable[Message | bytes],
        unix_ms: int = 0,
        owner: str = "",
    ) -> StageMessages:
        """From Message values; messages with id 0 get UUIDv7s for ``unix_ms``."""
        positions, records = encode_stored_records(messages, unix_ms)
        return cls(producer_id, batch_id, run_id, task_id, attempt_id, Identifier.of(stream_id),
                   Identifier.of(topic_id), partitioning, positions, records, owner)

    def encode_head(self) -> bytes:
        writer = _write_owner(Writer(), self.owner)
        writer.str8(self.producer_id).u64(self.batch_id).u64(self.run_id)
        writer.u32(self.task_id).u64(self.attempt_id)
        self.stream_id.encode(writer)
        self.topic_id.encode(writer)
        self.partitioning.encode(writer)
        writer.u32(len(self.positions) // 4).raw(self.positions)
        return writer.getvalue()

    def encode(self) -> bytes:
        return self.encode_head() + bytes(self.records)

    def encode_parts(self) -> tuple[bytes, bytes | memoryview]:
        """Head and records as two buffers, so that big records are sent without a copy."""
        return (self.encode_head(), self.records)

    @classmethod
    def decode(cls, payload: bytes | bytearray | memoryview) -> StageMessages:
        reader = Reader(payload)
        owner = _read_owner(payload, reader)
        producer_id = reader.str8()
        batch_id, run_id = reader.u64(), reader.u64()
        task_id, attempt_id = reader.u32(), reader.u64()
        stream_id = Identifier.decode(reader)
        topic_id = Identifier.decode(reader)
        partitioning = Partitioning.decode(reader)
        positions = reader.view(4 * reader.u32())
        try:
            return cls(producer_id, batch_id, run_id, task_id, attempt_id, stream_id, topic_id,
                       partitioning, positions, reader.rest(), owner)
        except ValueError as error:
            raise DecodeError(str(error)) from None

    decode_response = staticmethod(single_response(StageResult.decode))


@dataclass(frozen=True, slots=True)
class CommitStagedMessages(Command):
    """1011 COMMIT_STAGED_MESSAGES: [owner header]; str8 producer_id; u64 batch_id;
    u32 handles_count; then handles_count x (u32 task_id; u64 attempt_id; u64 messages_count).
    OK: CommitResult.

    Atomic and durable: either every message of the named handles becomes visible (in handle
    order, each handle's stage calls in order) and ``batch_id`` becomes the producer's last
    committed batch, or nothing happens. A handle whose staged count differs from
    ``messages_count`` fails the commit (11001); a missing handle with a non-zero count too
    (11000). A ``batch_id`` at or below the last committed one is a replay: nothing is appended
    (outcome ALREADY_COMMITTED). A producer whose batches another ``owner`` committed refuses
    the commit (11002) before anything else; the first commit with an owner that appends
    records it with the batch. Permission: as SEND_MESSAGES on every topic staged to.
    """

    CODE = 1011
    NAME = "commit_staged_messages"
    producer_id: str
    batch_id: int
    handles: tuple[StagedHandle, ...] = ()
    owner: str = ""

    def __post_init__(self) -> None:
        _check_producer_id(self.producer_id)
        _check_owner(self.owner)

    def encode(self) -> bytes:
        writer = _write_owner(Writer(), self.owner)
        writer.str8(self.producer_id).u64(self.batch_id).u32(len(self.handles))
        for handle in self.handles:
            handle.encode(writer)
        return writer.getvalue()

    @classmethod
    def decode(cls, payload: bytes | bytearray | memoryview) -> CommitStagedMessages:
        reader = Reader(payload)
        owner = _read_owner(payload, reader)
        producer_id = reader.str8()
        batch_id = reader.u64()
        count = reader.u32()
        if count * 20 > reader.remaining:
            raise DecodeError(f"{count} staged handles do not fit {reader.remaining} bytes")
        handles = tuple(StagedHandle.decode(reader) for _ in range(count))
        reader.expect_end()
        try:
            return cls(producer_id, batch_id, handles, owner)
        except ValueError as error:
            raise DecodeError(str(error)) from None

    decode_response = staticmethod(single_response(CommitResult.decode))


@dataclass(frozen=True, slots=True)
class AbortStagedMessages(Command):
    """1012 ABORT_STAGED_MESSAGES: [owner header]; str8 producer_id; u64 batch_id; u64 run_id;
    u8 one_handle (0/1); u32 task_id; u64 attempt_id. OK: empty.

    Drops every staged handle of the batch and, when ``run_id`` is not 0, fences that run: its
    later stage calls are dropped (outcome ABORTED). With ``one_handle`` only the handle
    (batch, task_id, attempt_id) is dropped -- what a failing task attempt does to clean up
    after itself. Aborting a committed or unknown batch or handle does nothing. A producer whose
    batches another ``owner`` committed refuses the abort (11002). Permission: as SEND_MESSAGES
    on every topic staged to.
    """

    CODE = 1012
    NAME = "abort_staged_messages"
    LAYOUT = (STR8, U64, U64, STRICT_BOOL, U32, U64)  # after the owner header
    producer_id: str
    batch_id: int
    run_id: int = 0
    one_handle: bool = False
    task_id: int = 0
    attempt_id: int = 0
    owner: str = ""

    def __post_init__(self) -> None:
        _check_producer_id(self.producer_id)
        _check_owner(self.owner)

    def encode(self) -> bytes:
        writer = _write_owner(Writer(), self.owner)
        for field, codec in zip(fields(self), self.LAYOUT):
            codec.write(writer, getattr(self, field.name))
        return writer.getvalue()

    @classmethod
    def decode(cls, payload: bytes | bytearray | memoryview) -> AbortStagedMessages:
        reader = Reader(payload)
        owner = _read_owner(payload, reader)
        values = [codec.read(reader) for codec in cls.LAYOUT]
        reader.expect_end()
        try:
            return cls(*values, owner=owner)
        except ValueError as error:
            raise DecodeError(str(error)) from None


@dataclass(frozen=True, slots=True)
class GetProducerState(Command):
    """1013 GET_PRODUCER_STATE: str8 producer_id. OK: ProducerState (an unknown producer has
    no committed batch and nothing staged). Needs a login only."""

    CODE = 1013
    NAME = "get_producer_state"
    LAYOUT = (STR8,)
    producer_id: str

    def __post_init__(self) -> None:
        _check_producer_id(self.producer_id)

    decode_response = staticmethod(single_response(ProducerState.decode))
