"""The **kafka-bare** row of ``rill bench kafka``: a bare Python Kafka broker that stores.

Owns: a minimal Kafka broker (run as ``python -m rill.bench.peers.kafka_bare --file F --fsync
interval|always``; it prints ``KAFKA BARE LISTENING <port>`` once it listens on 127.0.0.1) and its
driver ``KafkaBarePeer``. The broker speaks Kafka through rill's sans-I/O codec
(``rill.protocol.kafka``: every version it decodes and encodes is the codec's, advertised from
the subset of ``apis.SUPPORTED`` it serves, ``SERVED_APIS``) and

* Produce (v3+, RecordBatch v2): walks the batch headers of each partition's records (no
  per-record work, no CRC check), writes each batch's baseOffset (outside the CRC) with the
  partition's next offset, appends the whole records field to the one file with a single
  ``os.write`` and keeps (base offset, file position, length) per batch; ``fsync`` before the
  answer for ``--fsync always``, a background thread fsyncs once a second for ``interval``;
  acks=0 gets no answer;
* Fetch (v4-12): ``os.pread`` of the whole batches from the one holding the fetch offset, up to
  the partition's byte budget (at least one whole batch, as Kafka does); nothing to return:
  waits for an append up to max_wait_ms, then answers what there is;
* ApiVersions, Metadata (one broker, node 0; an unknown topic asked is created with one
  partition unless the client forbids it), CreateTopics (one partition whatever is asked),
  FindCoordinator (node 0), ListOffsets (earliest 0, latest the next offset, a timestamp 0);
* anything else: it closes the connection.

Invariants: offsets of a partition are contiguous from 0 in the order batches were appended;
a Produce is answered only after its bytes were written (and synced for ``always``); the
index only holds batches wholly in the file. Topics live in memory: nothing is recovered
after a restart (it is a bench peer).

It is a reference row, as ``bare`` is for the Iggy protocol: the I/O a storing Kafka broker
must pay (the page-cache copy of every batch, the socket copies) and the codec, without
rill's work (validation, CRCs, indexes, segments, group commit). Blocking sockets, one thread
per connection, ``recv_into`` one reused buffer: the GIL is released for every syscall.

The driver is ``KafkaPeer``'s confluent-kafka client unchanged (the same client work as
``rill-kafka`` and ``tansu``); it stores, so it runs ``--fsync always`` too.
"""

from __future__ import annotations

import bisect
import os
import socket
import struct
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from rill.bench.peers import Workload
from rill.bench.peers.bare import FileServer, recv_exactly, run_server, start_server
from rill.bench.peers.kafka import KafkaPeer
from rill.protocol.kafka import (
    ErrorCode,
    KafkaProtocolError,
    UnsupportedVersion,
    api_versions_response,
    api_versions_unsupported_response,
    apis,
    decode_request,
    encode_response_parts,
    response_class,
    response_expected,
)

READY_LINE = "KAFKA BARE LISTENING"
NODE_ID = 0
HOST = "127.0.0.1"
CLUSTER_ID = "kafka-bare"
_INITIAL_BUFFER = 2 * 1024 * 1024
_SIZE = struct.Struct(">i")
_BASE_OFFSET = struct.Struct(">q")
_LENGTH = struct.Struct(">i")  # batchLength, at 8: the bytes after baseOffset and itself
_LAST_OFFSET_DELTA = struct.Struct(">i")  # at 23
_MAGIC_AT, _LAST_DELTA_AT, _BATCH_OVERHEAD, _HEADER_SIZE = 16, 23, 12, 61
_EARLIEST, _LATEST = -2, -1
# the APIs this broker serves, at rill's own ranges (rill's Kafka listener serves these at the
# same ranges: tests check it), so clients choose the versions they use against rill
SERVED_APIS: dict[int, tuple[int, int]] = {key: apis.SUPPORTED[key] for key in (
    apis.API_VERSIONS, apis.METADATA, apis.PRODUCE, apis.FETCH, apis.LIST_OFFSETS,
    apis.CREATE_TOPICS, apis.FIND_COORDINATOR)}
_MIN_RECORD_BATCH_VERSION = {apis.PRODUCE: 3, apis.FETCH: 4}  # older ones carry MessageSets

