"""Kafka's data APIs on the neutral broker: Produce, Fetch, ListOffsets and, in a cluster,
OffsetForLeaderEpoch (kafka-notes §2.4, §3, §9).

Owns: these rules (the versions served are ``RANGES``):

* a partition is Kafka partition N of a topic of the ``[kafka] stream`` namespace; an unknown
  topic or partition is UNKNOWN_TOPIC_OR_PARTITION (3) and nothing is written. A topic of
  another record format (an Iggy ``iggy-v1`` topic, e.g. created by an Iggy client in that
  stream) is served to Fetch and ListOffsets converted into uncompressed RecordBatch v2, per
  record (``storage.formats.conversion``: key = the ``rill.key`` header, typed headers as raw
  bytes, timestamps µs // 1000), and a Produce to it is converted on the way in, one Iggy
  record per Kafka record by the same rule backwards (``broker.append(record_format=
  "kafka-v2")``: the batch checked as a kafka-v2 topic checks it, CRC-32C included, before
  anything is written; a null or empty value is INVALID_RECORD 87; the idempotence rule
  applies; one log, every protocol: docs/kafka.md);
* **Produce** 0-9 (Produce 0 for librdkafka, KAFKA-18659; v0-2 the seed's dialect): the records
  bytes are checked and repaired as Kafka's broker does (``kafka_records.check_produced``:
  every record walked, maxTimestamp recomputed, a producer's LogAppendTime refused) and go to
  ``broker.append`` (the ``kafka-v2`` format stores them; its ``InvalidRecordBatch`` is
  CORRUPT_MESSAGE 2, INVALID_RECORD 87 or INVALID_TIMESTAMP 32), stamped at the batch's
  maxTimestamp so the time index is CreateTime's. v0-2 carry
  either magic 2 batches (kafka-python/aiokafka when they guess an old broker: stored like
  v3's) or the seed's legacy MessageSet (magic 0/1): that one is converted into one
  uncompressed RecordBatch v2 (``rill.protocol.kafka.message_sets``: every CRC-32 checked,
  wrappers decompressed; a bad one is CORRUPT_MESSAGE (2), one inflating past 64 MiB
  MESSAGE_TOO_LARGE (10), and nothing is written) and appended
  the same way; a set with magic 0 messages (no timestamps) is stamped LogAppendTime at the
  broker's clock, which ``log_append_time_ms`` (v2) then returns. ``base_offset`` is the first
  offset given, ``log_append_time_ms`` otherwise -1 (CreateTime),
  ``log_start_offset`` the partition's first offset. acks=1/-1 answer once ``broker.append``
  returns (as durable as the fsync policy promises). acks=0: no response at all
  (``handler``); when one of its partitions failed the connection is closed instead, as Kafka
  does, so the client learns of it. A batch carrying a producer id goes through the
  idempotence rule (``producers``: a retried batch answers its original base offset, gaps and
  fenced epochs their errors); a transactional produce is
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53);
* **Fetch** 0-12: per partition the stored batches from the fetch offset (whole batches,
  from the one holding it) up to the high watermark, at most ``partition_max_bytes`` and what
  is left of the request's ``max_bytes`` (the first partition with data always gets at least
  one whole batch, however large, as Kafka does; later ones get nothing once the budget is
  spent); an offset below the log start or above the high watermark is OFFSET_OUT_OF_RANGE (1),
  but NOT_LEADER_OR_FOLLOWER (6) from a cluster node not sure it still holds its member lease
  (``Broker.leadership_certain``: a leader cut off may be answering from a log the new leader
  has passed, and a client told "out of range" resets its position).
  high_watermark = last_stable_offset = the log end; log_start_offset; aborted transactions
  empty; no fetch sessions (session id 0, v7+). Fetch v0-3 (the seed's dialect) read the same
  way, then each partition's batches are down-converted (``message_sets``) to a MessageSet of
  magic 0 (v0-1) or 1 (v2-3, with timestamps): whole messages from the fetch offset within
  the same budgets, the first partition with data getting at least one message; this
  per-record work is only on v0-3. Zero-copy (``[kafka] sendfile``, plain TCP: the session
  ``sends_files``): Fetch v4+ asks the read for file regions, so large verified ranges of a
  kafka-v2 topic's batches go from the log file to the socket by sendfile; a partition's
  records are then its chunks (bytes and regions) as read, never joined (the codec writes a
  list of parts); converted reads and v0-3 stay bytes; regions read again by a long poll are
  closed, the others are the link's to send or close. Long poll: when the partitions hold
  fewer than ``min_bytes`` and nothing failed, ``broker.wait`` (woken by appends) until they
  do or ``max_wait_ms`` passes, then one more read;
* **ListOffsets** 0 (the seed's Offsets API, ``old_style_offsets``, at most
  ``max_num_offsets``, descending): -1 -> (high watermark, log start), -2 -> (log start),
  a time -> (the first offset whose record is at or after it, the high watermark when none
  is, then the log start when lower): exact to the record where 0.8 gave segment starts;
* **in a cluster** (``Broker.cluster``): Produce's ``acks`` (-1 all, 1 leader, 0 none) and
  ``timeout_ms`` go to ``broker.append`` as ``acks``/``ack_timeout``: acks=-1 answers once
  every in-sync replica holds the batch; the broker's refusals map (``common.kafka_error``):
  a partition this node does not lead NOT_LEADER_OR_FOLLOWER (6), one with no leader
  LEADER_NOT_AVAILABLE (5), acks=-1 with the ISR below its minimum NOT_ENOUGH_REPLICAS (19,
  nothing written), the ISR not reached in ``timeout_ms`` REQUEST_TIMED_OUT (7: written on
  the leader, may still commit). Fetch and ListOffsets on a non-leader are 6 too, and their
  ``current_leader_epoch`` (Fetch v9+, ListOffsets v4+; -1 none) older than the placement's
  is FENCED_LEADER_EPOCH (74), newer UNKNOWN_LEADER_EPOCH (75). Reads stop at the high
  watermark (the broker's); ListOffsets v4+ answers the placement's leader epoch;
* **OffsetForLeaderEpoch** 2-4 (KIP-101/279/320; served and advertised only in a cluster,
  ``dispatch.CLUSTER_ONLY``): per partition, for the asked ``leader_epoch``, the largest
  epoch at or below it in the log and where it ends (the first offset of the next epoch, the
  log end for the current one: the partition's leader epoch, whose start is the log end when it
  has no record yet); an epoch above the current one, or -1, is (-1, -1); one below every
  stored record's is (it, the log start). ``current_leader_epoch`` is checked as Fetch's, and
  a follower answers NOT_LEADER_OR_FOLLOWER; consumers (replica id -1) only: the replication
  of rill's own nodes is the peer protocol;
* **ListOffsets** 1-7: -2 earliest (log start), -1 latest (high watermark), -3 max timestamp
  (v7: the first record carrying the partition's largest timestamp), t >= 0 the first record
  whose timestamp is >= t, exact to the record for every codec (``broker.record_at_or_after``:
  the storage finds the batch and opens it); none -> offset -1, timestamp -1. Leader epoch 0,
  as Metadata (standalone).
"""

