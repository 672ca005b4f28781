"""TANK's data requests on the neutral broker: Produce (0x01), ProduceWithSeqnum (0x05) and
Consume (0x02) (tank-wire-reference §4-§6, §13).

Owns: these rules.

**Produce**, per (topic, partition) entry in request order (answer: one byte each, grouped as
§5.3 says, ``messages.produce_error_bytes``):

* unknown topic 0xff (one byte for the topic), unknown partition 0x01;
* a topic stored as ``iggy-v1`` (made by an Iggy client, the CLI or HTTP in the namespace)
  takes the batch below converted on the way in, one Iggy record per message
  (``broker.append(record_format="kafka-v2")``, the Kafka listener's rule for the same case:
  key -> the ``rill.key`` header, timestamps kept in µs); an empty message (no Iggy payload)
  and explicit numbers that skip (an Iggy log's offsets are dense) are 0x02 with a log line,
  nothing written;
* the bundle is decoded and validated (``protocol.tank.bundles``: codec 0/1, Snappy that
  inflates to at most ``MAX_SET_SIZE``, counts and lengths that agree, flags known, sparse
  numbers increasing); an invalid one is 0x02 and nothing is written;
* explicit sequence numbers (a SPARSE bundle, or ProduceWithSeqnum's ``first_seq``; 0 means
  none): numbers at or below the high-water mark are 0x0a (TANK's rule), and nothing is
  written. Numbers above it are kept, holes included (seq = offset + 1 still: the batch's
  offsets skip where the numbers do, as a compacted Kafka batch's do, ``broker.append(...,
  gaps=True)``), so every protocol reads them back at those numbers and the high-water mark
  becomes the last of them. TANK appends with explicit numbers are serialized per partition
  between check and append (``TankSettings.numbered_append_lock``); an append by another
  protocol in that moment would shift them (logged);
* the messages become **one** RecordBatch v2 (``protocol.tank.record_batches``, the
  per-message loop in C) appended through ``broker.append``, stamped at the batch's
  maxTimestamp like the Kafka listener's batches, so Kafka, Iggy, HTTP, the CLI and Spark read
  key and timestamp; a failed append (storage, permissions) is 0x02. A Snappy bundle (codec 1)
  is stored compressed, as produced: its records section as one raw Snappy block (Kafka's
  snappy codec, which every Kafka client and every rill reader inflates), unless that is not
  smaller; a codec-0 bundle, and any bundle into an ``iggy-v1`` topic, is stored
  uncompressed. Every 0x02 is logged at info, once per client address and cause, then at most
  once a minute with a count (``logs.Refusals``): a client retrying a bad produce does not
  flood the log;
* pipelined requests (``produce_all``: Produce requests the connection had queued one right
  behind the other): a run of requests that each carry one bundle without explicit numbers
  for the same partition is **one** append of their batches, in order (one write, one wait
  for durability and the ISR), and each request of the run is answered that append's code; a
  bundle of the run that does not decode is 0x02 alone. Anything else is produced alone, in
  its place.

**In a cluster** (``Broker.cluster``; tank-wire-reference §5.3, §6.3): a partition another
node leads is answered 0xfc and that leader's ``tank`` address (addr4:u32 port:u16) by Produce
and Consume, one with no leader 0xfd (``dispatch.leadership``); the TANK client reconnects
there. A produce to a replicated partition (more than one replica) is appended with
``acks=ACKS_ALL`` whatever ``required_acks`` says: TANK's 0, 255 (all) and N all wait here
until every in-sync replica holds the bundle (rill has no "N replicas" acknowledgement, and a
TANK client reads an answer as "stored"), for the request's ``ack_timeout`` ms (0: 30 s).
The ISR below its minimum is 0x04 (insufficient replicas, nothing written), the ISR not
reached in time 0x03 (written on the leader, may still be committed).

**Consume**, per partition (§6.4; first = first available seq, last = high-water mark; the
first available is the first *stored* number, ``dispatch.first_available``: 100, not 1, when
the partition's first produce gave explicit numbers from 100):

* seq 0 = from the first; 2^64-1, last + 1 (and 0 on an empty partition) = at EOF; above
  last + 1 or below first (a seq in the hole before the first stored number included) =
  boundary-check failure 0x01 with ``first_available``; unknown topic
  0xFFFF, unknown partition 0xff, a read failure (storage, permissions) 0xfb;
* data: the stored batches from the one holding ``seq`` (whole batches, at least one, up to
  ``fetch_size`` stored bytes: the whole-bundles rule of §6.5), one bundle per stored batch
  (control batches skipped; an ``iggy-v1`` topic read through the broker's conversion), the
  per-record loops in C; a stored batch that is compressed (a Snappy bundle stored as
  produced, or a Kafka producer's gzip/snappy/lz4/zstd batch) is inflated
  (``protocol.kafka.record_batch.decompress``) and served as a Snappy bundle (codec 1, TANK's
  only codec; uncompressed where Snappy would not be smaller), so a consumer gets about the
  bytes TANK would send it; an uncompressed one is served uncompressed. A bundle is SPARSE
  wherever numbering does not continue from the bundle before it (gaps), and the header's
  ``base`` is the first bundle's first seq;
* long poll (§6.6): when ``max_wait_ms`` > 0 and every partition is at EOF the request waits
  (its answer comes later: the connection answers the requests sent behind it meanwhile, as
  TANK does)
  (``broker.wait_any``: the bytes of every partition of the request count together) until
  ``min_bytes`` (stored bytes, at least one message) arrived or ``max_wait_ms`` (at most one hour, honoured exactly)
  passed. Then every partition answers 0x00: woken, those that got data with ``base`` = the
  first new seq and everything appended since (not limited by ``fetch_size``), the others
  ``base`` 0, empty; timed out (less than ``min_bytes`` arrived), every one ``base`` 0, empty.
  An immediate EOF answer carries ``base`` = first available;
* the common Consume (one partition, a seq inside what is stored) has a short path with the
  same answer, encoded at once (``_consume_stored``); pipelined Consumes (``consume_all``:
  Consume requests the connection had queued one right behind the other) are answered
  together, each as alone: a partition is looked up once for the run, and the batches that
  several requests ask for are read once, ahead (at most ``WINDOW_BYTES`` a partition); a
  run stops once its answers hold ``RUN_ANSWER_BYTES``, and the connection hands the rest
  over again after it has taken those.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from typing import Awaitable, Union

from rill import errors
from rill.protocol.kafka.record_batch import decompress
from rill.protocol.tank import messages as m
from rill.protocol.tank.bundles import (
    CODEC_SNAPPY,
    BundleHeader,
    decode_bundle,
    decode_header,
    encode_bundle,
    frame_bundle,
    message_set,
)
from rill.protocol.tank.errors import ConsumeFlag, ProduceError, TankDecodeError
from rill.protocol.tank.record_batches import (
    HEADER_SIZE,
    InvalidColumns,
    batch_columns,
    batch_from_bundle,
    batch_from_set,
    batch_head,
    batches_with_records,
    contiguous_bundle,
    stored_chunk,
)
from rill.server.core.broker import PartitionReader
from rill.server.core.cluster_view import ACKS_ALL, ACKS_LEADER
from rill.server.core.core import Core
from rill.server.core.types import Session, Topic
from rill.server.logs import Refusals
from rill.server.protocols.tank.dispatch import (
    RECORD_FORMAT,
    TankSettings,
    first_available,
    leadership,
    numbers,
    ref,
    topic_named,
)
from rill.server.storage.formats.kafka_v2 import batch_time_us

log = logging.getLogger(__name__)

MAX_SET_SIZE = 64 * 1024 * 1024  # a Snappy message set may inflate to at most this
MAX_FETCH = 64 * 1024 * 1024  # fetch_size is clamped to this (TANK's clamp)
MAX_WAIT_MS = 3_600_000  # TANK's own cap: one hour
_REFUSALS = Refusals()  # a refused produce: one line per client and cause, then a count
_MAX_RECORDS = 1 << 31
# the most a run of Consumes reads ahead of one partition for the requests behind the first
WINDOW_BYTES = 4 * 1024 * 1024
# a run of Consumes stops being answered once its answers hold this many bytes of chunks
RUN_ANSWER_BYTES = 4 * 1024 * 1024
# a Produce's answer: encoded (the frame), or a response
ProduceAnswer = Union[bytes, m.ProduceResponse]
# a Consume's answer: encoded (the frame's parts), a response, or an awaitable one (a long poll)
ConsumeAnswer = Union[list, m.ConsumeResponse, Awaitable[m.ConsumeResponse]]


# -- Produce ---------------------------------------------------------------------------------


_DEFAULT_ACK_TIMEOUT = 30.0  # seconds an acks=all produce waits when the request says 0


Code = int | tuple[int, tuple[str, int]]  # a partition's code, or (0xfc, the leader's endpoint)


def _placed(core: Core, topic: Topic, partition: int) -> tuple[Code | None, int]:
    """(the code when this node may not append to ``partition``, else None; the acks its
    appends wait for)."""
    if not 0 <= partition < len(topic.partitions):
        return ProduceError.UNKNOWN_PARTITION, ACKS_LEADER
    elsewhere, endpoint = leadership(core, topic, partition)
    if elsewhere:
        return (ProduceError.NO_LEADER if endpoint is None
                else (ProduceError.OTHER_LEADER, endpoint)), ACKS_LEADER
    placement = topic.partitions[partition + 1].placement
    return None, (ACKS_ALL if placement is not None and len(placement.replicas) > 1
                  else ACKS_LEADER)


async def _append(core: Core, session: Session, settings: TankSettings, topic: Topic,
                  part: m.ProducePartition, batch: bytes, acks: int, ack_timeout: float
                  ) -> Code:
    """Append ``batch`` (one or more RecordBatches without explicit numbers) to the entry's
    partition; its code."""
    try:
        await core.broker.append(session, ref(settings, topic.name, part.partition), batch,
                                 batch_time_us(batch), record_format=RECORD_FORMAT, acks=acks,
                                 ack_timeout=ack_timeout)
    except Exception as error:  # noqa: BLE001 - mapped, or raised again, by _append_failed
        return _append_failed(core, session, topic, part, error)
    return ProduceError.OK


def _append_failed(core: Core, session: Session, topic: Topic, part: m.ProducePartition,
                   error: Exception) -> Code:
    """The code of an append that raised ``error`` (raised again when it is not one of the
    refusals a produce answers)."""
    if isinstance(error, InvalidColumns):
        _refused(session, topic, part, "refused", error)
        return ProduceError.SYSTEM
    if isinstance(error, errors.NotEnoughReplicas):
        return ProduceError.INSUFFICIENT_REPLICAS
    if isinstance(error, errors.ReplicationTimedOut):
        return ProduceError.REPLICA_ACK_TIMEOUT
    if isinstance(error, (errors.NotLeaderForPartition, errors.LeaderNotAvailable)):
        _elsewhere, endpoint = leadership(core, topic, part.partition)  # lost it meanwhile
        return ProduceError.NO_LEADER if endpoint is None else (ProduceError.OTHER_LEADER,
                                                                 endpoint)
    if isinstance(error, errors.RillError):
        _refused(session, topic, part, "failed", error)
        return ProduceError.SYSTEM
    raise error


def _plain_batch(session: Session, topic: Topic, part: m.ProducePartition,
                 header: BundleHeader | None = None) -> bytes | None:
    """The common shape's batch (no explicit numbers): the message set straight into one
    RecordBatch, one C pass; None when the bundle is refused (logged). ``header``: the
    bundle's, decoded already."""
    try:
        if header is None:
            header = decode_header(part.bundle)
        compress = header.codec == CODEC_SNAPPY and topic.record_format == RECORD_FORMAT
        return batch_from_set(message_set(part.bundle, header, MAX_SET_SIZE), header.count,
                              compress=compress)
    except (TankDecodeError, InvalidColumns) as error:
        _refused(session, topic, part, "refused", error)
        return None


