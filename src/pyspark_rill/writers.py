"""Batch and streaming writers of the ``rill`` sink (Arrow writers: record batches in).

``sinkMode=atLeastOnce`` (default): ``write()`` sends straight to the topic. A retried task or
a replayed micro-batch sends its rows again.

``sinkMode=exactlyOnce``: ``write()`` *stages* its rows on the server (rill extension 1010)
under the handle (producer, batch, task, attempt) and returns the handle and its row count in
the commit message; the driver's ``commit`` makes every successful task's handle visible with
one atomic COMMIT_STAGED_MESSAGES that also records the batch as the producer's last committed
one. So a failed task attempt's rows are never visible (the commit names only the attempt that
succeeded), an aborted job leaves nothing, and a micro-batch replayed after a driver crash is a
no-op on the server. The producer is option ``producerId`` or, for streaming queries, the
query id (stable across restarts: it lives in the checkpoint); a batch job without
``producerId`` uses a fresh random one, and with one is idempotent: running it again with the
same producerId writes nothing the second time.

"Already committed" must only ever mean "this writer's own batch, replayed". So every stage,
commit and abort names the producer's *owner* (rill extension, docs/extensions.md): for a
streaming query ``spark query <query id>`` -- the checkpoint's identity: a restart keeps it, a
fresh checkpoint has a new one, so its batch ids starting again at 0 are never taken for
replays of another query's --, for a batch job ``spark batch job`` (its producerId is the job's
identity). The server refuses another owner's requests once a producer has committed batches
(11002), which fails the query, writing nothing, with a message naming ``producerId``. And a
commit answered "already committed" is only accepted for the producer's *last* committed
batch -- the one Spark replays after a crash between the sink's commit and the checkpoint's --;
an older one means the checkpoint is behind the producer's history (restored, rolled back, or a
producer adopted from before owners), and the next batches would be skipped silently: the
query fails instead.

Where things run: ``write()`` in executor Python workers (on a pickled writer); batch
``commit``/``abort`` on the driver with the planner's writer; a stream writer is rebuilt for
every commit, so everything ``commit`` needs travels in the commit messages.

On a rill cluster ('servers' names an HTTP API, ``leaders.cluster_of``), the at-least-once sink
sends each request to its partition's leader, as the map says (a balanced request is given a
partition here, round-robin from a random one, so that it too goes to its leader): no node
proxies a task's rows to another. A request the leader refuses (a failover: not the leader, no
leader; or too few in-sync replicas to acknowledge it, or not copied in time) or whose link drops is sent again to the leader the map then names, by the reads' rule
(``leaders.Attempts``: waits of 0.2 s doubling to 2 s, the map read again, option
``failoverTimeout``); a request lost with its link may so be stored twice -- at least once.

A lost link (a server restart): the driver's commit and abort are asked again once the client
reconnected (``connection.with_client``: a commit that had landed answers "already committed"
for this very batch, which is accepted); a ``write()`` that loses its link fails its task
attempt with the cause first (``Disconnected: ...``), its staged rows never visible, and Spark
retries the task.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from rill import errors
from rill.client import Client
from rill.protocol.iggy.primitives import Partitioning, PartitioningKind
from rill.protocol.iggy.responses.transactions import CommitOutcome, StageOutcome

from pyspark_rill.arrow_write import WriteSpec, encode_batch
from pyspark_rill.connection import connect, connection_failure, with_client
from pyspark_rill.leaders import RETRIED, ClusterReads, cluster_of
from pyspark_rill.options import RillOptionError, WriteOptions

log = logging.getLogger(__name__)

_IN_FLIGHT = 4  # requests a task keeps in flight
# what makes an at-least-once send to a cluster go again to the leader the map names: the
# reads' causes, and a leader's refusal to acknowledge (too few in-sync replicas, or they did
# not copy it in time: it may be stored, and is then stored twice)
SEND_RETRIED = RETRIED + (errors.NotEnoughReplicas, errors.ReplicationTimedOut)
BATCH_JOB_OWNER = "spark batch job"


class RillSinkError(RuntimeError):
    """The exactly-once sink refuses to go on: the server's history of the producer does not
    fit this query's checkpoint, so going on would lose rows silently."""