from __future__ import annotations

import time
from typing import Any

from rill import errors
from rill.protocol.kafka import ErrorCode, apis, message_sets, response_class
from rill.server.core.broker import PartitionRef
from rill.server.core.core import Core
from rill.server.core.types import Session, Topic
from rill.server.protocols.kafka import producers
from rill.server.protocols.kafka.common import (
    RECORD_FORMAT,
    KafkaSettings,
    epoch_error,
    kafka_error,
    kafka_topics,
    partition_of,
)
from rill.server.storage.file_region import FileRegion
from rill.server.storage.formats.kafka_v2 import InvalidRecordBatch, batch_time_us, check_produced

# the versions served: Produce 0-9, Fetch 0-12, ListOffsets 0-7 (Produce 0-2 with legacy
# MessageSets, Fetch 0-3 down-converted, ListOffsets 0: the seed's dialect,
# ``rill.protocol.kafka.message_sets``)
RANGES: dict[int, tuple[int, int]] = {
    apis.PRODUCE: (0, 9),
    apis.FETCH: (0, 12),
    apis.LIST_OFFSETS: (0, 7),
    apis.OFFSET_FOR_LEADER_EPOCH: (2, 4),  # in a cluster only (``dispatch.CLUSTER_ONLY``)
}

LEADER_EPOCH = 0
_EARLIEST, _LATEST, _MAX_TIMESTAMP = -2, -1, -3
_MAX_RECORDS = 1 << 31
_MAX_WAIT_MS = 60_000


