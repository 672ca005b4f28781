"""Every TANK request and response (tank-wire-reference §3, §5, §6, §8), both directions.

Owns: the message ids, one frozen dataclass per request and response, and the four entry points
``decode_request`` / ``encode_response`` (a broker's side) and ``encode_request`` /
``decode_response`` (a client's side). Bundles stay opaque bytes here (``bundles`` reads them);
a Consume response's chunks are handed out as views of the payload, and
``encode_response_parts`` lets a broker write them without copying.

Rules kept here, not left to callers: a ProduceWithSeqnum (0x05) request is answered with msg_id
0x01; a Consume request of ``client_version`` >= 3 carries ``op_flags`` after ``min_bytes``;
``produce_error_bytes`` applies §5.3's grouping (one byte for a whole topic answered 0xff/0xfe,
none for a topic listed without partitions); ``ProduceResponse.entries`` reads the bytes back
against the request. Cluster-only requests (0x04 RegReplica, 0x09 ConsumePeer) decode into
their dataclasses so that a broker can refuse them as a standalone TANK does: by closing the
connection (``CLOSES_CONNECTION``). Input is never trusted: every decoder raises a
``TankDecodeError`` (``Truncated``, ``LengthMismatch``, ``BadVarint``, ``UnknownMessageId``) on
malformed bytes, including bytes left over after the last field.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from enum import IntEnum
from functools import partial
from typing import Union

from rill.protocol.tank.bundles import ERR_LENGTH, ERR_TRUNCATED, ERR_VARINT, ERROR_TYPES
from rill.protocol.tank.errors import (
    UNKNOWN_TOPIC_MARK,
    ConsumeFlag,
    DiscoverReason,
    LengthMismatch,
    ProduceError,
    UnknownMessageId,
)
from rill.protocol.tank.framing import frame, frame_header
from rill.protocol.tank.primitives import (
    MAX_U64,
    U8,
    U16,
    U32,
    U64,
    Reader,
    encode_endpoint,
    encode_str8,
    encode_varint,
)


class MsgId(IntEnum):
    PRODUCE = 0x01
    CONSUME = 0x02
    PING = 0x03
    REG_REPLICA = 0x04  # obsolete; a v4.0 broker closes the connection
    PRODUCE_WITH_SEQNUM = 0x05  # answered with PRODUCE
    DISCOVER_PARTITIONS = 0x06
    CREATE_TOPIC = 0x07
    RELOAD_CONF = 0x08
    CONSUME_PEER = 0x09  # cluster replication; standalone: connection closed
    STATUS = 0x0A
    DISCOVER_TOPICS = 0x0B
    DISCOVER_TOPOLOGY = 0x0C


CLOSES_CONNECTION = frozenset({MsgId.REG_REPLICA, MsgId.CONSUME_PEER})
PING_NO_ANSWER = MsgId.PING  # a client's ping gets no answer
SEQ_FROM_FIRST = 0  # Consume seq: from the first available message
SEQ_ONLY_NEW = MAX_U64  # Consume seq: only messages appended from now on
NO_NUMBERS = MAX_U64  # DiscoverPartitions: both numbers this value -> a reason byte follows


# --- requests -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducePartition:
    partition: int
    bundle: bytes | memoryview  # the bundle as sent (bundle_len bytes)
    first_seq: int | None = None  # ProduceWithSeqnum only (not counted in bundle_len)


@dataclass(frozen=True, slots=True)
class ProduceTopic:
    name: str
    partitions: tuple[ProducePartition, ...]


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    """0x01, or 0x05 (``with_seqnum``) where every partition entry carries ``first_seq``."""

    request_id: int
    topics: tuple[ProduceTopic, ...]
    with_seqnum: bool = False
    client_version: int = 2
    client_id: str = ""
    required_acks: int = 0
    ack_timeout: int = 0

    @property
    def msg_id(self) -> int:
        return MsgId.PRODUCE_WITH_SEQNUM if self.with_seqnum else MsgId.PRODUCE

    def entries(self) -> list[tuple[str, int]]:
        """(topic, partition) of every partition entry, in request order."""
        return [(t.name, p.partition) for t in self.topics for p in t.partitions]


@dataclass(frozen=True, slots=True)
class ConsumePartition:
    partition: int
    seq: int
    fetch_size: int


@dataclass(frozen=True, slots=True)
class ConsumeTopic:
    name: str
    partitions: tuple[ConsumePartition, ...]


@dataclass(frozen=True, slots=True)
class ConsumeRequest:
    request_id: int
    topics: tuple[ConsumeTopic, ...]
    max_wait_ms: int = 0
    min_bytes: int = 0
    client_version: int = 2
    client_id: str = ""
    op_flags: int = 0  # on the wire only when client_version >= 3

    msg_id = MsgId.CONSUME


@dataclass(frozen=True, slots=True)
class Ping:
    """0x03 with an empty payload: the broker's greeting; a client's gets no answer."""

    msg_id = MsgId.PING


@dataclass(frozen=True, slots=True)
class DiscoverPartitionsRequest:
    request_id: int
    topic: str
    partitions: tuple[int, ...] | None = None  # None: all of them

    msg_id = MsgId.DISCOVER_PARTITIONS


@dataclass(frozen=True, slots=True)
class CreateTopicRequest:
    request_id: int
    topic: str
    partitions: int
    config: bytes = b""  # `key = value` lines

    msg_id = MsgId.CREATE_TOPIC


@dataclass(frozen=True, slots=True)
class ReloadConfRequest:
    request_id: int
    topic: str
    partition: int

    msg_id = MsgId.RELOAD_CONF


@dataclass(frozen=True, slots=True)
class StatusRequest:
    request_id: int

    msg_id = MsgId.STATUS


@dataclass(frozen=True, slots=True)
class DiscoverTopicsRequest:
    request_id: int
    flags: int = 0

    msg_id = MsgId.DISCOVER_TOPICS


@dataclass(frozen=True, slots=True)
class DiscoverTopologyRequest:
    request_id: int
    flags: int = 0

    msg_id = MsgId.DISCOVER_TOPOLOGY


@dataclass(frozen=True, slots=True)
class RegReplicaRequest:
    """0x04 (cluster, obsolete): ``replica_id:u16``; a standalone broker closes the connection."""

    replica_id: int

    msg_id = MsgId.REG_REPLICA


@dataclass(frozen=True, slots=True)
class ConsumePeerPartition:
    partition: int
    seq: int
    fetch_size: int


@dataclass(frozen=True, slots=True)
class ConsumePeerTopic:
    name: str
    partitions: tuple[ConsumePeerPartition, ...]


@dataclass(frozen=True, slots=True)
class ConsumePeerRequest:
    """0x09 (cluster replication, §8.7); a standalone broker closes the connection."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    topics: tuple[ConsumePeerTopic, ...]

    msg_id = MsgId.CONSUME_PEER