async def _produce_partition(core: Core, session: Session, settings: TankSettings, topic: Topic,
                             part: m.ProducePartition, ack_timeout: float) -> Code:
    """The partition's code; (0xfc, the leader's endpoint) when another node leads it."""
    code, acks = _placed(core, topic, part.partition)
    if code is not None:
        return code
    try:
        header = decode_header(part.bundle)
        explicit = header.sparse or part.first_seq
    except TankDecodeError as error:
        _refused(session, topic, part, "refused", error)
        return ProduceError.SYSTEM
    if not explicit:
        batch = _plain_batch(session, topic, part)
        if batch is None:
            return ProduceError.SYSTEM
        return await _append(core, session, settings, topic, part, batch, acks, ack_timeout)
    try:  # explicit numbers: the columns are needed
        compress = header.codec == CODEC_SNAPPY and topic.record_format == RECORD_FORMAT
        bundle = decode_bundle(part.bundle, max_set_size=MAX_SET_SIZE)
        batch = batch_from_bundle(bundle.keys, bundle.values, bundle.timestamps,
                                  compress=compress)
        first = bundle.seqs[0] if bundle.sparse else part.first_seq
    except (TankDecodeError, InvalidColumns) as error:
        _refused(session, topic, part, "refused", error)
        return ProduceError.SYSTEM
    where = ref(settings, topic.name, part.partition)
    broker = core.broker
    try:
        seqs = bundle.seqs if bundle.sparse else range(first, first + len(bundle.values))
        async with settings.numbered_append_lock(topic.id, part.partition):
            next_seq = broker.bounds(session, where).high_watermark + 1  # offset + 1
            if first < next_seq:
                return ProduceError.INVALID_SEQ_NUM
            gaps = first != next_seq or seqs[-1] - first + 1 != len(seqs)
            if gaps:  # the offsets skip where the numbers do
                batch = batch_from_bundle(bundle.keys, bundle.values, bundle.timestamps,
                                          [seq - next_seq for seq in seqs], compress=compress)
            result = await broker.append(session, where, batch, batch_time_us(batch), gaps,
                                         record_format=RECORD_FORMAT, acks=acks,
                                         ack_timeout=ack_timeout)
        if result.last_offset != seqs[-1] - 1:
            log.warning("TANK produce to %s/%d: explicit seqs %d..%d stored at offsets %d..%d "
                        "(another protocol appended meanwhile)", topic.name, part.partition,
                        first, seqs[-1], result.first_offset, result.last_offset)
    except Exception as error:  # noqa: BLE001 - mapped, or raised again, by _append_failed
        return _append_failed(core, session, topic, part, error)
    return ProduceError.OK


