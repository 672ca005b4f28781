"""SDK methods of rill's extension commands (docs/extensions.md): columnar reads, staged appends,
consumer lag, long polling, topics' record formats, unlocking a user.

Owns: ``ExtensionMethods``, a mixin of ``CommandMethods`` (so ``AsyncClient`` and the blocking
``Client`` have these methods too), one coroutine per extension command, named as the
command's ``NAME``. These commands are rill's own: an Iggy server answers them with an error.
"""

from __future__ import annotations

import time
from typing import Any, Awaitable, Callable, Iterable

from rill.protocol.iggy.commands.base import Command
from rill.protocol.iggy.commands.columnar import PollMessagesColumnar, PollStoredBatches
from rill.protocol.iggy.commands.long_poll import (
    MAX_WAIT_MS,
    PollMessagesWaiting,
    WaitForMessages,
)
from rill.protocol.iggy.commands.offsets import GetConsumerLag
from rill.protocol.iggy.commands.topics import (
    CreateTopicWithFormat,
    GetTopicRecordFormats,
    record_format_stored,
)
from rill.protocol.iggy.commands.transactions import (
    AbortStagedMessages,
    CommitStagedMessages,
    GetProducerState,
    StageMessages,
)
from rill.protocol.iggy.commands.users import UnlockUser
from rill.protocol.iggy.messages import Message
from rill.protocol.primitives import CompressionAlgorithm
from rill.protocol.iggy.commands.messages import PollMessages
from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning, PollingStrategy
from rill.protocol.iggy.responses.columnar import ColumnarMessages, StoredBatches
from rill.protocol.iggy.responses.groups import ConsumerLag
from rill.protocol.iggy.responses.long_poll import PartitionEnd
from rill.protocol.iggy.responses.messages import PolledMessages
from rill.protocol.iggy.responses.topics import TopicDetails, TopicRecordFormat
from rill.protocol.iggy.responses.transactions import (
    CommitResult,
    ProducerState,
    StagedHandle,
    StageResult,
)
from rill.protocol.iggy.stored import encode_stored_records

Id = int | str | Identifier
ConsumerLike = Consumer | int | str | Identifier


def poll_command(stream_id: Id, topic_id: Id, consumer: ConsumerLike, partition_id: int | None,
                 strategy: PollingStrategy, count: int, auto_commit: bool) -> PollMessages:
    """The POLL_MESSAGES of ``poll_messages``' arguments (a consumer as a Consumer or a
    regular consumer's id; no partition: the group's or the server's choice)."""
    return PollMessages(consumer if isinstance(consumer, Consumer) else Consumer.regular(consumer),
                        Identifier.of(stream_id), Identifier.of(topic_id),
                        0 if partition_id is None else partition_id, strategy, count, auto_commit)


def compression_algorithm(value: CompressionAlgorithm | int | str) -> CompressionAlgorithm:
    """A topic's compression given as the enum, its number or its name (any case)."""
    if isinstance(value, str):
        return CompressionAlgorithm[value.upper()]
    return CompressionAlgorithm(value)