Request = Union[ProduceRequest, ConsumeRequest, Ping, DiscoverPartitionsRequest,
                CreateTopicRequest, ReloadConfRequest, StatusRequest, DiscoverTopicsRequest,
                DiscoverTopologyRequest, RegReplicaRequest, ConsumePeerRequest]


# --- responses ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    """``errors``: the error bytes exactly as on the wire (§5.3; standalone, one code per byte).
    The response repeats no names: ``entries(request)`` reads the bytes against the request."""

    request_id: int
    errors: bytes

    msg_id = MsgId.PRODUCE  # also for ProduceWithSeqnum

    def entries(self, request: ProduceRequest) -> list[tuple[str, int, int]]:
        """(topic, partition, code) per partition entry of ``request``, in its order."""
        out: list[tuple[str, int, int]] = []
        reader = Reader(self.errors)
        for name, partitions in _topic_groups(request):
            if not partitions:
                continue
            first = True
            topic_code = None
            for partition in partitions:
                if topic_code is not None:
                    out.append((name, partition, topic_code))
                    continue
                code = reader.u8()
                if code == ProduceError.OTHER_LEADER:
                    reader.endpoint()
                if first and code in (ProduceError.UNKNOWN_TOPIC, ProduceError.READ_ONLY):
                    topic_code = code
                first = False
                out.append((name, partition, code))
        reader.finish()
        return out


def _topic_groups(request: ProduceRequest) -> list[tuple[str, list[int]]]:
    """Consecutive topic entries of the same name form one group (as the broker groups them)."""
    groups: list[tuple[str, list[int]]] = []
    for topic in request.topics:
        if groups and groups[-1][0] == topic.name:
            groups[-1][1].extend(p.partition for p in topic.partitions)
        else:
            groups.append((topic.name, [p.partition for p in topic.partitions]))
    return groups


def produce_error_bytes(request: ProduceRequest, codes: list[int],
                        endpoints: dict[int, tuple[str, int]] | None = None) -> bytes:
    """The error bytes answering ``request`` given one code per partition entry (request order):
    a topic group whose entries are all 0xff (unknown) or all 0xfe (read-only) gets one byte, a
    topic listed without partitions none (§5.3). ``endpoints``: the leader's address after
    each 0xfc code, by the entry's index (cluster only)."""
    out = bytearray()
    index = 0
    for _name, partitions in _topic_groups(request):
        group = codes[index : index + len(partitions)]
        if len(group) != len(partitions):
            raise ValueError("one code per partition entry of the request is needed")
        start = index
        index += len(partitions)
        if not group:
            continue
        if group[0] in (ProduceError.UNKNOWN_TOPIC, ProduceError.READ_ONLY):
            if any(code != group[0] for code in group):
                raise ValueError("a topic-wide code must be the code of all its entries")
            out.append(group[0])
            continue
        for at, code in enumerate(group, start):
            out.append(code)
            if code == ProduceError.OTHER_LEADER:
                endpoint = (endpoints or {}).get(at)
                if endpoint is None:
                    raise ValueError("a 0xfc code needs the leader's endpoint")
                out += encode_endpoint(endpoint)
    if index != len(codes):
        raise ValueError("more codes than partition entries")
    return bytes(out)