def query_owner(query_id: str) -> str:
    """The owner of a streaming query's producer: its query id lives in the checkpoint."""
    return f"spark query {query_id}"


def _not_the_owner(producer_id: str, owner: str) -> RillOptionError:
    return RillOptionError(
        f"option 'producerId': producer {producer_id!r} belongs to another writer (another "
        f"streaming query or checkpoint, or batch jobs): its committed batches would be taken "
        f"for replays of this one's ({owner}) and their rows dropped. Use a new producerId, or "
        "run the query from the checkpoint that wrote them: a producerId belongs to one "
        "checkpoint")


@dataclass
class RillCommitMessage(WriterCommitMessage):
    producer_id: str | None  # None in atLeastOnce mode
    owner: str  # who drives the producer's batch ids ("" in atLeastOnce mode)
    batch_id: int
    run_id: int  # this execution of the batch (see STAGE_MESSAGES in docs/extensions.md)
    task_id: int
    attempt_id: int
    messages: int  # rows sent, or staged under the handle


def new_run_id() -> int:
    return secrets.randbits(63) | 1  # never 0, which means "no run"


def _write(options: WriteOptions, spec: WriteSpec, batches: Iterator[pa.RecordBatch],
           producer_id: str | None, owner: str, batch_id: int,
           run_id: int) -> RillCommitMessage:
    context = TaskContext.get()
    task_id = context.partitionId() if context is not None else 0
    attempt_id = secrets.randbits(63)
    client = connect(options.connection)
    counts: dict[tuple[str, str], int] = {}

    def partitions_count(stream: str, topic: str) -> int:
        if (stream, topic) not in counts:
            details = client.get_topic(stream, topic)
            if details is None:
                raise missing_topic(stream, topic)
            counts[stream, topic] = max(details.topic.partitions_count, 1)
        return counts[stream, topic]

    in_flight: deque = deque()
    staged = 0
    done = False  # the batch was committed before, or this run aborted: nothing to stage
    api = client.async_client
    leaders = _Leaders(cluster, partitions_count) if (
        producer_id is None and (cluster := cluster_of(options.connection)) is not None) else None
    try:
        for batch in batches:
            if done:
                continue
            for request in encode_batch(batch, spec, options, partitions_count,
                                        options.max_request_bytes, stored=producer_id is not None):
                if leaders is not None:
                    in_flight.append((request.count, leaders.send(request)))
                elif producer_id is None:
                    call = api.send_messages_raw(request.stream, request.topic,
                                                 request.partitioning, request.region)
                    in_flight.append((request.count, client.submit(call)))
                else:
                    call = api.stage_messages(producer_id, batch_id, task_id, attempt_id,
                                              request.stream, request.topic,
                                              (request.positions, request.region),
                                              request.partitioning, run_id, owner)
                    in_flight.append((request.count, client.submit(call)))
                while len(in_flight) >= _IN_FLIGHT:
                    staged, done = _settle(in_flight, staged, done)
        while in_flight:
            staged, done = _settle(in_flight, staged, done)
    except errors.ProducerOwnerMismatch:  # nothing more can be staged or dropped: not ours
        _wait_for(in_flight)
        raise _not_the_owner(str(producer_id), owner) from None
    except BaseException as error:
        if producer_id is not None:  # this attempt failed: drop what it staged, best effort
            _drop_attempt(client, in_flight, producer_id, owner, batch_id, task_id, attempt_id)
        if isinstance(error, (errors.Disconnected, errors.CannotEstablishConnection)):
            raise connection_failure(type(error), (
                f"the connection to {options.connection.servers} was lost while writing "
                f"({error}); this task attempt's rows are "
                f"{'not committed' if producer_id else 'partly sent'}, and Spark may retry the "
                "task"))
        raise
    return RillCommitMessage(producer_id, owner, batch_id, run_id, task_id, attempt_id, staged)