class ExtensionMethods:
    """rill's extension commands (docs/extensions.md); the class that mixes this in
    (AsyncClient) provides ``execute``, the one path every command takes."""

    execute: Callable[[Command], Awaitable[Any]]

    async def poll_messages_columnar(
        self,
        stream_id: Id,
        topic_id: Id,
        partition_id: int,
        offset: int,
        count: int,
        max_bytes: int = 0,
    ) -> ColumnarMessages:
        """Read up to ``count`` messages from ``offset`` of one partition as columns (rill
        extension 1000); ``count`` 0 returns the partition's bounds only."""
        return await self.execute(PollMessagesColumnar(
            Identifier.of(stream_id), Identifier.of(topic_id), partition_id, offset, count,
            max_bytes,
        ))

    async def poll_stored_batches(
        self,
        stream_id: Id,
        topic_id: Id,
        partition_id: int,
        offset: int,
        count: int,
        max_bytes: int = 0,
    ) -> StoredBatches:
        """The stored records of one partition from ``offset``, as its log holds them (a
        ``kafka`` topic's whole RecordBatch v2 batches, an ``iggy`` topic's messages) (rill
        extension 1001)."""
        return await self.execute(PollStoredBatches(
            Identifier.of(stream_id), Identifier.of(topic_id), partition_id, offset, count,
            max_bytes,
        ))

    async def stage_messages(
        self,
        producer_id: str,
        batch_id: int,
        task_id: int,
        attempt_id: int,
        stream_id: Id,
        topic_id: Id,
        messages: Iterable[Message | bytes | str] | tuple[bytes | memoryview, bytes | memoryview],
        partitioning: Partitioning | int | None = None,
        run_id: int = 0,
        owner: str = "",
    ) -> StageResult:
        """Stage messages (invisible until committed) under the handle (producer, batch, task,
        attempt) (rill extension 1010). ``messages`` is Message/bytes/str items, or a pair
        ``(positions, records)`` already in the stored layout (``rill.protocol.iggy.stored``);
        ``partitioning`` defaults to balanced, an int is a partition id; ``run_id`` names this
        execution of the batch (an aborted run stages nothing more); ``owner`` names who drives
        the batch ids (a producer whose batches another owner committed refuses: 11002)."""
        if isinstance(messages, tuple) and len(messages) == 2 and isinstance(
                messages[0], (bytes, memoryview)):
            positions, records = messages
        else:
            positions, records = encode_stored_records(
                (message.encode("utf-8") if isinstance(message, str) else message
                 for message in messages), time.time_ns() // 1_000_000)
        if partitioning is None:
            partitioning = Partitioning.balanced()
        elif isinstance(partitioning, int):
            partitioning = Partitioning.partition_id(partitioning)
        return await self.execute(StageMessages(
            producer_id, batch_id, run_id, task_id, attempt_id, Identifier.of(stream_id),
            Identifier.of(topic_id), partitioning, positions, records, owner,
        ))

    async def commit_staged_messages(
        self,
        producer_id: str,
        batch_id: int,
        handles: Iterable[StagedHandle | tuple[int, int, int]],
        owner: str = "",
    ) -> CommitResult:
        """Atomically append the named handles' staged messages and record ``batch_id`` as the
        producer's last committed batch (rill extension 1011); a replayed batch appends
        nothing. ``handles`` are StagedHandle or (task_id, attempt_id, messages_count);
        ``owner`` as for ``stage_messages`` (the first commit with one records it)."""
        named = tuple(
            handle if isinstance(handle, StagedHandle) else StagedHandle(*handle)
            for handle in handles
        )
        return await self.execute(CommitStagedMessages(producer_id, batch_id, named, owner))

    async def abort_staged_messages(
        self,
        producer_id: str,
        batch_id: int,
        run_id: int = 0,
        task_id: int | None = None,
        attempt_id: int = 0,
        owner: str = "",
    ) -> None:
        """Drop everything staged for a batch and fence ``run_id`` (if not 0), or with
        ``task_id`` only the handle (batch, task_id, attempt_id) (rill extension 1012);
        ``owner`` as for ``stage_messages``."""
        if task_id is None:
            await self.execute(AbortStagedMessages(producer_id, batch_id, run_id, owner=owner))
        else:
            await self.execute(AbortStagedMessages(
                producer_id, batch_id, run_id, True, task_id, attempt_id, owner))

    async def get_producer_state(self, producer_id: str) -> ProducerState:
        """A producer's last committed batch and what it has staged (rill extension 1013)."""
        return await self.execute(GetProducerState(producer_id))

    async def unlock_user(self, user_id: Id) -> None:
        """Let a user that failed logins locked out log in again at once (rill extension 1050;
        needs manage_users)."""
        await self.execute(UnlockUser(Identifier.of(user_id)))

    async def get_consumer_lag(self, stream_id: Id, topic_id: Id) -> list[ConsumerLag]:
        """Committed offset, end offset and lag of every consumer group (every partition) and
        every consumer with a stored offset in a topic (rill extension 1020)."""
        return await self.execute(GetConsumerLag(Identifier.of(stream_id), Identifier.of(topic_id)))

    async def create_topic_with_format(
        self, stream_id: Id, name: str, record_format: str, partitions_count: int = 1,
        compression: CompressionAlgorithm | int | str = CompressionAlgorithm.NONE,
        message_expiry: int = 0, max_topic_size: int = 0, replication_factor: int = 0,
        topic_id: int = 0,
    ) -> TopicDetails:
        """``create_topic`` storing ``record_format``: ``"iggy"`` or ``"kafka"`` (Kafka's
        RecordBatch v2) (rill extension 1040; ``create_topic(..., record_format=...)`` calls
        it). Another name raises ``errors.InvalidFormat`` before anything is sent."""
        record_format_stored(record_format)  # the choices, named in the error
        return await self.execute(CreateTopicWithFormat(
            Identifier.of(stream_id), topic_id, partitions_count, compression_algorithm(compression),
            message_expiry, max_topic_size, replication_factor, name, record_format))

    async def get_topic_record_formats(self, stream_id: Id) -> list[TopicRecordFormat]:
        """The record format (``iggy`` or ``kafka``) of every topic of a stream, by topic id
        (rill extension 1041; topic records over the binary protocol cannot carry it)."""
        return await self.execute(GetTopicRecordFormats(Identifier.of(stream_id)))

    async def poll_messages_waiting(
        self, stream_id: Id, topic_id: Id, consumer: ConsumerLike = 1,
        partition_id: int | None = None, strategy: PollingStrategy = PollingStrategy.next(),
        count: int = 100, auto_commit: bool = False, max_wait_ms: int = MAX_WAIT_MS,
    ) -> PolledMessages:
        """``poll_messages`` that waits, when it finds nothing, until there is something it
        would return or ``max_wait_ms`` passed (rill extension 1031): a tailing consumer's
        one request per read."""
        return await self.execute(PollMessagesWaiting(poll_command(
            stream_id, topic_id, consumer, partition_id, strategy, count, auto_commit),
            max_wait_ms))

    async def wait_for_messages(self, stream_id: Id, topic_id: Id,
                                positions: dict[int, int] | Iterable[tuple[int, int]],
                                max_wait_ms: int = MAX_WAIT_MS, min_bytes: int = 0) -> list[PartitionEnd]:
        """Wait until the partitions hold messages from the given offsets on (``positions``:
        partition id -> offset; at least ``min_bytes`` bytes of records together, at least one
        record when 0), or ``max_wait_ms`` passed; each partition's next offset and bytes from
        its offset (rill extension 1030). Poll the partitions whose next offset moved."""
        pairs = tuple(positions.items() if isinstance(positions, dict) else positions)
        return await self.execute(WaitForMessages(Identifier.of(stream_id), Identifier.of(topic_id),
                                                  pairs, max_wait_ms, min_bytes))