def _refused(session: Session, topic: Topic, part: m.ProducePartition, what: str,
             error: Exception) -> None:
    """Log a produce answered 0x02: once per client address and cause (the partition and the
    kind of error), then at most once a minute with a count (``logs.Refusals``)."""
    _REFUSALS.log(log, session.address, f"{topic.name}/{part.partition} {type(error).__name__}",
                  "client %d (%s): TANK produce to %s/%d %s: %s", session.client_id,
                  session.address, topic.name, part.partition, what, error)


def _ack_timeout(request: m.ProduceRequest) -> float:
    return request.ack_timeout / 1000 if request.ack_timeout > 0 else _DEFAULT_ACK_TIMEOUT


def _answer(request: m.ProduceRequest, code: Code) -> m.ProduceResponse:
    """The answer of a request of one partition entry."""
    if type(code) is tuple:
        return m.ProduceResponse(request.request_id,
                                 m.produce_error_bytes(request, [code[0]], {0: code[1]}))
    return m.ProduceResponse(request.request_id, m.produce_error_bytes(request, [code], {}))


def _answer_one(request: m.ProduceRequest, code: Code) -> ProduceAnswer:
    """``_answer``, encoded at once unless it carries a leader's endpoint."""
    if type(code) is tuple:
        return _answer(request, code)
    return m.encode_produce_one(request.request_id, code)


