"""Kafka's idempotent producers (kafka-notes §5): InitProducerId and the sequence rule of Produce.

Owns: the producer ids handed out, the per (producer, partition) sequence state and its rule,
and the idempotent append (``append``: the check and the append under one lock per
partition, so two produces of one partition never both pass the check).

* **InitProducerId** 0-4: a producer id from ``broker.new_id`` (durable: reserved in blocks in
  the metadata store, on disk before one is handed out, never reused after a restart or a
  crash), epoch 0. v3+ with the client's current id and epoch (KIP-360, an idempotent producer
  bumping its epoch after an error): the same id at epoch + 1 (a new id at epoch 0 when the epoch
  would reach 32767); an id this server never handed out is INVALID_PRODUCER_ID_MAPPING (49),
  an epoch below one already bumped past is PRODUCER_FENCED (90; INVALID_PRODUCER_EPOCH 47
  before v4), one of id and epoch without the other INVALID_REQUEST (42). A ``transactional_id``
  is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53): transactions are not served (clients report it
  as a fatal authorization error instead of retrying), as Produce answers a transactional batch.
* **Produce**, for a batch carrying a producer id (>= 0), per
  (producer id, partition) the last ``KEPT_BATCHES`` (5, Kafka's in-flight limit) batches'
  epoch, first/last sequence and base offset are kept. A batch is then:
    - a **duplicate** (same epoch, same first and last sequence as a kept batch): answered NONE
      with the kept batch's ORIGINAL base offset, nothing written (Kafka's answer to a retry);
    - **accepted** when its first sequence follows the producer's last one (int32, wrapping to
      0), or is 0 with a newer epoch, or when the partition holds no state for the producer
      (the choice: Kafka 2.5+'s rule, KIP-360, rather than UNKNOWN_PRODUCER_ID 59: a producer
      whose batches are older than the rebuild window or gone with retention goes on at any
      sequence, as with a Kafka broker that lost its state; a new producer's first batch has
      sequence 0 anyway);
    - refused, nothing written: an older epoch INVALID_PRODUCER_EPOCH (47); a newer epoch not
      starting at sequence 0, or any other sequence, OUT_OF_ORDER_SEQUENCE_NUMBER (45).
  A ``records`` field of several batches carrying a producer id is INVALID_RECORD (87): Kafka
  takes one batch per partition from v3 on. Batches without a producer id are appended as they
  are, without the lock. The work is per batch (its header), never per record.
* **Iggy-format topics** (``iggy-v1``, written through conversion: ``data``): the same rule,
  the same state, while the server runs; the stored records keep no producer fields, so after
  a restart such a partition holds no state and a producer goes on at any sequence (the rule
  for an unknown producer above): a batch retried across a restart may be stored twice.
* **Restarts**: a partition's state is rebuilt, on its first idempotent produce, from the
  producer fields of the stored batch headers (``kafka_records.producer_batches``) of its newest
  ``REBUILD_OFFSETS`` (100,000) offsets, read on the event loop, headers only, so a batch written
  before a crash but never acknowledged is recognised when the client retries it. Nothing else
  is stored (no snapshot file).
* **In a cluster** (the partition has a placement): the state is the leader's, rebuilt from
  the log itself (``PartitionProducers.rebuild_from_log``: the stored batch headers of its
  newest ``REBUILD_OFFSETS`` offsets up to the log end, committed or not, so that a batch a
  former leader replicated but never acknowledged is recognised when the client retries it
  here) whenever the partition's leader epoch differs from the one the state was built at:
  a node that becomes leader (failover, or leadership coming back after an election) starts
  from the replicated batches, never from what it knew in an older term. The replication
  layer may also call ``became_leader`` when this node takes a partition over, to rebuild
  at once instead of on the first idempotent produce. The state takes a batch as the log
  takes it (with the append, no await between), and acks=-1 waits for the ISR outside the
  partition's lock (up to 5 batches in flight, as Kafka's clients send), so a batch whose
  wait timed out (REQUEST_TIMED_OUT) and is retried is a duplicate: answered its original
  base offset once the ISR holds it.
* Memory: at most ``MAX_PRODUCERS`` (10,000) producers per partition, the one that wrote there
  least recently forgotten first (it is then unknown: any sequence goes on, as above), instead of
  Kafka's expiry by time (producer.id.expiration.ms).
* Known limits: a duplicate is recognised by its sequences, not its bytes; an append that fails
  after its bytes reached the log (a write error) leaves the state without it until the next
  restart rebuilds it; the rebuild reads the partition with the producing session's rights.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import deque
from typing import Any, Callable

from rill import errors
from rill.protocol.kafka import ErrorCode, apis, response_class
from rill.server.core.broker import PartitionRef
from rill.server.core.cluster_view import ACKS_ALL, ACKS_LEADER
from rill.server.core.core import Core
from rill.server.core.types import AppendResult, Partition, Session, Topic
from rill.server.protocols.kafka.common import RECORD_FORMAT, KafkaSettings, kafka_error
from rill.server.storage.formats.kafka_v2 import producer_batches

log = logging.getLogger(__name__)

ID_NAME = "kafka-producer-id"  # the name of the producer ids in ``broker.new_id``
KEPT_BATCHES = 5
MAX_PRODUCERS = 10_000  # per partition; beyond, the one that wrote least recently is forgotten
REBUILD_OFFSETS = 100_000
_REBUILD_READ_BYTES = 4 << 20
_MAX_RECORDS = 1 << 31
_SEQUENCE_LIMIT = 1 << 31  # sequences are int32 >= 0 and wrap to 0
_EPOCH_LIMIT = 32767  # int16; an epoch that would reach it gets a new producer id instead


class ProducerRefused(Exception):
    """A batch the sequence rule refuses (``code``); nothing was written."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def last_sequence(first: int, last_offset_delta: int) -> int:
    return (first + last_offset_delta) % _SEQUENCE_LIMIT