@dataclass(frozen=True, slots=True)
class ConsumePartitionResult:
    """One partition header of a Consume response (§6.3) and its chunk.

    ``flag`` OK: ``base``, ``hwm``, ``chunk``; SPARSE_FIRST: ``hwm``, ``chunk`` (no base);
    BOUNDARY_CHECK: ``base`` (0), ``hwm``, empty chunk, ``first_available``; OTHER_LEADER:
    ``endpoint``; SYSTEM, NO_LEADER, UNKNOWN_PARTITION: nothing."""

    partition: int
    flag: int = ConsumeFlag.OK
    base: int = 0
    hwm: int = 0
    chunk: bytes | memoryview = b""  # (bundle_len:varint, bundle) pairs
    first_available: int = 0
    endpoint: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class ConsumeTopicResult:
    name: str
    partitions: tuple[ConsumePartitionResult, ...] = ()
    unknown_count: int | None = None  # an unknown topic: the request's partition count


@dataclass(frozen=True, slots=True)
class ConsumeResponse:
    request_id: int
    topics: tuple[ConsumeTopicResult, ...]

    msg_id = MsgId.CONSUME


@dataclass(frozen=True, slots=True)
class PartitionNumbers:
    """DiscoverPartitions: first available seq and high-water mark, or a ``reason``."""

    first_available: int
    hwm: int
    reason: int | None = None  # when both numbers are NO_NUMBERS
    endpoint: tuple[str, int] | None = None  # reason OTHER_LEADER


@dataclass(frozen=True, slots=True)
class DiscoverPartitionsResponse:
    request_id: int
    topic: str
    partitions: tuple[PartitionNumbers, ...]  # empty: unknown topic (or unknown listed id)

    msg_id = MsgId.DISCOVER_PARTITIONS


@dataclass(frozen=True, slots=True)
class CreateTopicResponse:
    request_id: int
    topic: str
    error: int

    msg_id = MsgId.CREATE_TOPIC


@dataclass(frozen=True, slots=True)
class ReloadConfResponse:
    request_id: int
    topic: str
    partition: int
    error: int

    msg_id = MsgId.RELOAD_CONF


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    flags: int
    name: str
    nodes_available: int


@dataclass(frozen=True, slots=True)
class StatusResponse:
    """§8.4. Decoding accepts an answer that ends after ``partitions`` or before ``version``
    (older brokers): the missing fields are None."""

    request_id: int
    topics: int
    partitions: int
    open_partitions: int | None = 0
    open_partitions_time_us: int | None = 0
    startup_unix_seconds: int | None = 0
    version: int | None = 400
    global_flags: int = 0
    cluster: ClusterStatus | None = None

    msg_id = MsgId.STATUS


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int
    enabled: bool = True
    replication_factor: int | None = None  # cluster-aware answers only


@dataclass(frozen=True, slots=True)
class DiscoverTopicsResponse:
    request_id: int
    topics: tuple[TopicInfo, ...]
    cluster_aware: bool = False

    msg_id = MsgId.DISCOVER_TOPICS


@dataclass(frozen=True, slots=True)
class TopologyNode:
    id: int
    flags: int  # bit0 has endpoint, bit1 available, bit2 blocked
    partitions: int
    endpoint: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class DiscoverTopologyResponse:
    """Standalone (rill): ``cluster_name`` None, answered as ``0xFFFF``."""

    request_id: int
    cluster_name: str | None = None
    nodes: tuple[TopologyNode, ...] = ()

    msg_id = MsgId.DISCOVER_TOPOLOGY


Response = Union[ProduceResponse, ConsumeResponse, Ping, DiscoverPartitionsResponse,
                 CreateTopicResponse, ReloadConfResponse, StatusResponse, DiscoverTopicsResponse,
                 DiscoverTopologyResponse]


# --- requests: encode (client) ---------------------------------------------------------------