def _partition_error(topics: dict[str, Topic], name: str | None, index: int,
                     current_leader_epoch: int = -1) -> ErrorCode:
    """Why (topic, partition) cannot be served, or NONE. A topic of another record format is
    read and written converted (``broker.read``, ``broker.append``). In a cluster, the
    request's ``current_leader_epoch`` against the partition's (``common.epoch_error``),
    before whether this node leads it (the broker's refusal: NOT_LEADER_OR_FOLLOWER)."""
    topic = topics.get(name) if name is not None else None
    if topic is None or not 0 <= index < len(topic.partitions):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return epoch_error(partition_of(topics, name, index), current_leader_epoch)


def _data_error(error: Exception) -> ErrorCode:
    if isinstance(error, InvalidRecordBatch):
        if error.timestamp:
            return ErrorCode.INVALID_TIMESTAMP
        return ErrorCode.CORRUPT_MESSAGE if error.corrupt else ErrorCode.INVALID_RECORD
    if isinstance(error, (errors.CannotSaveMessagesToSegment, errors.CannotSyncFile,
                          errors.CannotCreateSegmentLogFile,
                          errors.CannotCreateSegmentIndexFile)):
        return ErrorCode.KAFKA_STORAGE_ERROR
    if isinstance(error, errors.TopicFull):
        return ErrorCode.POLICY_VIOLATION
    return kafka_error(error)


# -- Produce (0) -----------------------------------------------------------------------------

_Produce = response_class(apis.PRODUCE)
_ProducePartition = _Produce.TopicProduceResponse.PartitionProduceResponse


async def _produce_partition(core: Core, session: Session, settings: KafkaSettings,
                             topics: dict[str, Topic], name: str, entry, version: int,
                             transactional: bool, acks: int, ack_timeout: float) -> Any:
    code = _partition_error(topics, name, entry.index)
    message = None
    base_offset = log_start = -1
    records = entry.records
    if code == ErrorCode.NONE and transactional:
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if code == ErrorCode.NONE and not records:
        code, message = ErrorCode.CORRUPT_MESSAGE, "no record batch"
    append_time = -1
    legacy = False  # records the server built (a legacy MessageSet): not a client's batch
    if code == ErrorCode.NONE and version < 3 and message_sets.is_message_set(records):
        legacy = True
        try:  # the seed's legacy MessageSet: one RecordBatch v2 (message_sets' rules)
            now_ms = time.time_ns() // 1_000_000
            records, log_append = message_sets.message_set_to_batch(records, now_ms)
            append_time = now_ms if log_append else -1
        except message_sets.MessageSetTooLarge as error:
            code, message = ErrorCode.MESSAGE_TOO_LARGE, str(error)
        except message_sets.InvalidMessageSet as error:
            code, message = ErrorCode.CORRUPT_MESSAGE, str(error)
    if code == ErrorCode.NONE:
        ref = PartitionRef(settings.stream, name, entry.index + 1)
        try:
            if legacy:
                time_us = batch_time_us(records)
            else:  # Kafka's broker's checks and repairs (maxTimestamp) of a client's batches
                records, time_us = check_produced(records)
            base_offset = await producers.append(core, session, topics[name], ref, records,
                                                 time_us, acks, ack_timeout)
            log_start = core.broker.bounds(session, ref).first_offset
        except producers.ProducerRefused as refused:
            code, message = refused.code, str(refused)
        except errors.Unauthorized as error:  # a writer that may not read: log start unknown
            if base_offset < 0:
                code, message = _data_error(error), str(error)
        except errors.RillError as error:
            code, message = _data_error(error), str(error)
    return _ProducePartition(index=entry.index, error_code=int(code), base_offset=base_offset,
                             log_append_time_ms=append_time if code == ErrorCode.NONE else -1,
                             log_start_offset=log_start if version >= 5 else -1,
                             record_errors=(), error_message=message)