def _run_key(request: m.ProduceRequest
             ) -> tuple[tuple[str, int, float], BundleHeader] | tuple[None, None]:
    """What a run of pipelined requests sharing one append has in common (topic, partition,
    ack timeout) when ``request`` is of the shape that may join one -- one topic, one
    partition, a bundle without explicit numbers -- with the bundle's header; (None, None)
    otherwise."""
    if request.with_seqnum or len(request.topics) != 1:
        return None, None
    partitions = request.topics[0].partitions
    if len(partitions) != 1:
        return None, None
    try:
        header = decode_header(partitions[0].bundle)
    except TankDecodeError:
        return None, None  # (refused on its own, as alone)
    if header.sparse:
        return None, None
    return (request.topics[0].name, partitions[0].partition, _ack_timeout(request)), header


async def produce_all(core: Core, session: Session, settings: TankSettings,
                      requests: list[m.ProduceRequest]) -> list[ProduceAnswer]:
    """The answers of Produce requests pipelined one right behind the other
    (``transports.binary``'s "served together"). A run of two or more of the common shape
    for the same partition and the same ack timeout (``_run_key``) is appended as one
    write: their batches, in order, one region, one append, one wait for durability (and for
    the ISR in a cluster), and each request of it gets that append's code -- a refused write
    wrote none of them, as a refusal of each alone would have. A bundle of the run that does
    not decode is refused alone (0x02, nothing of it written) and the others go on. Any other
    request is produced alone, in its place."""
    responses: list[ProduceAnswer] = []
    shapes = [_run_key(request) for request in requests]
    at = 0
    while at < len(requests):
        end = at + 1
        key = shapes[at][0]
        if key is not None:
            while end < len(requests) and shapes[end][0] == key:
                end += 1
        if end - at == 1:
            responses.append(await produce(core, session, settings, requests[at]))
        else:
            responses.extend(await _produce_run(core, session, settings, requests[at:end],
                                                [header for _key, header in shapes[at:end]]))
        at = end
    return responses


async def _produce_run(core: Core, session: Session, settings: TankSettings,
                       run: list[m.ProduceRequest], headers: list[BundleHeader]
                       ) -> list[ProduceAnswer]:
    """``produce_all``'s run: requests of one plain entry each, for one partition (their
    bundles' ``headers``); answers encoded at once (``messages.encode_produce_one``) but a
    0xfc's."""
    first = run[0]
    topic = topic_named(core, session, settings, first.topics[0].name)
    if topic is None:
        return [_answer_one(request, ProduceError.UNKNOWN_TOPIC) for request in run]
    part = first.topics[0].partitions[0]
    code, acks = _placed(core, topic, part.partition)
    if code is not None:
        return [_answer_one(request, code) for request in run]
    codes: list[Code] = []
    batches: list[bytes] = []
    for request, header in zip(run, headers):
        batch = _plain_batch(session, topic, request.topics[0].partitions[0], header)
        codes.append(ProduceError.SYSTEM if batch is None else ProduceError.OK)
        if batch is not None:
            batches.append(batch)
    if batches:
        appended = await _append(core, session, settings, topic, part,
                                 batches[0] if len(batches) == 1 else b"".join(batches), acks,
                                 _ack_timeout(first))
        codes = [appended if code == ProduceError.OK else code for code in codes]
    return [_answer_one(request, code) for request, code in zip(run, codes)]


async def produce(core: Core, session: Session, settings: TankSettings,
                  request: m.ProduceRequest) -> m.ProduceResponse:
    codes: list[int] = []
    endpoints: dict[int, tuple[str, int]] = {}
    ack_timeout = _ack_timeout(request)
    for entry in request.topics:
        topic = topic_named(core, session, settings, entry.name)
        for part in entry.partitions:
            if topic is None:
                codes.append(ProduceError.UNKNOWN_TOPIC)
                continue
            code = await _produce_partition(core, session, settings, topic, part, ack_timeout)
            if type(code) is tuple:
                code, endpoints[len(codes)] = code
            codes.append(code)  # type: ignore[arg-type]
    return m.ProduceResponse(request.request_id,
                             m.produce_error_bytes(request, codes, endpoints))