def encode_request_payload(request: Request) -> bytes:
    kind = type(request)
    if kind is ProduceRequest:
        out = [U16.pack(request.client_version), U32.pack(request.request_id),
               encode_str8(request.client_id), U8.pack(request.required_acks),
               U32.pack(request.ack_timeout), _count8(request.topics)]
        for topic in request.topics:
            out += (encode_str8(topic.name), _count8(topic.partitions))
            for part in topic.partitions:
                out += (U16.pack(part.partition), encode_varint(len(part.bundle)))
                if request.with_seqnum:
                    if part.first_seq is None:
                        raise ValueError("ProduceWithSeqnum needs first_seq on every partition")
                    out.append(U64.pack(part.first_seq))
                out.append(bytes(part.bundle))
        return b"".join(out)
    if kind is ConsumeRequest:
        out = [U16.pack(request.client_version), U32.pack(request.request_id),
               encode_str8(request.client_id), U64.pack(request.max_wait_ms),
               U32.pack(request.min_bytes)]
        if request.client_version >= 3:
            out.append(U8.pack(request.op_flags))
        out.append(_count8(request.topics))
        for topic in request.topics:
            out += (encode_str8(topic.name), _count8(topic.partitions))
            for part in topic.partitions:
                out += (U16.pack(part.partition), U64.pack(part.seq), U32.pack(part.fetch_size))
        return b"".join(out)
    if kind is Ping:
        return b""
    if kind is DiscoverPartitionsRequest:
        ids = b"".join(U16.pack(p) for p in request.partitions or ())
        return U32.pack(request.request_id) + encode_str8(request.topic) + ids
    if kind is CreateTopicRequest:
        return (U32.pack(request.request_id) + encode_str8(request.topic)
                + U16.pack(request.partitions) + encode_varint(len(request.config))
                + bytes(request.config))
    if kind is ReloadConfRequest:
        return U32.pack(request.request_id) + encode_str8(request.topic) + U16.pack(
            request.partition)
    if kind is StatusRequest:
        return U32.pack(request.request_id)
    if kind in (DiscoverTopicsRequest, DiscoverTopologyRequest):
        return U32.pack(request.request_id) + U8.pack(request.flags)
    if kind is RegReplicaRequest:
        return U16.pack(request.replica_id)
    if kind is ConsumePeerRequest:
        out = [U16.pack(request.replica_id), U64.pack(request.max_wait_ms),
               U32.pack(request.min_bytes), U16.pack(len(request.topics))]
        for topic in request.topics:
            out += (encode_str8(topic.name), U16.pack(len(topic.partitions)))
            for part in topic.partitions:
                out += (U16.pack(part.partition), U64.pack(part.seq), U32.pack(part.fetch_size))
        return b"".join(out)
    raise TypeError(f"not a TANK request: {request!r}")


def encode_request(request: Request) -> bytes:
    """The whole frame of ``request``."""
    return frame(request.msg_id, encode_request_payload(request))


def _count8(items: tuple | list) -> bytes:
    if len(items) > 255:
        raise ValueError(f"{len(items)} entries do not fit TANK's u8 count")
    return U8.pack(len(items))


# --- requests: decode (broker) ---------------------------------------------------------------


def decode_request(msg_id: int, payload: bytes | bytearray | memoryview) -> Request:
    """The request in one frame; ``TankDecodeError`` when it is malformed (close the
    connection, §2). A ProduceRequest's bundles are views of ``payload``. Produce and Consume,
    the hot two, are read by the C twin when it is built (``_requests.c``; the same objects,
    errors and texts as ``decode_request_python``, the reference)."""
    fast = _FAST_DECODERS.get(msg_id)
    if fast is None:
        return decode_request_python(msg_id, payload)
    found = fast(payload)
    if type(found) is tuple:
        raise ERROR_TYPES[found[0]](found[1])
    return found


def decode_request_python(msg_id: int, payload: bytes | bytearray | memoryview) -> Request:
    """``decode_request`` walking a ``Reader``: the reference of the C twin, and the decoder
    of every other request."""
    decoder = _REQUEST_DECODERS.get(msg_id)
    if decoder is None:
        raise UnknownMessageId(msg_id)
    reader = Reader(payload)
    request = decoder(reader, msg_id)
    reader.finish()
    return request


def _decode_produce(r: Reader, msg_id: int) -> ProduceRequest:
    with_seqnum = msg_id == MsgId.PRODUCE_WITH_SEQNUM
    client_version, request_id, client_id = r.u16(), r.u32(), r.str8()
    required_acks, ack_timeout = r.u8(), r.u32()
    topics = []
    for _ in range(r.u8()):
        name = r.str8()
        partitions = []
        for _ in range(r.u8()):
            partition = r.u16()
            size = r.varint()
            first_seq = r.u64() if with_seqnum else None
            if size > r.remaining:
                raise LengthMismatch(f"bundle_len {size} runs past the payload")
            partitions.append(ProducePartition(partition, r.view(size), first_seq))
        topics.append(ProduceTopic(name, tuple(partitions)))
    return ProduceRequest(request_id, tuple(topics), with_seqnum, client_version, client_id,
                          required_acks, ack_timeout)