class _Producer:
    """One producer's state in one partition: its epoch and its newest batches
    ``(first sequence, last sequence, base offset)``."""

    __slots__ = ("epoch", "batches")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[tuple[int, int, int]] = deque(maxlen=KEPT_BATCHES)


def check(producer: _Producer | None, epoch: int, first: int, last: int
          ) -> tuple[ErrorCode, int | None]:
    """The rule (module docstring): ``(NONE, None)`` to append, ``(NONE, base offset)`` for a
    duplicate, ``(code, None)`` to refuse."""
    if producer is None:
        return ErrorCode.NONE, None
    if epoch < producer.epoch:
        return ErrorCode.INVALID_PRODUCER_EPOCH, None
    if epoch > producer.epoch:
        return (ErrorCode.NONE if first == 0 else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), None
    for kept_first, kept_last, base_offset in producer.batches:
        if kept_first == first and kept_last == last:
            return ErrorCode.NONE, base_offset
    if not producer.batches or first == (producer.batches[-1][1] + 1) % _SEQUENCE_LIMIT:
        return ErrorCode.NONE, None
    return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None


class PartitionProducers:
    """The producers' state of one partition, and the lock its idempotent appends take."""

    __slots__ = ("lock", "producers", "loaded", "epoch")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.producers: dict[int, _Producer] = {}
        self.loaded = False
        self.epoch = -1  # the leader epoch of the cluster's placement it was built at

    def record(self, producer_id: int, epoch: int, first: int, last: int, base_offset: int
               ) -> None:
        """A batch is in the log (appended now, or found by the rebuild)."""
        producers = self.producers
        producer = producers.pop(producer_id, None)  # re-inserted last: the most recent
        if producer is None or epoch > producer.epoch:
            producer = _Producer(epoch)
        elif epoch < producer.epoch:
            producers[producer_id] = producer
            return
        producers[producer_id] = producer
        producer.batches.append((first, last, base_offset))
        if len(producers) > MAX_PRODUCERS:
            del producers[next(iter(producers))]  # the one that wrote here least recently

    def _record_stored(self, read: Callable[[int], tuple[int, bytes]], offset: int,
                       end: int) -> None:
        """Record the producers' batches stored from ``offset`` to ``end`` (``read(offset)``:
        how many records and their stored bytes)."""
        while offset < end:
            count, data = read(offset)
            if not count:
                break
            batches = producer_batches(data)
            if not batches:
                break
            for base_offset, delta, producer_id, epoch, first in batches:
                if producer_id >= 0:
                    self.record(producer_id, epoch, first, last_sequence(first, delta),
                                base_offset)
            offset = max(offset + 1, batches[-1][0] + batches[-1][1] + 1)

    def rebuild(self, core: Core, session: Session, ref: PartitionRef) -> None:
        """The state from the stored batch headers of the newest ``REBUILD_OFFSETS`` offsets."""
        broker = core.broker
        bounds = broker.bounds(session, ref)

        def read(offset: int) -> tuple[int, bytes]:
            found = broker.read(session, ref, offset, _MAX_RECORDS, _REBUILD_READ_BYTES)
            return found.count, found.data

        self._record_stored(read, max(bounds.first_offset,
                                      bounds.high_watermark - REBUILD_OFFSETS),
                            bounds.high_watermark)
        self.loaded = True

    def rebuild_from_log(self, partition: Partition) -> None:
        """In a cluster: the state from the partition's own log, its newest ``REBUILD_OFFSETS``
        offsets up to the log end (above the high watermark too: what a former leader copied
        here), everything known before forgotten; built at the placement's leader epoch."""
        self.producers.clear()
        log = partition.log

        def read(offset: int) -> tuple[int, bytes]:
            count, chunks = log.read(offset, _MAX_RECORDS, _REBUILD_READ_BYTES)
            return count, b"".join(bytes(chunk) for chunk in chunks)  # type: ignore[arg-type]

        end = log.next_offset
        self._record_stored(read, max(log.first_offset, end - REBUILD_OFFSETS), end)
        placement = partition.placement
        self.epoch = placement.leader_epoch if placement is not None else -1
        self.loaded = True


