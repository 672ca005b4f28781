"""Replies and records of the staged-append (transactional) rill extension, codes 1010-1013.

StagedHandle     u32 task_id; u64 attempt_id; u64 messages_count      (inside COMMIT requests)
StageResult      u8 outcome; u32 partition_id; u64 staged_messages
CommitResult     u8 outcome; u64 messages_count
ProducerState    u8 has_committed; u64 last_committed_batch; u32 staged_handles;
                 u64 staged_messages
"""

from __future__ import annotations

from dataclasses import dataclass

from rill.protocol.iggy.commands.base import BOOL, U32, U64, FieldCodec, enum8
from rill.protocol.primitives import CommitOutcome, StageOutcome
from rill.protocol.iggy.responses.base import Record


@dataclass(frozen=True, slots=True)
class StagedHandle(Record):
    """One task attempt's staged messages, named in a commit with the count it staged."""

    LAYOUT = (U32, U64, U64)
    task_id: int
    attempt_id: int
    messages_count: int


STAGED_HANDLE: FieldCodec[StagedHandle] = FieldCodec(
    "staged handle", StagedHandle.decode, lambda writer, value: value.encode(writer)
)


@dataclass(frozen=True, slots=True)
class StageResult(Record):
    LAYOUT = (enum8(StageOutcome), U32, U64)
    outcome: StageOutcome
    partition_id: int  # the partition the messages will be appended to (0 when dropped)
    staged_messages: int  # messages staged under this handle so far


@dataclass(frozen=True, slots=True)
class CommitResult(Record):
    LAYOUT = (enum8(CommitOutcome), U64)
    outcome: CommitOutcome
    messages_count: int  # messages appended by this commit


@dataclass(frozen=True, slots=True)
class ProducerState(Record):
    LAYOUT = (BOOL, U64, U32, U64)
    has_committed: bool
    last_committed_batch: int  # 0 unless has_committed
    staged_handles: int  # staged and neither committed nor aborted, all batches
    staged_messages: int

    @property
    def last_batch(self) -> int | None:
        return self.last_committed_batch if self.has_committed else None