def _decode_consume(r: Reader, _msg_id: int) -> ConsumeRequest:
    client_version, request_id, client_id = r.u16(), r.u32(), r.str8()
    max_wait_ms, min_bytes = r.u64(), r.u32()
    op_flags = r.u8() if client_version >= 3 else 0
    topics = []
    for _ in range(r.u8()):
        name = r.str8()
        partitions = tuple(ConsumePartition(r.u16(), r.u64(), r.u32()) for _ in range(r.u8()))
        topics.append(ConsumeTopic(name, partitions))
    return ConsumeRequest(request_id, tuple(topics), max_wait_ms, min_bytes, client_version,
                          client_id, op_flags)


def _decode_ping(r: Reader, _msg_id: int) -> Ping:
    return Ping()


def _decode_discover_partitions(r: Reader, _msg_id: int) -> DiscoverPartitionsRequest:
    request_id, topic = r.u32(), r.str8()
    if r.remaining % 2:
        raise LengthMismatch("the partition list is not a whole number of u16 ids")
    ids = tuple(r.u16() for _ in range(r.remaining // 2))
    return DiscoverPartitionsRequest(request_id, topic, ids or None)


def _decode_create_topic(r: Reader, _msg_id: int) -> CreateTopicRequest:
    request_id, topic, partitions = r.u32(), r.str8(), r.u16()
    size = r.varint()
    if size > r.remaining:
        raise LengthMismatch(f"config_len {size} runs past the payload")
    return CreateTopicRequest(request_id, topic, partitions, r.raw(size))


def _decode_reload_conf(r: Reader, _msg_id: int) -> ReloadConfRequest:
    return ReloadConfRequest(r.u32(), r.str8(), r.u16())


def _decode_status(r: Reader, _msg_id: int) -> StatusRequest:
    return StatusRequest(r.u32())


def _decode_discover_topics(r: Reader, _msg_id: int) -> DiscoverTopicsRequest:
    return DiscoverTopicsRequest(r.u32(), r.u8())


def _decode_discover_topology(r: Reader, _msg_id: int) -> DiscoverTopologyRequest:
    return DiscoverTopologyRequest(r.u32(), r.u8())


def _decode_reg_replica(r: Reader, _msg_id: int) -> RegReplicaRequest:
    return RegReplicaRequest(r.u16())


def _decode_consume_peer(r: Reader, _msg_id: int) -> ConsumePeerRequest:
    replica_id, max_wait_ms, min_bytes = r.u16(), r.u64(), r.u32()
    topics = []
    for _ in range(r.u16()):
        name = r.str8()
        partitions = tuple(ConsumePeerPartition(r.u16(), r.u64(), r.u32())
                           for _ in range(r.u16()))
        topics.append(ConsumePeerTopic(name, partitions))
    return ConsumePeerRequest(replica_id, max_wait_ms, min_bytes, tuple(topics))


_REQUEST_DECODERS = {
    MsgId.PRODUCE: _decode_produce,
    MsgId.CONSUME: _decode_consume,
    MsgId.PING: _decode_ping,
    MsgId.REG_REPLICA: _decode_reg_replica,
    MsgId.PRODUCE_WITH_SEQNUM: _decode_produce,
    MsgId.DISCOVER_PARTITIONS: _decode_discover_partitions,
    MsgId.CREATE_TOPIC: _decode_create_topic,
    MsgId.RELOAD_CONF: _decode_reload_conf,
    MsgId.CONSUME_PEER: _decode_consume_peer,
    MsgId.STATUS: _decode_status,
    MsgId.DISCOVER_TOPICS: _decode_discover_topics,
    MsgId.DISCOVER_TOPOLOGY: _decode_discover_topology,
}


def _load_accelerator():  # type: ignore[no-untyped-def]
    """The C twin of the Produce and Consume decode, or None when it is not built or disabled
    (``RILL_PURE_PYTHON=1``)."""
    if os.environ.get("RILL_PURE_PYTHON") == "1":
        return None
    try:
        from rill.protocol.tank import _requests
    except ImportError:
        return None
    if (_requests.ERR_TRUNCATED, _requests.ERR_VARINT, _requests.ERR_LENGTH) != (
            ERR_TRUNCATED, ERR_VARINT, ERR_LENGTH):
        return None  # built from another source: never run a twin that disagrees
    _requests.set_classes(ProduceRequest, ProduceTopic, ProducePartition, ConsumeRequest,
                          ConsumeTopic, ConsumePartition)
    return _requests


REQUESTS_ACCELERATOR = _load_accelerator()
_FAST_DECODERS = {} if REQUESTS_ACCELERATOR is None else {
    MsgId.PRODUCE: partial(REQUESTS_ACCELERATOR.decode_produce, False),
    MsgId.PRODUCE_WITH_SEQNUM: partial(REQUESTS_ACCELERATOR.decode_produce, True),
    MsgId.CONSUME: REQUESTS_ACCELERATOR.decode_consume,
}
_ENCODE_CONSUME = None if REQUESTS_ACCELERATOR is None else REQUESTS_ACCELERATOR.encode_consume


# --- responses: encode (broker) --------------------------------------------------------------


def encode_response_parts(response: Response) -> list[bytes | memoryview]:
    """The frame of ``response`` as pieces to write in order (a Consume answer's chunks are
    passed through, not copied)."""
    if type(response) is ConsumeResponse:
        if _ENCODE_CONSUME is not None:  # the C twin: frame head and chunks, None: not its case
            parts = _ENCODE_CONSUME(response)
            if parts is not None:
                return parts
        return encode_consume_parts_python(response)
    return [encode_response(response)]


_PRODUCE_ONE = struct.Struct("<BIIB")  # frame msg_id and payload size, request id, the code


def encode_produce_one(request_id: int, code: int) -> bytes:
    """``encode_response`` of the answer to a Produce of one topic entry with one partition
    entry, answered ``code`` (not 0xfc, which carries an endpoint), with no response object:
    the common answer (``protocols.tank.data``'s pipelined runs), the same bytes."""
    if code == ProduceError.OTHER_LEADER:
        raise ValueError("a 0xfc code needs the leader's endpoint")
    return _PRODUCE_ONE.pack(MsgId.PRODUCE, 5, request_id, code)


# the Consume answer of one topic and one partition, OK: frame msg_id and payload size, header
# size, request id, topics (1) | the topic's str8 name | partitions (1), partition, flag, base,
# hwm, chunk size
_ONE_HEAD = struct.Struct("<BIIIB")
_ONE_PARTITION = struct.Struct("<BHBQQI")


def encode_consume_one(request_id: int, name: str, partition: int, base: int, hwm: int,
                       chunk: bytes | memoryview) -> list[bytes | memoryview]:
    """``encode_response_parts`` of the Consume answer of one topic and one partition answered
    OK (``base``, ``hwm``, ``chunk``), with no response object: the common answer
    (``protocols.tank.data``'s tailing consumer), the same bytes."""
    topic = encode_str8(name)
    header_size = 4 + 1 + len(topic) + _ONE_PARTITION.size
    return [_ONE_HEAD.pack(MsgId.CONSUME, 4 + header_size + len(chunk), header_size,
                           request_id, 1)
            + topic + _ONE_PARTITION.pack(1, partition, ConsumeFlag.OK, base, hwm, len(chunk)),
            chunk]


def encode_consume_parts_python(response: ConsumeResponse) -> list[bytes | memoryview]:
    """``encode_response_parts`` of a Consume answer: the reference of the C twin."""
    header, chunks = _consume_header(response)
    size = 4 + len(header) + sum(len(chunk) for chunk in chunks)
    return [frame_header(MsgId.CONSUME, size), U32.pack(len(header)), header, *chunks]


def encode_response(response: Response) -> bytes:
    """The whole frame of ``response``."""
    kind = type(response)
    if kind is ConsumeResponse:
        return b"".join(encode_response_parts(response))
    if kind is ProduceResponse:
        payload = U32.pack(response.request_id) + bytes(response.errors)
    elif kind is Ping:
        payload = b""
    elif kind is DiscoverPartitionsResponse:
        out = [U32.pack(response.request_id), encode_str8(response.topic),
               U16.pack(len(response.partitions))]
        for numbers in response.partitions:
            out += (U64.pack(numbers.first_available), U64.pack(numbers.hwm))
            if numbers.first_available == NO_NUMBERS and numbers.hwm == NO_NUMBERS:
                if numbers.reason is None:
                    raise ValueError("both numbers 2^64-1 need a reason byte")
                out.append(U8.pack(numbers.reason))
                if numbers.reason == DiscoverReason.OTHER_LEADER:
                    out.append(encode_endpoint(numbers.endpoint))
        payload = b"".join(out)
    elif kind is CreateTopicResponse:
        payload = (U32.pack(response.request_id) + encode_str8(response.topic)
                   + U8.pack(response.error))
    elif kind is ReloadConfResponse:
        payload = (U32.pack(response.request_id) + encode_str8(response.topic)
                   + U16.pack(response.partition) + U8.pack(response.error))
    elif kind is StatusResponse:
        out = [U32.pack(response.request_id), U8.pack(response.global_flags),
               U8.pack(response.cluster is not None), U32.pack(response.topics),
               U32.pack(response.partitions)]
        if response.cluster is not None:
            out += (U8.pack(response.cluster.flags), encode_str8(response.cluster.name),
                    U32.pack(response.cluster.nodes_available))
        for value in (response.open_partitions, response.open_partitions_time_us,
                      response.startup_unix_seconds, response.version):
            if value is None:
                break
            out.append(U32.pack(value))
        payload = b"".join(out)
    elif kind is DiscoverTopicsResponse:
        out = [U32.pack(response.request_id), U32.pack(len(response.topics)),
               U8.pack(response.cluster_aware)]
        for topic in response.topics:
            out += (encode_str8(topic.name), U8.pack(topic.enabled), U16.pack(topic.partitions))
            if response.cluster_aware:
                out.append(U8.pack(topic.replication_factor or 0))
        payload = b"".join(out)
    elif kind is DiscoverTopologyResponse:
        if response.cluster_name is None:
            payload = U32.pack(response.request_id) + U16.pack(0xFFFF)
        else:
            out = [U32.pack(response.request_id), U16.pack(len(response.nodes)),
                   encode_str8(response.cluster_name)]
            for node in response.nodes:
                out += (U16.pack(node.id), U8.pack(node.flags))
                if node.flags & 1:
                    out.append(encode_endpoint(node.endpoint))
                out.append(U16.pack(node.partitions))
            payload = b"".join(out)
    else:
        raise TypeError(f"not a TANK response: {response!r}")
    return frame(response.msg_id, payload)


def _consume_header(response: ConsumeResponse) -> tuple[bytes, list]:
    out = [U32.pack(response.request_id), _count8(response.topics)]
    chunks = []
    for topic in response.topics:
        out.append(encode_str8(topic.name))
        if topic.unknown_count is not None:
            out += (U8.pack(topic.unknown_count), U16.pack(UNKNOWN_TOPIC_MARK))
            continue
        out.append(_count8(topic.partitions))
        for part in topic.partitions:
            flag = part.flag
            out.append(U16.pack(part.partition) + U8.pack(flag))
            if flag == ConsumeFlag.OK:
                out.append(U64.pack(part.base) + U64.pack(part.hwm) + U32.pack(len(part.chunk)))
            elif flag == ConsumeFlag.SPARSE_FIRST:
                out.append(U64.pack(part.hwm) + U32.pack(len(part.chunk)))
            elif flag == ConsumeFlag.BOUNDARY_CHECK:
                out.append(U64.pack(part.base) + U64.pack(part.hwm) + U32.pack(len(part.chunk))
                           + U64.pack(part.first_available))
            elif flag == ConsumeFlag.OTHER_LEADER:
                out.append(encode_endpoint(part.endpoint))
            elif flag not in (ConsumeFlag.SYSTEM, ConsumeFlag.NO_LEADER,
                              ConsumeFlag.UNKNOWN_PARTITION):
                raise ValueError(f"0x{flag:02x} is no errorOrFlags value clients know")
            if part.chunk and flag in (ConsumeFlag.OK, ConsumeFlag.SPARSE_FIRST,
                                       ConsumeFlag.BOUNDARY_CHECK):
                chunks.append(part.chunk)
    return b"".join(out), chunks


# --- responses: decode (client) --------------------------------------------------------------


def decode_response(msg_id: int, payload: bytes | bytearray | memoryview) -> Response:
    """The response in one frame (msg_id 0x01 answers both Produce forms)."""
    decoder = _RESPONSE_DECODERS.get(msg_id)
    if decoder is None:
        raise UnknownMessageId(msg_id)
    reader = Reader(payload)
    response = decoder(reader)
    reader.finish()
    return response


def _decode_produce_response(r: Reader) -> ProduceResponse:
    request_id = r.u32()
    return ProduceResponse(request_id, r.raw(r.remaining))


def _decode_consume_response(r: Reader) -> ConsumeResponse:
    header_len = r.u32()
    if header_len > r.remaining:
        raise LengthMismatch(f"header_len {header_len} runs past the payload")
    header = Reader(r.data, r.offset, r.offset + header_len)
    chunk_at = r.offset + header_len
    request_id = header.u32()
    topics = []
    for _ in range(header.u8()):
        name = header.str8()
        count = header.u8()
        # an unknown topic answers 0xFFFF where its first partition id would be (§6.2), so a
        # partition numbered 0xFFFF cannot be told from it; TANK's limit is 65 530 (§7)
        if (header.remaining >= 2 and header.data[header.offset] == 0xFF
                and header.data[header.offset + 1] == 0xFF):
            header.u16()
            topics.append(ConsumeTopicResult(name, (), unknown_count=count))
            continue
        partitions = []
        for _ in range(count):
            partition, flag = header.u16(), header.u8()
            base = hwm = first_available = chunk_len = 0
            endpoint = None
            if flag == ConsumeFlag.OK:
                base, hwm, chunk_len = header.u64(), header.u64(), header.u32()
            elif flag == ConsumeFlag.SPARSE_FIRST:
                hwm, chunk_len = header.u64(), header.u32()
            elif flag == ConsumeFlag.BOUNDARY_CHECK:
                base, hwm, chunk_len = header.u64(), header.u64(), header.u32()
                first_available = header.u64()
            elif flag == ConsumeFlag.OTHER_LEADER:
                endpoint = header.endpoint()
            elif flag not in (ConsumeFlag.SYSTEM, ConsumeFlag.NO_LEADER,
                              ConsumeFlag.UNKNOWN_PARTITION):
                raise LengthMismatch(f"unknown errorOrFlags 0x{flag:02x}")
            if chunk_len > r.end - chunk_at:
                raise LengthMismatch(f"chunk_len {chunk_len} runs past the payload")
            chunk = memoryview(r.data)[chunk_at : chunk_at + chunk_len]
            chunk_at += chunk_len
            partitions.append(ConsumePartitionResult(partition, flag, base, hwm, chunk,
                                                     first_available, endpoint))
        topics.append(ConsumeTopicResult(name, tuple(partitions)))
    header.finish()
    r.offset = chunk_at
    return ConsumeResponse(request_id, tuple(topics))


def _decode_ping_response(r: Reader) -> Ping:
    return Ping()


def _decode_discover_partitions_response(r: Reader) -> DiscoverPartitionsResponse:
    request_id, topic, count = r.u32(), r.str8(), r.u16()
    partitions = []
    for _ in range(count):
        first_available, hwm = r.u64(), r.u64()
        reason = endpoint = None
        if first_available == NO_NUMBERS and hwm == NO_NUMBERS:
            reason = r.u8()
            if reason == DiscoverReason.OTHER_LEADER:
                endpoint = r.endpoint()
        partitions.append(PartitionNumbers(first_available, hwm, reason, endpoint))
    return DiscoverPartitionsResponse(request_id, topic, tuple(partitions))


def _decode_create_topic_response(r: Reader) -> CreateTopicResponse:
    return CreateTopicResponse(r.u32(), r.str8(), r.u8())


def _decode_reload_conf_response(r: Reader) -> ReloadConfResponse:
    return ReloadConfResponse(r.u32(), r.str8(), r.u16(), r.u8())


def _decode_status_response(r: Reader) -> StatusResponse:
    request_id, global_flags, cluster_aware = r.u32(), r.u8(), r.u8()
    topics, partitions = r.u32(), r.u32()
    cluster = None
    if cluster_aware and r.remaining:
        cluster = ClusterStatus(r.u8(), r.str8(), r.u32())
    rest: list[int | None] = []
    for _ in range(4):
        rest.append(r.u32() if r.remaining >= 4 else None)
    return StatusResponse(request_id, topics, partitions, *rest, global_flags=global_flags,
                          cluster=cluster)


def _decode_discover_topics_response(r: Reader) -> DiscoverTopicsResponse:
    request_id, count, cluster_aware = r.u32(), r.u32(), bool(r.u8())
    topics = []
    for _ in range(count):
        name, enabled, partitions = r.str8(), bool(r.u8()), r.u16()
        factor = r.u8() if cluster_aware else None
        topics.append(TopicInfo(name, partitions, enabled, factor))
    return DiscoverTopicsResponse(request_id, tuple(topics), cluster_aware)


def _decode_discover_topology_response(r: Reader) -> DiscoverTopologyResponse:
    request_id, count = r.u32(), r.u16()
    if count == 0xFFFF:
        return DiscoverTopologyResponse(request_id)
    name = r.str8()
    nodes = []
    for _ in range(count):
        node_id, flags = r.u16(), r.u8()
        endpoint = r.endpoint() if flags & 1 else None
        nodes.append(TopologyNode(node_id, flags, r.u16(), endpoint))
    return DiscoverTopologyResponse(request_id, name, tuple(nodes))


_RESPONSE_DECODERS = {
    MsgId.PRODUCE: _decode_produce_response,
    MsgId.CONSUME: _decode_consume_response,
    MsgId.PING: _decode_ping_response,
    MsgId.DISCOVER_PARTITIONS: _decode_discover_partitions_response,
    MsgId.CREATE_TOPIC: _decode_create_topic_response,
    MsgId.RELOAD_CONF: _decode_reload_conf_response,
    MsgId.STATUS: _decode_status_response,
    MsgId.DISCOVER_TOPICS: _decode_discover_topics_response,
    MsgId.DISCOVER_TOPOLOGY: _decode_discover_topology_response,
}