class _Leaders:
    """A task's at-least-once sends to a rill cluster: each request to its partition's leader
    (see the module doc), settled through ``_Sent``."""

    def __init__(self, cluster: ClusterReads, partitions_count) -> None:
        self.cluster = cluster
        self.partitions_count = partitions_count
        self.next_balanced: dict[tuple[str, str], int] = {}

    def partition(self, request) -> int:
        if request.partitioning.kind == PartitioningKind.PARTITION_ID:
            return int.from_bytes(request.partitioning.value, "little")
        key = (request.stream, request.topic)
        count = self.partitions_count(*key)
        chosen = self.next_balanced.get(key)
        if chosen is None:
            chosen = secrets.randbelow(count)
        self.next_balanced[key] = chosen + 1
        return chosen % count + 1

    def send(self, request) -> _Sent:
        partition = self.partition(request)
        sent = _Sent(self.cluster, request, partition)
        try:
            sent.address, leader = self.cluster.leader(request.stream, request.topic, partition)
            sent.future = leader.submit(leader.async_client.send_messages_raw(
                request.stream, request.topic, Partitioning.partition_id(partition),
                request.region))
        except SEND_RETRIED as error:  # no leader now, or it cannot be reached: the rule
            sent.failure = error
        return sent


class _Sent:
    """One request sent to a leader: ``result()`` waits for its answer and, after a refusal or
    a lost link, sends it again to the leader the map then names (``leaders.Attempts``)."""

    def __init__(self, cluster: ClusterReads, request, partition: int) -> None:
        self.cluster, self.request, self.partition = cluster, request, partition
        self.address: str | None = None
        self.future = None
        self.failure: BaseException | None = None

    def result(self) -> None:
        error = self.failure
        if error is None:
            try:
                return self.future.result()
            except SEND_RETRIED as failed:
                error = failed
        request = self.request
        attempts = self.cluster.attempts(
            f"{request.stream}/{request.topic} partition {self.partition}")
        attempts.address = self.address
        while True:
            attempts.failed(error)  # drops a lost link, waits, reads the map again (or gives up)
            try:
                attempts.address, leader = self.cluster.leader(request.stream, request.topic,
                                                              self.partition)
                return leader.submit(leader.async_client.send_messages_raw(
                    request.stream, request.topic, Partitioning.partition_id(self.partition),
                    request.region)).result()
            except SEND_RETRIED as failed:
                error = failed


def missing_topic(stream: str, topic: str) -> RillOptionError:
    return RillOptionError(f"topic {topic!r} of stream {stream!r} does not exist (named by option "
                           "or column 'stream'/'topic')")


EXACTLY_ONCE_ON_A_CLUSTER = (
    "option 'sinkMode': exactlyOnce is not supported on a rill cluster yet (its staged appends "
    "are kept by the node that takes them, not replicated, and would not survive a failover); "
    "use sinkMode=atLeastOnce (its sends go to each partition's leader and are "
    "replicated), or a "
    "standalone rill server")


def check_not_a_cluster(options: WriteOptions) -> None:
    """The exactly-once sink refuses a rill cluster (known by an HTTP API in 'servers')."""
    if options.exactly_once and cluster_of(options.connection) is not None:
        raise RillOptionError(EXACTLY_ONCE_ON_A_CLUSTER)


def check_target(options: WriteOptions) -> None:
    """The topic named by options 'stream' and 'topic' exists (checked on the driver)."""
    if with_client(options.connection,
                   lambda client: client.get_topic(options.stream, options.topic)) is None:
        raise missing_topic(str(options.stream), str(options.topic))


def _drop_attempt(client: Client, in_flight: deque, producer_id: str, owner: str,
                  batch_id: int, task_id: int, attempt_id: int) -> None:
    """Let the attempt's requests land, then drop its handle, so that an aborted job leaves
    nothing behind even when the driver's abort ran before this attempt's last stage."""
    _wait_for(in_flight)
    try:
        client.abort_staged_messages(producer_id, batch_id, task_id=task_id,
                                     attempt_id=attempt_id, owner=owner)
    except Exception as error:  # noqa: BLE001 - the commit drops unnamed handles anyway
        log.warning("rill sink: cannot drop the staged rows of a failed attempt: %s", error)


def _wait_for(in_flight: deque) -> None:
    """Let a failing attempt's requests land (their outcomes no longer matter)."""
    for _, future in in_flight:
        try:
            future.result()
        except Exception:  # noqa: BLE001 - the attempt is failing anyway
            pass