async def produce(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    body = request.body
    topics = kafka_topics(core, session, settings)
    transactional = body.transactional_id is not None
    ack_timeout = max(body.timeout_ms, 0) / 1000
    responses = []
    for topic in body.topic_data:
        partitions = []
        for entry in topic.partition_data:
            partitions.append(await _produce_partition(
                core, session, settings, topics, topic.name, entry, request.api_version,
                transactional, body.acks, ack_timeout))
        responses.append(_Produce.TopicProduceResponse(name=topic.name,
                                                       partition_responses=tuple(partitions)))
    return _Produce(responses=tuple(responses), throttle_time_ms=0)


def produce_failed(body) -> bool:
    """Whether any partition of a Produce response failed (acks=0 then closes)."""
    return any(partition.error_code for topic in body.responses
               for partition in topic.partition_responses)


# -- Fetch (1) -------------------------------------------------------------------------------

_Fetch = response_class(apis.FETCH)
_FetchPartition = _Fetch.FetchableTopicResponse.PartitionData


class _Wanted:
    """One partition of a Fetch: what was asked, and what the last read found."""

    __slots__ = ("topic", "partition", "offset", "max_bytes", "code", "data", "bounds")

    def __init__(self, topic: str, partition: int, offset: int, max_bytes: int,
                 code: ErrorCode) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset
        self.max_bytes, self.code = max_bytes, code
        self.data: bytes | memoryview | list = b""  # a list: the read's chunks (regions)
        self.bounds = None

    def drop(self) -> None:
        """Forget the data read, closing its file regions."""
        if type(self.data) is list:
            for chunk in self.data:
                if type(chunk) is FileRegion:
                    chunk.close()
        self.data = b""


def _read_all(core: Core, session: Session, settings: KafkaSettings, wanted: list[_Wanted],
              max_bytes: int, regions: bool = False) -> int:
    """Read every partition that can be read, within the budgets; the bytes found.
    ``regions``: each partition's data is its chunks, large ranges as file regions."""
    budget, total = max_bytes, 0
    broker = core.broker
    for entry in wanted:
        if entry.code not in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE):
            continue
        ref = PartitionRef(settings.stream, entry.topic, entry.partition + 1)
        entry.drop()
        try:
            bounds = broker.bounds(session, ref)
            entry.bounds = bounds
            if not bounds.first_offset <= entry.offset <= bounds.high_watermark:
                entry.code = (ErrorCode.OFFSET_OUT_OF_RANGE if broker.leadership_certain()
                              else ErrorCode.NOT_LEADER_OR_FOLLOWER)  # (its lease may be gone)
                continue
            entry.code = ErrorCode.NONE
            limit = min(entry.max_bytes, budget)
            if entry.offset == bounds.high_watermark or (limit <= 0 and total):
                continue
            found = broker.read(session, ref, entry.offset, _MAX_RECORDS, max(limit, 1),
                                RECORD_FORMAT, regions)
            entry.bounds = found.bounds
            if found.count:
                entry.data = found.chunks if regions else found.data
        except errors.RillError as error:
            entry.code = _data_error(error)
            continue
        size = sum(map(len, entry.data)) if type(entry.data) is list else len(entry.data)
        total += size
        budget -= size
    return total