_Metadata = response_class(apis.METADATA)
_Produce = response_class(apis.PRODUCE)
_Fetch = response_class(apis.FETCH)
_ListOffsets = response_class(apis.LIST_OFFSETS)
_CreateTopics = response_class(apis.CREATE_TOPICS)
_FindCoordinator = response_class(apis.FIND_COORDINATOR)


class Partition:
    """One partition's batches in the file: parallel lists, in offset order."""

    __slots__ = ("next_offset", "bases", "positions", "lengths")

    def __init__(self) -> None:
        self.next_offset = 0
        self.bases: list[int] = []
        self.positions: list[int] = []
        self.lengths: list[int] = []


def _walk_batches(records: memoryview, next_offset: int
                  ) -> tuple[list[tuple[int, int, int]], int] | None:
    """Stamp each RecordBatch v2's baseOffset in place from ``next_offset``: ((base, position in
    ``records``, length) per batch, the next offset after them), or None when the headers do
    not tile the field."""
    batches, at, end = [], 0, len(records)
    while at < end:
        if end - at < _HEADER_SIZE or records[at + _MAGIC_AT] != 2:
            return None
        length = _BATCH_OVERHEAD + _LENGTH.unpack_from(records, at + 8)[0]
        if length < _HEADER_SIZE or at + length > end:
            return None
        _BASE_OFFSET.pack_into(records, at, next_offset)
        batches.append((next_offset, at, length))
        next_offset += _LAST_OFFSET_DELTA.unpack_from(records, at + _LAST_DELTA_AT)[0] + 1
        at += length
    return batches, next_offset