# -- Consume ---------------------------------------------------------------------------------


def build_chunk(data) -> tuple[list[bytes], int]:
    """Stored RecordBatch v2 bytes -> (framed bundles, first seq), one bundle per batch, a
    compressed batch as a Snappy bundle; a bundle is SPARSE where numbering does not continue
    from the one before. (.., 0): none. Uncompressed batches numbered without holes, the
    common case, are converted in one C call (``stored_chunk``)."""
    found = stored_chunk(data)
    if found is not None:
        chunk, base = found
        return ([chunk] if chunk else []), base
    out: list[bytes] = []
    base = 0
    next_seq = None
    for head, batch in batches_with_records(data):
        records = batch[HEADER_SIZE:]
        compressed = head.codec != 0
        if compressed:
            records = decompress(head.codec, records)
        whole = contiguous_bundle(head, records, compressed)
        if whole is not None:
            framed, first_delta, last_delta = whole
            first = head.base_offset + first_delta + 1
        if whole is None or (next_seq is not None and first != next_seq):
            # holes inside the batch, or a jump from the bundle before: explicit numbers
            keys, values, timestamps, deltas = batch_columns(head, records)
            first_delta, last_delta = deltas[0], deltas[-1]
            first = head.base_offset + first_delta + 1
            seqs = (range(first, first + head.count) if whole is not None  # a jump only
                    else [head.base_offset + delta + 1 for delta in deltas])  # holes (rare)
            framed = frame_bundle(encode_bundle(values, keys, timestamps, seqs,
                                                codec=CODEC_SNAPPY if compressed else 0))
        out.append(framed)
        if next_seq is None:
            base = first
        next_seq = head.base_offset + last_delta + 2
    return out, base


class _Wanted:
    __slots__ = ("partition", "seq", "fetch_size", "flag", "base", "hwm", "chunk",
                 "first_available", "wait_offset", "ref", "endpoint")

    def __init__(self, partition: m.ConsumePartition) -> None:
        self.partition = partition.partition
        self.seq = partition.seq
        self.fetch_size = partition.fetch_size
        self.flag: int | None = None  # None: at EOF (may wait)
        self.base = self.hwm = self.first_available = 0
        self.chunk: list[bytes] = []
        self.wait_offset = 0
        self.ref = None
        self.endpoint: tuple[str, int] | None = None  # OTHER_LEADER's


def _read(reader: PartitionReader, wanted: _Wanted, offset: int, max_bytes: int) -> bool:
    """Fill ``wanted`` from ``offset`` through the partition the request opened; whether it
    got messages."""
    found = reader.read(offset, _MAX_RECORDS, RECORD_FORMAT, max_bytes=max_bytes)
    wanted.hwm = found.bounds.high_watermark
    if not found.count:
        return False
    chunk, base = build_chunk(found.data)
    if not chunk:
        return False
    wanted.flag, wanted.base, wanted.chunk = ConsumeFlag.OK, base, chunk
    return True


def _look(core: Core, session: Session, wanted: _Wanted) -> None:
    """The immediate answer of one known partition, or ``flag`` None: at EOF."""
    try:
        reader = core.broker.reader(session, wanted.ref)  # one lookup for bounds and read
        first, last = numbers(reader.bounds())
        wanted.hwm, wanted.base, wanted.wait_offset = last, first, last
        seq = wanted.seq
        if seq == m.SEQ_ONLY_NEW or seq == last + 1 or (seq == m.SEQ_FROM_FIRST and not first):
            return  # at EOF: an immediate answer's base is the first available (``consume``)
        if seq == m.SEQ_FROM_FIRST:
            seq = first
        elif seq > last + 1 or seq < first:
            if not core.broker.leadership_certain():  # its lease may be gone: never "out of
                wanted.flag = ConsumeFlag.NO_LEADER  # bounds" (a client resets), "ask again"
                return
            _boundary(core, session, wanted)
            return
        fetch_size = min(max(wanted.fetch_size, 1), MAX_FETCH)
        if (_read(reader, wanted, seq - 1, fetch_size) and wanted.base > seq
                and wanted.seq != m.SEQ_FROM_FIRST):
            # seq falls in a hole: below the first stored number it is out of bounds
            if seq < first_available(core, session, wanted.ref):
                wanted.chunk = []
                _boundary(core, session, wanted)
    except Exception as error:  # storage, permissions, a stored batch that does not read
        log.info("client %d: TANK consume of partition %d failed: %s", session.client_id,
                 wanted.partition, error)
        wanted.flag = ConsumeFlag.SYSTEM