async def _wait(core: Core, session: Session, settings: KafkaSettings, wanted: list[_Wanted],
                min_bytes: int, timeout: float) -> None:
    """Until the partitions hold ``min_bytes`` past their offsets, all topics of the request
    together (``broker.wait_any``), or ``timeout`` passes."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for entry in wanted:
        if entry.code == ErrorCode.NONE:
            by_topic.setdefault(entry.topic, []).append((entry.partition + 1, entry.offset))
    await core.broker.wait_any(session, settings.stream, by_topic, min_bytes, timeout)


def _down_convert(wanted: list[_Wanted], magic: int, max_bytes: int) -> None:
    """Fetch v0-3: each partition's stored batches as a MessageSet of ``magic`` (whole
    messages within the partition's and the request's budgets; the first partition with data
    gets at least one message). Per-record work, on this legacy path only."""
    budget, first = max_bytes, True
    for entry in wanted:
        if entry.code != ErrorCode.NONE or not entry.data:
            continue
        limit = max(min(entry.max_bytes, budget), 0)
        try:
            entry.data = message_sets.batches_to_message_set(entry.data, magic, entry.offset,
                                                             limit, at_least_one=first)
        except Exception:  # a stored batch that does not decompress or parse
            entry.code, entry.data = ErrorCode.CORRUPT_MESSAGE, b""
            continue
        first = first and not entry.data
        budget -= len(entry.data)


async def fetch(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    body = request.body
    topics = kafka_topics(core, session, settings)
    epochs = request.api_version >= 9  # current_leader_epoch (KIP-320)
    wanted = [
        _Wanted(topic.topic, partition.partition, partition.fetch_offset,
                partition.partition_max_bytes,
                _partition_error(topics, topic.topic, partition.partition,
                                 partition.current_leader_epoch if epochs else -1))
        for topic in body.topics for partition in topic.partitions
    ]
    max_bytes = body.max_bytes if request.api_version >= 3 else 0x7FFF_FFFF
    regions = session.sends_files and request.api_version >= 4  # (v0-3 are down-converted)
    found = _read_all(core, session, settings, wanted, max_bytes, regions)
    failed = any(entry.code != ErrorCode.NONE for entry in wanted)
    if found < max(body.min_bytes, 1) and body.max_wait_ms > 0 and not failed:
        timeout = min(body.max_wait_ms, _MAX_WAIT_MS) / 1000
        try:
            await _wait(core, session, settings, wanted, body.min_bytes, timeout)
        except BaseException:  # cancelled (the link went away): what was read is not sent
            for entry in wanted:
                entry.drop()
            raise
        _read_all(core, session, settings, wanted, max_bytes, regions)
    if request.api_version < 4:  # the seed's dialect: never on the v4+ path
        _down_convert(wanted, 0 if request.api_version < 2 else 1, max_bytes)
    responses: dict[str, list] = {}
    for entry in wanted:
        bounds = entry.bounds
        high = bounds.high_watermark if bounds is not None else -1
        start = bounds.first_offset if bounds is not None else -1
        responses.setdefault(entry.topic, []).append(_FetchPartition(
            partition_index=entry.partition, error_code=int(entry.code), high_watermark=high,
            last_stable_offset=high,
            log_start_offset=start if request.api_version >= 5 else -1,
            aborted_transactions=(),
            preferred_read_replica=-1,
            records=entry.data if entry.code == ErrorCode.NONE else b""))
    return _Fetch(throttle_time_ms=0, error_code=0, session_id=0, responses=tuple(
        _Fetch.FetchableTopicResponse(topic=name, partitions=tuple(partitions))
        for name, partitions in responses.items()))


# -- ListOffsets (2) -------------------------------------------------------------------------

_ListOffsets = response_class(apis.LIST_OFFSETS)
_ListOffsetsPartition = _ListOffsets.ListOffsetsTopicResponse.ListOffsetsPartitionResponse


def _offset_for(core: Core, session: Session, ref: PartitionRef, timestamp: int
                ) -> tuple[int, int]:
    """(offset, timestamp ms) ListOffsets answers for ``timestamp`` (-1, -2, -3 or ms)."""
    broker = core.broker
    bounds = broker.bounds(session, ref)
    if timestamp == _EARLIEST:
        return bounds.first_offset, -1
    if timestamp == _LATEST:
        return bounds.high_watermark, -1
    if bounds.first_offset >= bounds.high_watermark:
        return -1, -1
    if timestamp == _MAX_TIMESTAMP:
        timestamp = broker.max_timestamp(session, ref) // 1000
    elif timestamp < 0:
        raise errors.InvalidCommand()
    found = broker.record_at_or_after(session, ref, timestamp * 1000)
    if found is None or found[0] >= bounds.high_watermark:
        return -1, -1
    return found[0], found[1] // 1000


def _old_style_offsets(core: Core, session: Session, ref: PartitionRef, timestamp: int,
                       max_offsets: int) -> tuple[int, ...]:
    """ListOffsets v0 (the seed's Offsets API): offsets in descending order, at most
    ``max_offsets``: latest -> (high watermark, log start); earliest -> (log start,); a time
    -> (the first offset whose record timestamp is >= it, or the high watermark when none is;
    then the log start when it is lower): each is a place to start reading that skips only
    records older than the time. rill has no segment list to offer, so the answer is exact to
    the record instead of the 0.8 broker's segment starts."""
    if timestamp < 0 and timestamp not in (_EARLIEST, _LATEST):
        raise errors.InvalidCommand()
    bounds = core.broker.bounds(session, ref)
    if timestamp == _EARLIEST:
        found = [bounds.first_offset]
    elif timestamp == _LATEST:
        found = [bounds.high_watermark, bounds.first_offset]
    else:
        offset, _ = _offset_for(core, session, ref, timestamp)
        found = [bounds.high_watermark if offset < 0 else offset, bounds.first_offset]
    offsets: list[int] = []
    for offset in found:
        if not offsets or offset < offsets[-1]:
            offsets.append(offset)
    return tuple(offsets[:max(max_offsets, 0)])


def _leader_epoch(topics: dict[str, Topic], name: str | None, index: int) -> int:
    """The leader epoch ListOffsets answers: the placement's in a cluster, else 0."""
    partition = partition_of(topics, name, index)
    placement = partition.placement if partition is not None else None
    return LEADER_EPOCH if placement is None else placement.leader_epoch


async def list_offsets(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    topics = kafka_topics(core, session, settings)
    version = request.api_version
    responses = []
    for topic in request.body.topics:
        partitions = []
        for entry in topic.partitions:
            code = _partition_error(topics, topic.name, entry.partition_index,
                                    entry.current_leader_epoch if version >= 4 else -1)
            offset = timestamp = -1
            old_style: tuple[int, ...] = ()
            if code == ErrorCode.NONE:
                ref = PartitionRef(settings.stream, topic.name, entry.partition_index + 1)
                try:
                    if version == 0:
                        old_style = _old_style_offsets(core, session, ref, entry.timestamp,
                                                       entry.max_num_offsets)
                    else:
                        offset, timestamp = _offset_for(core, session, ref, entry.timestamp)
                except errors.InvalidCommand:
                    code = ErrorCode.INVALID_REQUEST
                except errors.RillError as error:
                    code = _data_error(error)
            partitions.append(_ListOffsetsPartition(
                partition_index=entry.partition_index, error_code=int(code),
                old_style_offsets=old_style, timestamp=timestamp, offset=offset,
                leader_epoch=_leader_epoch(topics, topic.name, entry.partition_index)
                if version >= 4 else -1))
        responses.append(_ListOffsets.ListOffsetsTopicResponse(name=topic.name,
                                                               partitions=tuple(partitions)))
    return _ListOffsets(throttle_time_ms=0, topics=tuple(responses))


# -- OffsetForLeaderEpoch (23) ---------------------------------------------------------------

_OffsetForLeaderEpoch = response_class(apis.OFFSET_FOR_LEADER_EPOCH)
_EpochEndOffset = _OffsetForLeaderEpoch.OffsetForLeaderTopicResult.EpochEndOffset
_UNDEFINED = (-1, -1)


def epoch_end_offset(partition, requested: int) -> tuple[int, int]:
    """(epoch, end offset) OffsetForLeaderEpoch answers for ``requested`` (module docstring)."""
    log = partition.log
    current = partition.leader_epoch
    if requested < 0 or requested > current:
        return _UNDEFINED
    if requested == current:
        return current, log.next_offset
    found = log.epoch_end(requested)
    if found is None:  # every stored record is of a later epoch
        return requested, log.first_offset
    return found


async def offset_for_leader_epoch(core: Core, session: Session, settings: KafkaSettings,
                                  request) -> Any:
    topics = kafka_topics(core, session, settings)
    results = []
    for topic in request.body.topics:
        partitions = []
        for entry in topic.partitions:
            code = _partition_error(topics, topic.topic, entry.partition,
                                    entry.current_leader_epoch)
            epoch, end = _UNDEFINED
            if code == ErrorCode.NONE:
                try:  # authorizes the read and refuses a follower (the broker's rule)
                    core.broker.bounds(session, PartitionRef(settings.stream, topic.topic,
                                                             entry.partition + 1))
                    epoch, end = epoch_end_offset(
                        partition_of(topics, topic.topic, entry.partition), entry.leader_epoch)
                except errors.RillError as error:
                    code = _data_error(error)
            partitions.append(_EpochEndOffset(error_code=int(code), partition=entry.partition,
                                              leader_epoch=epoch, end_offset=end))
        results.append(_OffsetForLeaderEpoch.OffsetForLeaderTopicResult(
            topic=topic.topic, partitions=tuple(partitions)))
    return _OffsetForLeaderEpoch(throttle_time_ms=0, topics=tuple(results))