class KafkaBareServer(FileServer):
    """The broker over one file (see the module docstring)."""

    def __init__(self, path: Path, fsync: str):
        super().__init__(path, fsync)
        self.size = 0  # the file's length: where the next append lands
        self.topics: dict[str, tuple[uuid.UUID, list[Partition]]] = {}
        self.lock = threading.Lock()
        self.appended = threading.Condition(self.lock)
        self.handlers = {
            apis.METADATA: self.metadata, apis.PRODUCE: self.produce, apis.FETCH: self.fetch,
            apis.LIST_OFFSETS: self.list_offsets, apis.CREATE_TOPICS: self.create_topics,
            apis.FIND_COORDINATOR: self.find_coordinator,
        }

    # -- the connection ----------------------------------------------------------------------

    def _serve(self, connection: socket.socket) -> None:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        size_bytes = bytearray(4)
        size_view = memoryview(size_bytes)
        buffer = bytearray(_INITIAL_BUFFER)
        view = memoryview(buffer)
        try:
            while recv_exactly(connection, size_view, 4):
                size = _SIZE.unpack(size_bytes)[0]
                if size > len(buffer):
                    buffer = bytearray(size)
                    view = memoryview(buffer)
                if not recv_exactly(connection, view, size):
                    return
                answer = self.answer(view[:size])
                if answer is None:
                    return  # not served: close, as Kafka does
                if answer:
                    _send_parts(connection, answer)
        except OSError:
            pass
        finally:
            connection.close()

    def answer(self, payload: memoryview) -> list | None:
        """The response frame's parts for one request ([] when none is due, None: close)."""
        try:
            request = decode_request(payload, supported=SERVED_APIS)
        except UnsupportedVersion as error:
            if error.api_key != apis.API_VERSIONS:
                return None
            return [api_versions_unsupported_response(error.correlation_id, SERVED_APIS)]
        except KafkaProtocolError:  # an API it does not serve, or malformed bytes
            return None
        key, version = request.api_key, request.api_version
        if key == apis.API_VERSIONS:
            return [api_versions_response(version, request.correlation_id, 0, SERVED_APIS)]
        if version < _MIN_RECORD_BATCH_VERSION.get(key, 0):
            return None
        body = self.handlers[key](request.body, version)
        if not response_expected(key, request.body):
            return []
        return encode_response_parts(key, version, request.correlation_id, body)

    # -- topics ------------------------------------------------------------------------------

    def _create(self, name: str) -> bool:
        """Create ``name`` with one partition (caller holds the lock); False if it exists."""
        if name in self.topics:
            return False
        self.topics[name] = (uuid.uuid4(), [Partition()])
        return True

    def _partition(self, topic: str, index: int) -> Partition | None:
        entry = self.topics.get(topic)
        return entry[1][index] if entry is not None and 0 <= index < len(entry[1]) else None

    def metadata(self, body: Any, version: int) -> Any:
        auto_create = version < 4 or body.allow_auto_topic_creation
        topic_class = _Metadata.MetadataResponseTopic
        partition_class = topic_class.MetadataResponsePartition
        with self.lock:
            if body.topics is None or (version == 0 and not body.topics):
                names = list(self.topics)
            else:
                names = [entry.name for entry in body.topics]
            topics = []
            for name in names:
                if name is not None and name not in self.topics and auto_create:
                    self._create(name)
                entry = self.topics.get(name) if name is not None else None
                if entry is None:
                    topics.append(topic_class(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                              name=name, partitions=()))
                    continue
                partitions = tuple(
                    partition_class(error_code=0, partition_index=index, leader_id=NODE_ID,
                                    leader_epoch=0, replica_nodes=(NODE_ID,), isr_nodes=(NODE_ID,))
                    for index in range(len(entry[1])))
                topics.append(topic_class(error_code=0, name=name, topic_id=entry[0],
                                          partitions=partitions))
        broker = _Metadata.MetadataResponseBroker(node_id=NODE_ID, host=HOST, port=self.port)
        return _Metadata(brokers=(broker,), cluster_id=CLUSTER_ID, controller_id=NODE_ID,
                         topics=tuple(topics))

    def create_topics(self, body: Any, version: int) -> Any:
        results = []
        with self.lock:
            for topic in body.topics:
                exists = topic.name in self.topics
                if not exists and not body.validate_only:
                    self._create(topic.name)
                entry = self.topics.get(topic.name)
                results.append(_CreateTopics.CreatableTopicResult(
                    name=topic.name, topic_id=entry[0] if entry else uuid.UUID(int=0),
                    error_code=ErrorCode.TOPIC_ALREADY_EXISTS if exists else 0,
                    num_partitions=1, replication_factor=1))
        return _CreateTopics(topics=tuple(results))

    def find_coordinator(self, body: Any, version: int) -> Any:
        return _FindCoordinator(error_code=0, node_id=NODE_ID, host=HOST, port=self.port)

    def list_offsets(self, body: Any, version: int) -> Any:
        topic_class = _ListOffsets.ListOffsetsTopicResponse
        partition_class = topic_class.ListOffsetsPartitionResponse
        topics = []
        with self.lock:
            for topic in body.topics:
                answers = []
                for asked in topic.partitions:
                    partition = self._partition(topic.name, asked.partition_index)
                    if partition is None:
                        answers.append(partition_class(
                            partition_index=asked.partition_index,
                            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                        continue
                    # no timestamps are kept: a timestamp lookup answers the start
                    offset = partition.next_offset if asked.timestamp == _LATEST else 0
                    answers.append(partition_class(
                        partition_index=asked.partition_index, error_code=0,
                        old_style_offsets=(offset,) if version == 0 else (), timestamp=-1,
                        offset=offset, leader_epoch=0))
                topics.append(topic_class(name=topic.name, partitions=tuple(answers)))
        return _ListOffsets(topics=tuple(topics))

    # -- the data path -----------------------------------------------------------------------

    def produce(self, body: Any, version: int) -> Any:
        topic_class = _Produce.TopicProduceResponse
        partition_class = topic_class.PartitionProduceResponse
        topics, wrote = [], False
        for topic in body.topic_data:
            answers = []
            for data in topic.partition_data:
                error, base = self._append(topic.name, data.index, data.records)
                wrote = wrote or not error
                answers.append(partition_class(index=data.index, error_code=error,
                                               base_offset=base, log_start_offset=0))
            topics.append(topic_class(name=topic.name, partition_responses=tuple(answers)))
        if wrote:
            if self.always:
                os.fsync(self.fd)
            else:
                self.dirty = True
        return _Produce(responses=tuple(topics))

    def _append(self, topic: str, index: int, records: memoryview | None) -> tuple[int, int]:
        """(error code, base offset) of appending one partition's records."""
        with self.lock:
            partition = self._partition(topic, index)
            if partition is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
            walked = _walk_batches(records, partition.next_offset) if records else None
            if not walked:
                return ErrorCode.CORRUPT_MESSAGE, -1
            batches, next_offset = walked
            written, total = 0, len(records)
            while written < total:
                written += os.write(self.fd, records[written:])
            base = partition.next_offset
            for batch_base, at, length in batches:
                partition.bases.append(batch_base)
                partition.positions.append(self.size + at)
                partition.lengths.append(length)
            self.size += total
            partition.next_offset = next_offset
            self.appended.notify_all()
            return 0, base

    def fetch(self, body: Any, version: int) -> Any:
        responses = self._read(body)
        empty = not any(data.records for _, parts in responses for data in parts)
        if empty and body.max_wait_ms > 0:
            with self.appended:
                self.appended.wait(body.max_wait_ms / 1000)
            responses = self._read(body)
        return _Fetch(error_code=0, session_id=0, responses=tuple(
            _Fetch.FetchableTopicResponse(topic=name, partitions=tuple(parts))
            for name, parts in responses))

    def _read(self, body: Any) -> list[tuple[str, list[Any]]]:
        data_class = _Fetch.FetchableTopicResponse.PartitionData
        budget = body.max_bytes
        responses = []
        for topic in body.topics:
            parts = []
            for asked in topic.partitions:
                with self.lock:
                    partition = self._partition(topic.topic, asked.partition)
                    if partition is None:
                        parts.append(data_class(partition_index=asked.partition,
                                                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                        continue
                    high = partition.next_offset
                    if not 0 <= asked.fetch_offset <= high:
                        parts.append(data_class(partition_index=asked.partition,
                                                error_code=ErrorCode.OFFSET_OUT_OF_RANGE,
                                                high_watermark=high, last_stable_offset=high,
                                                log_start_offset=0))
                        continue
                    ranges = _ranges(partition, asked.fetch_offset,
                                     min(asked.partition_max_bytes, budget))
                records = [os.pread(self.read_fd, length, position) for position, length in ranges]
                budget = max(0, budget - sum(map(len, records)))
                parts.append(data_class(partition_index=asked.partition, error_code=0,
                                        high_watermark=high, last_stable_offset=high,
                                        log_start_offset=0, aborted_transactions=(),
                                        preferred_read_replica=-1, records=records))
            responses.append((topic.topic, parts))
        return responses


def _ranges(partition: Partition, offset: int, budget: int) -> list[tuple[int, int]]:
    """(file position, length) runs of the whole batches from the one holding ``offset``, at
    most ``budget`` bytes but at least one batch; adjacent batches make one run."""
    first = bisect.bisect_right(partition.bases, offset) - 1
    if first < 0 or offset >= partition.next_offset:
        return []
    ranges: list[tuple[int, int]] = []
    taken = 0
    for position, length in zip(partition.positions[first:], partition.lengths[first:]):
        if ranges and taken + length > budget:
            break
        taken += length
        if ranges and ranges[-1][0] + ranges[-1][1] == position:
            ranges[-1] = (ranges[-1][0], ranges[-1][1] + length)
        else:
            ranges.append((position, length))
    return ranges


def _send_parts(connection: socket.socket, parts: list) -> None:
    """Send a frame's pieces with one ``sendmsg`` (a blocking socket: the rest, if any, after)."""
    sent = connection.sendmsg(parts)
    if sent < sum(map(len, parts)):
        connection.sendall(memoryview(b"".join(parts))[sent:])


def main(argv: list[str] | None = None) -> None:
    run_server(KafkaBareServer, READY_LINE, "rill bench kafka: the bare Kafka broker", argv)


# --- the driver -------------------------------------------------------------------------------


class KafkaBarePeer(KafkaPeer):
    """The bare Kafka broker above, driven by ``KafkaPeer``'s confluent-kafka client."""

    name = "kafka-bare"
    memory_only = False

    def __init__(self, workload: Workload, python: str | None = None):
        super().__init__(workload)
        self.python = python or sys.executable  # the interpreter that runs the broker
        self.file: Path | None = None

    def start(self, workdir: Path) -> None:
        self._check(workdir)
        self.file = workdir / "kafka-bare.log"
        self.file.unlink(missing_ok=True)
        command = [self.python, "-m", "rill.bench.peers.kafka_bare",
                   "--file", str(self.file), "--fsync", self.workload.fsync]
        start_server(self, command, workdir / "kafka-bare-server.log", READY_LINE)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "fsync": self.workload.fsync, "file": str(self.file)}


if __name__ == "__main__":
    main()