def _boundary(core: Core, session: Session, wanted: _Wanted) -> None:
    wanted.flag, wanted.base = ConsumeFlag.BOUNDARY_CHECK, 0
    wanted.first_available = first_available(core, session, wanted.ref)


def _eof_base(core: Core, session: Session, wanted: _Wanted) -> None:
    """An immediate EOF answer's base: the first available seq."""
    try:
        wanted.base = first_available(core, session, wanted.ref)
    except Exception as error:  # storage, permissions, a stored batch that does not read
        log.info("client %d: TANK consume of partition %d failed: %s", session.client_id,
                 wanted.partition, error)
        wanted.flag = ConsumeFlag.SYSTEM


async def _wait(core: Core, session: Session, settings: TankSettings,
                by_topic: dict[str, list[_Wanted]], min_bytes: int, timeout: float) -> bool:
    """Until ``min_bytes`` (at least one message) arrived past the partitions' ends or
    ``timeout`` passed; whether they arrived (False: timed out)."""
    need = max(min_bytes, 1)
    arrived = await core.broker.wait_any(
        session, settings.stream,
        {name: [(wanted.partition + 1, wanted.wait_offset) for wanted in parts]
         for name, parts in by_topic.items()}, need, timeout)
    return arrived >= need


def _woken(core: Core, session: Session, wanted: _Wanted, reached: bool) -> None:
    """After a wait that ``reached`` min_bytes: what arrived past the wait offset (whole, not
    limited by fetch_size), else base 0 and nothing; after a timeout: base 0 and nothing for
    every partition (TANK's timed-out form, even when less than min_bytes arrived)."""
    wanted.flag, wanted.base, wanted.chunk = ConsumeFlag.OK, 0, []
    try:
        reader = core.broker.reader(session, wanted.ref)
        if not reached:
            wanted.hwm = reader.bounds().high_watermark
        elif not _read(reader, wanted, wanted.wait_offset, MAX_FETCH):
            wanted.flag, wanted.base = ConsumeFlag.OK, 0
    except Exception as error:  # storage, permissions, a stored batch that does not read
        log.info("client %d: TANK consume of partition %d failed: %s", session.client_id,
                 wanted.partition, error)
        wanted.flag, wanted.base, wanted.chunk = ConsumeFlag.OK, 0, []


def consume(core: Core, session: Session, settings: TankSettings, request: m.ConsumeRequest,
            run: _Run | None = None) -> ConsumeAnswer:
    """The answer now, or (every partition at EOF and ``max_wait_ms`` > 0) an awaitable of the
    answer after the long poll: the connection answers the requests behind it meanwhile. The
    common request -- one partition, a seq inside what is stored -- is answered by
    ``_consume_stored``, already encoded (the frame's parts, ``messages.encode_consume_one``);
    everything else, and anything it passes on, by ``_consume_planned``. ``run``: the
    requests this one is served with (``consume_all``)."""
    answer = _consume_stored(core, session, settings, request, _Run([]) if run is None else run)
    return answer if answer is not None else _consume_planned(core, session, settings, request)


def consume_all(core: Core, session: Session, settings: TankSettings,
                requests: list[m.ConsumeRequest]) -> list[ConsumeAnswer]:
    """The answers of Consume requests pipelined one right behind the other
    (``transports.binary``'s "served together"), in order, each as ``consume`` answers it
    alone (a long poll's answer comes later; the requests behind it are answered now). The
    run is served in one go, with no suspension, so nothing it reads changes meanwhile: the
    partitions it reads are looked up, checked and opened once, and the batches that several
    of its requests for one partition ask for are read once (``_Run``), what a tailing
    consumer with many requests in flight asks for. Once the answers hold
    ``RUN_ANSWER_BYTES`` of chunks, the requests after them are not answered: the connection
    hands them over again (``transports.binary``), after it has taken these."""
    run = _Run(requests)
    answers: list[ConsumeAnswer] = []
    held = 0
    for request in requests:
        answer = consume(core, session, settings, request, run)
        answers.append(answer)
        if type(answer) is list:
            held += len(answer[-1])
        elif type(answer) is m.ConsumeResponse:
            held += sum(len(part.chunk) for topic in answer.topics for part in topic.partitions)
        if held >= RUN_ANSWER_BYTES:
            break  # the rest are served next, once the connection has these
    return answers