def _settle(in_flight: deque, sent: int, done: bool) -> tuple[int, bool]:
    count, future = in_flight.popleft()
    result = future.result()
    if result is not None and result.outcome != StageOutcome.STAGED:
        return sent, True  # already committed (a replay) or this run was aborted
    return sent + count, done


def _commit(client: Client, producer_id: str, owner: str, batch_id: int,
            messages: list[RillCommitMessage | None]) -> None:
    handles = [(m.task_id, m.attempt_id, m.messages) for m in messages if m is not None]
    try:
        result = client.commit_staged_messages(producer_id, batch_id, handles, owner)
    except errors.ProducerOwnerMismatch:
        raise _not_the_owner(producer_id, owner) from None
    if result.outcome == CommitOutcome.ALREADY_COMMITTED:
        last = client.get_producer_state(producer_id).last_batch
        if last != batch_id:  # not the replay of the last batch after a crash
            raise RillSinkError(
                f"producer {producer_id!r}: batch {batch_id} was already committed, but the "
                f"producer's last committed batch is {last}, so this is not the replay of a "
                f"batch after a crash: this writer ({owner}) is behind the producer's history "
                "(a checkpoint restored or rolled back, or another writer's producerId) and "
                "its next batches would be skipped as replays; refusing. Use a new checkpoint "
                "and a new producerId")
    log.info("rill sink: producer %s batch %d: %s, %d messages", producer_id, batch_id,
             result.outcome.name.lower(), result.messages_count)


def _abort(client: Client, producer_id: str, owner: str, batch_id: int, run_id: int) -> None:
    try:
        client.abort_staged_messages(producer_id, batch_id, run_id, owner=owner)
    except errors.ProducerOwnerMismatch:  # nothing of ours to abort: the producer is not ours
        log.warning("rill sink: not aborting batch %d of producer %s: it belongs to another "
                    "query or checkpoint", batch_id, producer_id)


class RillBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions, spec: WriteSpec) -> None:
        self.options = options
        self.spec = spec
        self.producer_id = (options.producer_id or f"spark-batch-{uuid.uuid4()}"
                            if options.exactly_once else None)
        self.owner = BATCH_JOB_OWNER if options.exactly_once else ""
        self.run_id = new_run_id()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RillCommitMessage:
        return _write(self.options, self.spec, iterator, self.producer_id, self.owner, 0,
                      self.run_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.producer_id is not None:
            with_client(self.options.connection, lambda client: _commit(
                client, self.producer_id, self.owner, 0, messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.producer_id is not None:
            with_client(self.options.connection, lambda client: _abort(
                client, self.producer_id, self.owner, 0, self.run_id))
        else:
            log.warning("rill sink (atLeastOnce): the job failed; rows already sent stay")


class RillStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions, spec: WriteSpec) -> None:
        self.options = options
        self.spec = spec
        self.run_id = new_run_id()  # Spark builds a stream writer for each micro-batch run

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RillCommitMessage:
        context = TaskContext.get()
        batch_id = int(context.getLocalProperty("streaming.sql.batchId") or 0)
        producer_id, owner = None, ""
        if self.options.exactly_once:
            query_id = context.getLocalProperty("sql.streaming.queryId")
            if not query_id:
                raise RillSinkError("the exactly-once sink needs the streaming query's id "
                                    "(Spark's local property sql.streaming.queryId); none found")
            producer_id, owner = self.options.producer_id or query_id, query_owner(query_id)
        return _write(self.options, self.spec, iterator, producer_id, owner, batch_id,
                      self.run_id)

    @staticmethod
    def _first(messages: list[WriterCommitMessage | None]) -> RillCommitMessage | None:
        """The first message of a staged append: it names producer, owner and run (the
        driver's commit and abort know them from the messages only). None in atLeastOnce mode,
        and when no task reported: then nothing was staged that a commit could name, and an
        abort that cannot name its owner and run could only drop other writers' handles."""
        return next((m for m in messages if isinstance(m, RillCommitMessage) and m.producer_id),
                    None)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        first = self._first(messages)
        if first is not None:
            with_client(self.options.connection, lambda client: _commit(
                client, first.producer_id, first.owner, batchId, messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        first = self._first(messages)
        if first is not None:
            with_client(self.options.connection, lambda client: _abort(
                client, first.producer_id, first.owner, batchId, first.run_id))