class Producers:
    """One server's idempotence state: per partition, and the epochs InitProducerId bumped."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[int, int, int, int], PartitionProducers] = {}
        self.epochs: dict[int, int] = {}  # producer id -> the epoch last handed out (bumps)

    def partition(self, topic: Topic, partition: int) -> PartitionProducers:
        # a topic deleted and created again under its name is another key (its creation time)
        key = (topic.stream_id, topic.id, topic.created_at, partition)
        found = self.partitions.get(key)
        if found is None:
            found = self.partitions[key] = PartitionProducers()
        return found


_PRODUCERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def producers(core: Core) -> Producers:
    found = _PRODUCERS.get(core)
    if found is None:
        found = _PRODUCERS[core] = Producers()
    return found


def became_leader(core: Core, topic: Topic, partition_id: int) -> None:
    """This node now leads ``topic``'s partition ``partition_id`` (1..N): rebuild its
    producers' state from the replicated batches in its log now (else the first idempotent
    produce does, seeing the new leader epoch). For the replication layer."""
    partition = topic.partitions.get(partition_id)
    if partition is not None and topic.record_format == RECORD_FORMAT:
        producers(core).partition(topic, partition_id - 1).rebuild_from_log(partition)


async def append(core: Core, session: Session, topic: Topic, ref: PartitionRef,
                 records: bytes | memoryview, timestamp_us: int, acks: int = ACKS_LEADER,
                 ack_timeout: float = 30.0) -> int:
    """Append a produced ``records`` field under the sequence rule; the base offset to answer
    (a duplicate's original one). ``acks``/``ack_timeout``: ``broker.append``'s (a cluster's
    acks=all). Raises ProducerRefused, or what ``broker.append`` raises."""
    batches = producer_batches(records)
    if not batches or all(batch[2] < 0 for batch in batches):
        return (await core.broker.append(session, ref, records, timestamp_us,
                                         record_format=RECORD_FORMAT, acks=acks,
                                         ack_timeout=ack_timeout)).first_offset
    if len(batches) > 1:
        raise ProducerRefused(ErrorCode.INVALID_RECORD,
                              "an idempotent produce carries one batch per partition")
    _, delta, producer_id, epoch, first = batches[0]
    last = last_sequence(first, delta) if first >= 0 else first
    state = producers(core).partition(topic, ref.partition_id - 1)
    partition = topic.partitions.get(ref.partition_id)
    if partition is not None and partition.placement is not None:
        return await _replicated_append(core, session, topic, partition, state, ref, records,
                                        timestamp_us, acks, ack_timeout,
                                        (producer_id, epoch, first, last, delta))
    async with state.lock:
        if not state.loaded:
            if topic.record_format == RECORD_FORMAT:
                state.rebuild(core, session, ref)
            else:  # an Iggy-format topic keeps no producer fields: nothing to rebuild from
                state.loaded = True
        code, duplicate_of = check(state.producers.get(producer_id), epoch, first, last)
        if code != ErrorCode.NONE:
            raise ProducerRefused(code, f"producer {producer_id} epoch {epoch}: sequences "
                                        f"{first}..{last} refused ({code.name})")
        if duplicate_of is not None:
            return duplicate_of
        result: AppendResult = await core.broker.append(session, ref, records, timestamp_us,
                                                        record_format=RECORD_FORMAT)
        state.record(producer_id, epoch, first, last, result.first_offset)
        return result.first_offset


async def _replicated_append(core: Core, session: Session, topic: Topic,
                             partition: Partition, state: PartitionProducers, ref: PartitionRef,
                             records: bytes | memoryview, timestamp_us: int, acks: int,
                             ack_timeout: float, batch: tuple[int, int, int, int, int]) -> int:
    """The idempotent append on a partition of a cluster (module docstring): the state is
    the current leader term's, taken with the log's append; acks=all waits after the lock."""
    producer_id, epoch, first, last, delta = batch
    broker = core.broker
    async with state.lock:
        placement = partition.placement
        cluster = broker.cluster
        if placement is not None and cluster is not None and placement.leader != cluster.node_id:
            if placement.leader is None:  # (what the broker's append refuses, before a
                raise errors.LeaderNotAvailable(partition.id, topic.name)  # duplicate's answer)
            raise errors.NotLeaderForPartition(partition.id, topic.name, placement.leader)
        if (not state.loaded or placement is None or state.epoch != placement.leader_epoch):
            if topic.record_format == RECORD_FORMAT:
                state.rebuild_from_log(partition)
            else:
                state.producers.clear()
                state.loaded, state.epoch = True, placement.leader_epoch if placement else -1
        code, duplicate_of = check(state.producers.get(producer_id), epoch, first, last)
        if code != ErrorCode.NONE:
            raise ProducerRefused(code, f"producer {producer_id} epoch {epoch}: sequences "
                                        f"{first}..{last} refused ({code.name})")
        if duplicate_of is None:
            if acks == ACKS_ALL and placement is not None and (
                    len(placement.isr) < placement.min_isr):  # refused before writing
                raise errors.NotEnoughReplicas(len(placement.isr), placement.min_isr)

            def admit(chosen: Partition, region: Any) -> tuple[Any, Any]:
                base = chosen.log.next_offset
                return region, lambda: state.record(producer_id, epoch, first, last, base)

            converting = topic.record_format != RECORD_FORMAT  # (admission unused then)
            result: AppendResult = await broker.append(
                session, ref, records, timestamp_us, record_format=RECORD_FORMAT,
                admit=None if converting else admit)
            if converting:
                state.record(producer_id, epoch, first, last, result.first_offset)
            base_offset, last_offset = result.first_offset, result.last_offset
        else:
            base_offset, last_offset = duplicate_of, duplicate_of + delta
    if acks == ACKS_ALL and cluster is not None and partition.high_watermark <= last_offset:
        await cluster.replicated(partition, last_offset, ack_timeout)
    return base_offset


# -- InitProducerId (22) ---------------------------------------------------------------------

_InitProducerId = response_class(apis.INIT_PRODUCER_ID)


def _refused(code: ErrorCode) -> Any:
    return _InitProducerId(throttle_time_ms=0, error_code=int(code), producer_id=-1,
                           producer_epoch=-1)


async def init_producer_id(core: Core, session: Session, settings: KafkaSettings, request
                           ) -> Any:
    body = request.body
    if body.transactional_id is not None:
        return _refused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    state = producers(core)
    producer_id, epoch = -1, -1
    if request.api_version >= 3:
        producer_id, epoch = body.producer_id, body.producer_epoch
    if (producer_id < 0) != (epoch < 0):
        return _refused(ErrorCode.INVALID_REQUEST)
    try:
        if producer_id >= 0:
            if not core.broker.id_handed_out(ID_NAME, producer_id):
                return _refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            known = state.epochs.get(producer_id, -1)
            if epoch < known:
                return _refused(ErrorCode.PRODUCER_FENCED if request.api_version >= 4
                                else ErrorCode.INVALID_PRODUCER_EPOCH)
            if epoch + 1 < _EPOCH_LIMIT:
                state.epochs[producer_id] = epoch + 1
                return _InitProducerId(throttle_time_ms=0, error_code=0,
                                       producer_id=producer_id, producer_epoch=epoch + 1)
        producer_id = await core.broker.new_id(session, ID_NAME)
    except errors.RillError as error:
        code = kafka_error(error, cluster=True)
        log.warning("InitProducerId (producer %d epoch %d) refused with %s: %s", producer_id,
                    epoch, code.name, error)  # rare; a client may retry it for ever
        return _refused(code)
    return _InitProducerId(throttle_time_ms=0, error_code=0, producer_id=producer_id,
                           producer_epoch=0)