class _Opened:
    """A partition ``_consume_stored`` opened for the requests of a run: its reader, first
    seq and high-water mark; how many requests of the run are still to read it, how many bytes
    the last one was answered, and the whole batches read ahead for them (``window``: data,
    the first offset and byte position of each batch and the end of the data, and whether it
    reaches the high-water mark)."""

    __slots__ = ("reader", "first", "last", "behind", "unit", "window")

    def __init__(self, reader: PartitionReader, first: int, last: int, behind: int) -> None:
        self.reader, self.first, self.last, self.behind = reader, first, last, behind
        self.unit = 0
        self.window: tuple[bytes, list[int], list[int], bool] | None = None

    def read(self, offset: int, max_bytes: int) -> tuple[bytes | memoryview, int]:
        """(stored bytes, high-water mark) of whole batches from the one holding ``offset``
        within ``max_bytes`` (at least one): ``PartitionReader.read``'s, taken from the
        window when it holds them, else read -- ahead for the requests behind, when more are
        to come (``WINDOW_BYTES`` at most)."""
        self.behind -= 1
        taken = self._take(offset, max_bytes)
        if taken is not None:
            return taken, self.last
        ahead = min(self.behind * max(self.unit, max_bytes), WINDOW_BYTES)
        if self.unit and ahead > max_bytes:
            read = self.reader.read(offset, _MAX_RECORDS, RECORD_FORMAT, max_bytes=ahead)
            self.window = _window(read.data, read.next_read >= self.last)
            taken = self._take(offset, max_bytes)
            if taken is not None:
                return taken, read.bounds.high_watermark
        read = self.reader.read(offset, _MAX_RECORDS, RECORD_FORMAT, max_bytes=max_bytes)
        data = read.data
        self.unit = len(data)
        return data, read.bounds.high_watermark

    def _take(self, offset: int, max_bytes: int) -> memoryview | None:
        """The window's answer to a read from ``offset``, the same bytes the log would give;
        None when the window does not hold it whole."""
        window = self.window
        if window is None:
            return None
        data, offsets, positions, complete = window
        first = bisect_right(offsets, offset) - 1
        if first < 0:
            return None
        end = max(bisect_right(positions, positions[first] + max_bytes, first + 1) - 1,
                  first + 1)
        if end == len(offsets) and not complete:
            return None  # the log may hold more that fits: read it
        self.unit = positions[end] - positions[first]
        return memoryview(data)[positions[first]:positions[end]]


class _Run:
    """The Consume requests served together (``consume_all``): the partitions opened for them
    (``_Opened``, or None where ``_consume_stored`` does not answer) and how many of the
    requests of the common shape ask for each."""

    __slots__ = ("opened", "asking")

    def __init__(self, requests: list[m.ConsumeRequest]) -> None:
        self.opened: dict[tuple[str, int], _Opened | None] = {}
        self.asking: dict[tuple[str, int], int] = {}
        for request in requests:
            if len(request.topics) == 1 and len(request.topics[0].partitions) == 1:
                key = (request.topics[0].name, request.topics[0].partitions[0].partition)
                self.asking[key] = self.asking.get(key, 0) + 1


def _window(data, complete: bool) -> tuple[bytes, list[int], list[int], bool]:
    """Whole stored batches as a window (``_Opened``): their first offsets and byte positions
    (and the end of the data)."""
    offsets: list[int] = []
    positions: list[int] = []
    at = 0
    while (head := batch_head(data, at)) is not None:  # (a read gives whole batches)
        offsets.append(head.base_offset)
        positions.append(at)
        at += head.length
    positions.append(at)
    return data, offsets, positions, complete


def _consume_stored(core: Core, session: Session, settings: TankSettings,
                    request: m.ConsumeRequest, run: _Run) -> list[bytes | memoryview] | None:
    """The answer to a Consume of one partition from a seq between the first available and the
    high-water mark, this node leading it, the chunk in one read and one C conversion
    (``build_chunk``): what a tailing consumer asks for again and again. None for anything
    else -- seq 0, EOF without a wait, out of bounds, a hole, an unknown topic or partition,
    another leader, a failure of any kind -- which ``_consume_planned`` answers (and
    reports). The answer is encoded at once (``messages.encode_consume_one``), the bytes of
    ``_consume_planned``'s answer. At the partition's end with a wait (a tailing consumer's
    long poll), the awaitable of ``_consume_planned``'s answer (``_tail``). The partition is
    opened once for the ``run``, and its batches read once for the requests of the run that
    ask for them (``_Opened.read``)."""
    if len(request.topics) != 1 or len(request.topics[0].partitions) != 1:
        return None
    entry = request.topics[0]
    wanted = entry.partitions[0]
    seq = wanted.seq
    if seq == m.SEQ_FROM_FIRST or seq == m.SEQ_ONLY_NEW:
        return None
    number = wanted.partition
    key = (entry.name, number)
    opened = run.opened.get(key, False)
    if opened is False:
        opened = run.opened[key] = _open_stored(core, session, settings, entry.name, number,
                                                run.asking.get(key, 1))
    if opened is None:
        return None
    if not opened.first <= seq <= opened.last:
        if seq == opened.last + 1 and request.max_wait_ms > 0:  # at the end: a long poll
            return _tail(core, session, settings, request, opened)
        return None
    try:
        data, hwm = opened.read(seq - 1, min(max(wanted.fetch_size, 1), MAX_FETCH))
        chunk, base = build_chunk(data)
    except Exception:  # storage, a stored batch that does not read: _consume_planned
        return None  # reads again, and reports it
    if not chunk or base > seq:
        return None
    return m.encode_consume_one(request.request_id, entry.name, number, base, hwm,
                                chunk[0] if len(chunk) == 1 else b"".join(chunk))


