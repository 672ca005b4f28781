"""Staged appends (rill extension, codes 1010-1013): stage, commit atomically, abort, inspect.

Owns: each producer's last committed batch and its staged handles (batch -> (task, attempt) ->
StagedFile), and the commit protocol that makes exactly-once sinks possible:

1. STAGE picks the partition as SEND would, checks the records the writer built in the
   stored layout (the per-message work -- ids, checksums, layout -- is the writer's, so many
   writers share it; the server checks layout, checksums and SEND's limits) and appends them
   to the handle's staged file (durable per policy before the reply). Staged messages are
   invisible to readers.
2. COMMIT checks the named handles, resolves and authorizes every target partition, then, with
   no ``await`` until the end of step 3 (so no other request can touch those partitions):
   builds a plan (handles in order + each target partition's next offset), *decides* it in
   the journal in one SQLite transaction together with "batch N is the producer's last
   committed batch",
3. applies the plan (one append per staged region, which only writes offsets and the commit
   timestamp into the stamped records), *finishes* it in the journal, and drops
   every staged handle of batches <= N (including attempts the commit did not name).
4. A commit of a batch <= the last committed one is a replay and appends nothing.

A replay is only safe when the batch ids come from the same source as the committed ones: a
Spark query on a fresh checkpoint counts from 0 again, and its first batches would be taken
for replays of another query's and silently dropped. So a producer has an *owner* (the
identity of what drives its batch ids, e.g. the checkpoint's query id), recorded in the journal
with the first commit that names one (``decide``). A STAGE, COMMIT or ABORT that names another
owner is refused (11002, before anything else: nothing staged, appended or dropped) once the
producer has one; a request that names none (version 0 of the codec) is not checked, and a
producer without one (its commits named none, or came before owners) takes the owner of its
next appending commit.

At start, plans decided and not finished (a crash in step 3) are applied again: for each
partition, the messages already beyond the recorded next offset are skipped, so a plan lands
exactly once. Invariant: a batch is either wholly visible (decided) or wholly absent.

Also owned here: the fences of aborted runs (kept in the journal, so a restart keeps them) and
the expiry of abandoned staged data (``[transactions] staged_expiry``): a background cleaner
drops the staged handles of every batch that nobody staged to for that long, and fences as
old. A late commit of an expired batch then fails (handle not found or count mismatch) and
shows nothing; the expiry must be longer than the longest batch a writer runs.

Limits checked: at stage time, what SEND checks (``check_stored_records``) and that the topic
is not already full (as SEND: size >= max_topic_size); at commit time, for each topic, that
its size plus the bytes the commit appends to it stays within max_topic_size (else TopicFull,
nothing appended, nothing dropped). Commits do not go through message deduplication: the
batch record is what makes a replay a no-op (see docs/extensions.md).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from array import array
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Protocol, Sequence

from rill import errors
from rill.protocol.primitives import MAX_TOPIC_SIZE_UNLIMITED, CommitOutcome, StageOutcome
from rill.server.auth.permissioner import Action
from rill.server.config import NEVER
from rill.server.core.model import Partition, Session, Topic
from rill.server.core.state import CoreState
from rill.server.core.types import PartitionChooser, Ref
from rill.server.core.log import Log
from rill.server.storage.formats.iggy_v1 import check_staged_layout, check_stored_records
from rill.server.storage.formats.iggy_v1_checks import scan_records
from rill.server.storage.staging import StagedFile, StagingArea
from rill.server.storage.transaction_journal import TransactionJournal

log = logging.getLogger(__name__)

PartitionKey = tuple[int, int, int]  # stream id, topic id, partition id


@dataclass(eq=False)
class Producer:
    last_committed: int | None = None
    owner: str | None = None  # recorded with a commit; None until one names it
    staged: dict[int, dict[tuple[int, int], StagedFile]] = field(default_factory=dict)
    # decided batches whose application failed (I/O error): kept for the replay at start
    unfinished: set[int] = field(default_factory=set)
    # (batch, run) aborted -> when (µs): late stage calls of their task attempts are dropped
    fenced: dict[tuple[int, int], int] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def is_committed(self, batch_id: int) -> bool:
        return self.last_committed is not None and batch_id <= self.last_committed

    def check_owner(self, producer_id: str, owner: str) -> None:
        """ProducerOwnerMismatch if the producer's batches belong to another owner than
        ``owner`` (a request naming no owner is not checked)."""
        if owner and self.owner is not None and owner != self.owner:
            log.warning("producer %s belongs to %r; refused a request of %r (for Spark: a "
                        "producerId shared by two queries or checkpoints)",
                        producer_id, self.owner, owner)
            raise errors.ProducerOwnerMismatch(producer_id, self.owner, owner)


class StageResult(NamedTuple):
    outcome: StageOutcome
    partition_id: int  # the partition the messages will be appended to (0 when dropped)
    staged_messages: int  # messages staged under this handle so far


class CommitResult(NamedTuple):
    outcome: CommitOutcome
    messages_count: int  # messages appended by this commit


class ProducerState(NamedTuple):
    has_committed: bool
    last_committed_batch: int  # 0 unless has_committed
    staged_handles: int  # staged and neither committed nor aborted, all batches
    staged_messages: int


class Handle(Protocol):
    """One staged handle a commit names, with the messages it expects there."""

    task_id: int
    attempt_id: int
    messages_count: int


class TransactionService:
    def __init__(
        self, state: CoreState, appended: Callable[[Log], None],
    ) -> None:
        self.state = state
        self.appended = appended  # after every append: metrics, and the long polls it wakes
        self.staging = StagingArea(state.paths, state.durability)
        # Every commit is synced under interval too: a decision lost while the messages it
        # appended survive would let a replayed batch append them twice (see the journal).
        self.journal = TransactionJournal(
            state.paths.transactions_db, synchronous_full=state.durability.policy.value != "never"
        )
        self.producers: dict[str, Producer] = {}
        self._cleaner: asyncio.Task[None] | None = None

    # -- commands --------------------------------------------------------------------------

    async def stage_messages(
        self, session: Session, stream_id: Ref, topic_id: Ref,
        partition: int | PartitionChooser,
        producer_id: str, batch_id: int, run_id: int, task_id: int, attempt_id: int,
        positions: bytes | memoryview, records: bytes | memoryview, owner: str = "",
    ) -> StageResult:
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.WRITE_MESSAGES, topic.stream_id, topic.id)
        partition = state.find_partition(
            topic, partition if type(partition) is int else partition(topic))  # type: ignore[operator]
        check_not_replicated(partition, topic)
        producer = self.producers.setdefault(producer_id, Producer())
        producer.check_owner(producer_id, owner)
        if producer.is_committed(batch_id):
            return StageResult(StageOutcome.ALREADY_COMMITTED, 0, 0)
        if (batch_id, run_id) in producer.fenced:
            return StageResult(StageOutcome.ABORTED, 0, 0)
        _check_not_full(topic, 0)
        records = bytearray(records)
        check_staged_records(records, positions)
        handles = producer.staged.setdefault(batch_id, {})
        key = (task_id, attempt_id)
        staged = handles.get(key)
        if staged is None:
            staged = handles[key] = self.staging.create(producer_id, batch_id, *key)
        staged.append(topic.stream_id, topic.id, partition.id, bytes(positions), records)
        staged.last_active_us = self.state.clock()
        await staged.wait_durable()
        return StageResult(StageOutcome.STAGED, partition.id, staged.messages_count)

    async def commit_staged_messages(self, session: Session, producer_id: str, batch_id: int,
                                     handles: Sequence[Handle], owner: str = "") -> CommitResult:
        producer = self.producers.setdefault(producer_id, Producer())
        async with producer.lock:
            producer.check_owner(producer_id, owner)
            if producer.is_committed(batch_id):
                self._drop_through(producer_id, producer, batch_id)
                return CommitResult(CommitOutcome.ALREADY_COMMITTED, 0)
            chosen = self._chosen_handles(producer, producer_id, batch_id, handles)
            targets = self._targets(session, chosen)
            self._check_topic_sizes(chosen)
            # no await from here on: nothing else can append to the targets in between
            plan = {
                "handles": [[staged.task_id, staged.attempt_id] for staged in chosen],
                "partitions": [[*key, partition.log.next_offset]
                               for key, partition in targets.items()],
            }
            self.journal.decide(producer_id, batch_id, plan, self.state.clock(), owner)
            producer.last_committed = batch_id
            if producer.owner is None and owner:
                producer.owner = owner
            try:
                appended = self._apply(chosen, targets, skips={})
            except BaseException:
                producer.unfinished.add(batch_id)
                raise
            self.journal.finish(producer_id, batch_id)
            self._drop_through(producer_id, producer, batch_id)
        for partition in targets.values():
            await partition.log.wait_durable()
        return CommitResult(CommitOutcome.COMMITTED, appended)

    async def abort_staged_messages(
        self, session: Session, producer_id: str, batch_id: int, run_id: int = 0,
        one_handle: bool = False, task_id: int = 0, attempt_id: int = 0, owner: str = "",
    ) -> None:
        producer = self.producers.get(producer_id)
        if producer is None:
            if one_handle or not run_id:
                return  # nothing staged, nothing to fence
            # fence the run even though none of its stage calls has arrived yet
            producer = self.producers.setdefault(producer_id, Producer())
        async with producer.lock:
            producer.check_owner(producer_id, owner)
            handles = producer.staged.get(batch_id, {})
            if one_handle:
                key = (task_id, attempt_id)
                handles = {key: handles[key]} if key in handles else {}
            topics = {(entry.stream_id, entry.topic_id)
                      for staged in handles.values() for entry in staged.entries}
            for stream_id, topic_id in sorted(topics):
                self.state.authorize(session, Action.WRITE_MESSAGES, stream_id, topic_id)
            batch = producer.staged.get(batch_id, {})
            for key, staged in list(handles.items()):
                del batch[key]
                staged.delete()
            if not batch:
                producer.staged.pop(batch_id, None)
            if run_id and not one_handle and not producer.is_committed(
                    batch_id):
                now = self.state.clock()
                self.journal.fence(producer_id, batch_id, run_id, now)
                producer.fenced[batch_id, run_id] = now

    def get_producer_state(self, session: Session, producer_id: str) -> ProducerState:
        producer = self.producers.get(producer_id)
        if producer is None:
            return ProducerState(False, 0, 0, 0)
        files = [staged for handles in producer.staged.values() for staged in handles.values()]
        return ProducerState(
            producer.last_committed is not None, producer.last_committed or 0, len(files),
            sum(staged.messages_count for staged in files),
        )

    # -- the commit steps ------------------------------------------------------------------

    @staticmethod
    def _chosen_handles(producer: Producer, producer_id: str, batch_id: int,
                        named_handles: Sequence[Handle]) -> list[StagedFile]:
        handles = producer.staged.get(batch_id, {})
        chosen = []
        for named in named_handles:
            staged = handles.get((named.task_id, named.attempt_id))
            label = (producer_id, batch_id, named.task_id, named.attempt_id)
            if staged is None:
                if named.messages_count:
                    raise errors.StagedMessagesNotFound(*label)
                continue
            if staged.messages_count != named.messages_count:
                raise errors.StagedMessagesCountMismatch(
                    *label, staged.messages_count, named.messages_count
                )
            chosen.append(staged)
        return chosen

    def _targets(
        self, session: Session, chosen: list[StagedFile]
    ) -> dict[PartitionKey, Partition]:
        """Every partition the handles append to (first-use order), authorized for ``session``."""
        targets: dict[PartitionKey, Partition] = {}
        for staged in chosen:
            for entry in staged.entries:
                key = (entry.stream_id, entry.topic_id, entry.partition_id)
                if key in targets:
                    continue
                stream = self.state.streams.get(entry.stream_id)
                topic = stream.topics.get(entry.topic_id) if stream else None
                if topic is None:
                    raise errors.TopicIdNotFound(entry.topic_id, entry.stream_id)
                self.state.authorize(session, Action.WRITE_MESSAGES, topic.stream_id, topic.id)
                targets[key] = self.state.find_partition(topic, entry.partition_id)
                check_not_replicated(targets[key], topic)
        return targets

    def _apply(
        self, chosen: list[StagedFile], targets: dict[PartitionKey, Partition],
        skips: dict[PartitionKey, int],
    ) -> int:
        """Append the handles' regions in order, skipping ``skips[key]`` leading messages of
        each partition (those a crashed earlier application already wrote)."""
        appended = 0
        for staged in chosen:
            for entry in staged.entries:
                key = (entry.stream_id, entry.topic_id, entry.partition_id)
                partition = targets.get(key)
                if partition is None:
                    continue
                records, positions = staged.read_entry(entry)
                count = entry.count
                skip = skips.get(key, 0)
                if skip:
                    skipped = min(skip, count)
                    skips[key] = skip - skipped
                    count -= skipped
                    if not count:
                        continue
                    start = positions[skipped]
                    records = records[start:]
                    positions = array("I", (p - start for p in positions[skipped:]))
                partition.log.append_stamped(records, positions, self.state.clock())
                self.appended(partition.log)
                _forget_room(self.state, entry.stream_id, entry.topic_id)
                appended += count
        return appended

    def _check_topic_sizes(self, chosen: list[StagedFile]) -> None:
        """TopicFull unless every topic has room for what the commit appends to it."""
        adding: dict[tuple[int, int], int] = {}
        for staged in chosen:
            for key, size in staged.records_bytes_by_topic().items():
                adding[key] = adding.get(key, 0) + size
        for (stream_id, topic_id), size in adding.items():
            stream = self.state.streams.get(stream_id)
            topic = stream.topics.get(topic_id) if stream else None
            if topic is not None:
                _check_not_full(topic, size)

    def _drop_through(self, producer_id: str, producer: Producer, batch_id: int) -> None:
        """Delete the staged files of every batch <= ``batch_id`` (committed or superseded),
        and the fences of those batches."""
        done_fences = [fence for fence in producer.fenced if fence[0] <= batch_id]
        if done_fences:
            self.journal.drop_fences(producer_id, done_fences)
            for fence in done_fences:
                del producer.fenced[fence]
        done = [batch for batch in producer.staged
                if batch <= batch_id and batch not in producer.unfinished]
        for batch in done:
            for staged in producer.staged.pop(batch).values():
                staged.delete()

    # -- start and stop --------------------------------------------------------------------

    async def start(self) -> None:
        """Load producers and staged files, finish commits a crash interrupted, drop leftovers."""
        for producer_id, committed in self.journal.load_producers().items():
            self.producers[producer_id] = Producer(committed.last_committed_batch, committed.owner)
        for staged in self.staging.load_all():
            producer = self.producers.setdefault(staged.producer_id, Producer())
            handles = producer.staged.setdefault(staged.batch_id, {})
            handles[(staged.task_id, staged.attempt_id)] = staged
        touched: dict[PartitionKey, Partition] = {}
        for pending in self.journal.load_pending():
            touched.update(self._replay(pending.producer_id, pending.batch_id, pending.plan))
            self.journal.finish(pending.producer_id, pending.batch_id)
        for fence in self.journal.load_fences():
            producer = self.producers.setdefault(fence.producer_id, Producer())
            producer.fenced[fence.batch_id, fence.run_id] = fence.fenced_at
        for producer_id, producer in self.producers.items():
            if producer.last_committed is not None:
                self._drop_through(producer_id, producer, producer.last_committed)
        for partition in touched.values():
            await partition.log.wait_durable()
        settings = self.state.config.transactions
        if 0 < settings.cleaner_interval < NEVER and 0 < settings.staged_expiry < NEVER:
            self._cleaner = asyncio.create_task(self.run_cleaner(settings.cleaner_interval))

    # -- expiry ----------------------------------------------------------------------------

    async def run_cleaner(self, interval: float) -> None:
        """Every ``interval`` seconds, drop what ``[transactions] staged_expiry`` expired."""
        while True:
            await asyncio.sleep(interval)
            try:
                self.expire(self.state.clock())
            except Exception:  # a failed delete changed nothing durable; try again next round
                log.exception("dropping expired staged messages failed")

    def expire(self, now_us: int) -> tuple[int, int]:
        """Drop every batch whose handles were all last staged to ``staged_expiry`` or more
        before ``now_us`` (decided batches waiting for their replay excepted), and fences as
        old; returns (handles, fences) dropped. Runs without ``await``: no command can be
        halfway through the same producer meanwhile."""
        expiry = self.state.config.transactions.staged_expiry
        if not 0 < expiry < NEVER:
            return 0, 0
        oldest = now_us - int(expiry * 1_000_000)
        handles = fences = 0
        for producer_id, producer in list(self.producers.items()):
            if producer.lock.locked():
                continue  # a commit or abort is waiting on this producer: next round
            for batch_id, staged_files in list(producer.staged.items()):
                if batch_id in producer.unfinished:
                    continue
                if max(staged.last_active_us for staged in staged_files.values()) > oldest:
                    continue
                del producer.staged[batch_id]
                for staged in staged_files.values():
                    staged.delete()
                handles += len(staged_files)
                log.warning("producer %s batch %d: dropped %d staged handle(s) unused for %s s "
                            "([transactions] staged_expiry)", producer_id, batch_id,
                            len(staged_files), expiry)
            old_fences = [fence for fence, at in producer.fenced.items() if at <= oldest]
            if old_fences:
                self.journal.drop_fences(producer_id, old_fences)
                for fence in old_fences:
                    del producer.fenced[fence]
                fences += len(old_fences)
            if producer.last_committed is None and not producer.staged and not producer.fenced:
                del self.producers[producer_id]  # nothing left to remember
        return handles, fences

    def _replay(self, producer_id: str, batch_id: int, plan: dict) -> dict[PartitionKey, Partition]:
        handles = self.producers.setdefault(producer_id, Producer()).staged.get(batch_id, {})
        chosen = []
        for task_id, attempt_id in plan["handles"]:
            staged = handles.get((task_id, attempt_id))
            if staged is None:
                log.error("commit %s/%d: staged handle %d/%d is missing; its messages are lost",
                          producer_id, batch_id, task_id, attempt_id)
                continue
            chosen.append(staged)
        targets: dict[PartitionKey, Partition] = {}
        skips: dict[PartitionKey, int] = {}
        for stream_id, topic_id, partition_id, base in plan["partitions"]:
            stream = self.state.streams.get(stream_id)
            topic = stream.topics.get(topic_id) if stream else None
            partition = topic.partitions.get(partition_id) if topic else None
            if partition is None:
                log.warning("commit %s/%d: partition %d/%d/%d is gone; skipped",
                            producer_id, batch_id, stream_id, topic_id, partition_id)
                continue
            key = (stream_id, topic_id, partition_id)
            targets[key] = partition
            skips[key] = max(partition.log.next_offset - base, 0)
        appended = self._apply(chosen, targets, skips)
        log.warning("finished the interrupted commit of producer %s batch %d: %d messages",
                    producer_id, batch_id, appended)
        return targets

    def close(self) -> None:
        if self._cleaner is not None:
            self._cleaner.cancel()
            self._cleaner = None
        for producer in self.producers.values():
            for handles in producer.staged.values():
                for staged in handles.values():
                    staged.close()
        self.journal.close()


def check_staged_records(records: bytearray, positions: bytes | memoryview) -> None:
    """``check_stored_records`` (layout, checksums, SEND's limits), in C for the common case:
    records of one size without headers. ``check_staged_layout`` recognises that layout in
    one C loop and sets the records' offset fields to 0, 1, ... (placeholders, as the
    timestamps: the commit stamps the real ones, ``Log.append_stamped``), so that the
    storage's record scan checks layout, state and checksum of every record at once, without
    the GIL, instead of one Python call per record. Anything else -- or a record the scan
    refuses -- goes through ``check_stored_records``, which raises its error."""
    if _LITTLE_ENDIAN_HOST and check_staged_layout(records, positions):
        count = len(positions) // 4
        scanned = scan_records(records, 0, 0, 0, 0, count, True)
        if scanned.count == count and scanned.end_position == len(records):
            return
    check_stored_records(records, positions)


_LITTLE_ENDIAN_HOST = sys.byteorder == "little"  # staged positions arrive little-endian


def check_not_replicated(partition: Partition, topic: Topic) -> None:
    """Staged appends are one node's: its staging files and commit journal are not replicated,
    a commit does not wait for the ISR, and a replay after a failover could append a batch
    twice. In a cluster they are refused (FeatureUnavailable, nothing staged or appended)."""
    if partition.placement is not None:
        raise errors.FeatureUnavailable(reason=(
            f"staged appends (exactly-once writes) are not replicated yet: "
            f"partition {partition.id} of topic {topic.name} is in a cluster"))


def _forget_room(state: CoreState, stream_id: int, topic_id: int) -> None:
    """A commit grew the topic: its room (``Topic.room_left``) is summed again when next asked."""
    stream = state.streams.get(stream_id)
    topic = stream.topics.get(topic_id) if stream is not None else None
    if topic is not None:
        topic.room = None


def _check_not_full(topic: Topic, adding: int) -> None:
    """TopicFull when ``topic`` is full (``adding`` 0: at or over its max size, as SEND
    checks) or would exceed its max size with ``adding`` more bytes."""
    if topic.max_topic_size == MAX_TOPIC_SIZE_UNLIMITED:
        return
    if topic.room_left(max(adding, 1)) < max(adding, 1):
        raise errors.TopicFull(topic.id, topic.stream_id)