async def _tail(core: Core, session: Session, settings: TankSettings,
                request: m.ConsumeRequest, opened: _Opened) -> m.ConsumeResponse:
    """``_long_poll``'s answer to a Consume of one partition at its end, waiting on the
    partition opened already (``PartitionReader.wait``) instead of looking it up again."""
    entry = request.topics[0]
    wanted = _Wanted(entry.partitions[0])
    wanted.ref = ref(settings, entry.name, wanted.partition)
    wanted.hwm = wanted.wait_offset = opened.last
    need = max(request.min_bytes, 1)
    arrived = await opened.reader.wait(opened.last, need,
                                       min(request.max_wait_ms, MAX_WAIT_MS) / 1000)
    _woken(core, session, wanted, arrived >= need)
    return _response(request, [(entry.name, 1, [wanted])])


def _open_stored(core: Core, session: Session, settings: TankSettings, name: str,
                 number: int, asking: int) -> _Opened | None:
    """TANK partition ``number`` of topic ``name`` opened for reading by ``session`` for
    ``asking`` requests; None when it is unknown, another node leads it, or it may not be
    read (``_consume_planned`` answers those)."""
    topic = topic_named(core, session, settings, name)
    if (topic is None or not 0 <= number < len(topic.partitions)
            or leadership(core, topic, number)[0]):
        return None
    try:
        reader = core.broker.reader(session, ref(settings, topic.name, number))
        first, last = numbers(reader.bounds())
    except Exception:  # permissions, storage: _consume_planned reports it
        return None
    return _Opened(reader, first, last, asking)


def _consume_planned(core: Core, session: Session, settings: TankSettings,
                     request: m.ConsumeRequest
                     ) -> m.ConsumeResponse | Awaitable[m.ConsumeResponse]:
    """Any Consume: a plan of every partition asked for, answered now or after a long poll."""
    answered = False
    plan: list[tuple[str, int, list[_Wanted] | None]] = []
    for entry in request.topics:
        topic = topic_named(core, session, settings, entry.name)
        if topic is None:
            plan.append((entry.name, len(entry.partitions), None))
            answered = True
            continue
        parts = []
        for partition in entry.partitions:
            wanted = _Wanted(partition)
            if not 0 <= wanted.partition < len(topic.partitions):
                wanted.flag = ConsumeFlag.UNKNOWN_PARTITION
            elif (led := leadership(core, topic, wanted.partition))[0]:
                wanted.endpoint = led[1]
                wanted.flag = (ConsumeFlag.NO_LEADER if led[1] is None
                               else ConsumeFlag.OTHER_LEADER)
            else:
                wanted.ref = ref(settings, topic.name, wanted.partition)
                _look(core, session, wanted)
            answered = answered or wanted.flag is not None
            parts.append(wanted)
        plan.append((entry.name, len(entry.partitions), parts))
    if answered or request.max_wait_ms <= 0 or not plan:
        for _name, _count, parts in plan:
            for wanted in parts or ():
                if wanted.flag is None and wanted.base:
                    _eof_base(core, session, wanted)
        return _response(request, plan)
    return _long_poll(core, session, settings, request, plan)


async def _long_poll(core: Core, session: Session, settings: TankSettings,
                     request: m.ConsumeRequest, plan) -> m.ConsumeResponse:
    by_topic: dict[str, list[_Wanted]] = {}
    for name, _count, parts in plan:
        by_topic.setdefault(name, []).extend(parts or ())
    timeout = min(request.max_wait_ms, MAX_WAIT_MS) / 1000
    reached = await _wait(core, session, settings, by_topic, request.min_bytes, timeout)
    for parts in by_topic.values():
        for wanted in parts:
            _woken(core, session, wanted, reached)
    return _response(request, plan)


def _response(request: m.ConsumeRequest, plan) -> m.ConsumeResponse:
    results = []
    for name, count, parts in plan:
        if parts is None:
            results.append(m.ConsumeTopicResult(name, unknown_count=count))
            continue
        results.append(m.ConsumeTopicResult(name, tuple(_result(wanted) for wanted in parts)))
    return m.ConsumeResponse(request.request_id, tuple(results))


def _result(wanted: _Wanted) -> m.ConsumePartitionResult:
    flag = wanted.flag if wanted.flag is not None else ConsumeFlag.OK  # EOF: base = first
    if flag in (ConsumeFlag.SYSTEM, ConsumeFlag.UNKNOWN_PARTITION, ConsumeFlag.NO_LEADER):
        return m.ConsumePartitionResult(wanted.partition, flag)
    if flag == ConsumeFlag.OTHER_LEADER:
        return m.ConsumePartitionResult(wanted.partition, flag, endpoint=wanted.endpoint)
    chunk = b"".join(wanted.chunk) if wanted.chunk else b""
    return m.ConsumePartitionResult(wanted.partition, flag, wanted.base, wanted.hwm, chunk,
                                    wanted.first_available)
