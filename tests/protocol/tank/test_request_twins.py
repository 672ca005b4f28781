"""The C twin of the broker's Produce and Consume decode (``_requests.c``) against the Python
reference (``messages.decode_request_python``), on the same inputs: equal requests for valid
payloads (bundles as views of the payload), the same error type and text for every malformed
one -- truncated at every byte, bytes flipped, bytes added, random bytes. Inputs are random
with fixed seeds, so a failure reproduces."""

from __future__ import annotations

import gc
import random
import subprocess
import sys
import tracemalloc

import pytest

from rill.protocol.tank import messages as m
from rill.protocol.tank.errors import ConsumeFlag
from rill.protocol.tank.messages import (
    ConsumePartition,
    ConsumeRequest,
    ConsumeTopic,
    MsgId,
    ProducePartition,
    ProduceRequest,
    ProduceTopic,
    decode_request,
    decode_request_python,
    encode_request_payload,
)

needs_twin = pytest.mark.skipif(m.REQUESTS_ACCELERATOR is None,
                                reason="the C extension is not built, or RILL_PURE_PYTHON=1")
pytestmark = needs_twin
SEEDS = range(60)
HOT = (MsgId.PRODUCE, MsgId.PRODUCE_WITH_SEQNUM, MsgId.CONSUME)


def random_name(rng: random.Random) -> str:
    raw = rng.choice([b"t", b"", rng.randbytes(rng.randint(0, 255)), "naïve".encode(),
                      b"\xff\xfe bad utf-8"])
    return raw.decode("utf-8", "surrogateescape")


def random_request(rng: random.Random, msg_id: int):
    u32, u64 = (1 << 32) - 1, (1 << 64) - 1
    if msg_id == MsgId.CONSUME:
        version = rng.choice([1, 2, 3, 4, rng.randint(0, 0xFFFF)])
        return ConsumeRequest(
            rng.randint(0, u32),
            tuple(ConsumeTopic(random_name(rng), tuple(
                ConsumePartition(rng.randint(0, 0xFFFF), rng.choice([0, 1, u64, rng.randint(0, u64)]),
                                 rng.randint(0, u32))
                for _ in range(rng.choice([0, 1, 2, rng.randint(0, 255)]))))
                  for _ in range(rng.choice([0, 1, 1, 2, rng.randint(0, 20)]))),
            rng.choice([0, 1000, u64]), rng.randint(0, u32), version, random_name(rng),
            rng.randint(0, 255) if version >= 3 else 0)
    seqnum = msg_id == MsgId.PRODUCE_WITH_SEQNUM
    return ProduceRequest(
        rng.randint(0, u32),
        tuple(ProduceTopic(random_name(rng), tuple(
            ProducePartition(rng.randint(0, 0xFFFF),
                             rng.randbytes(rng.choice([0, 1, 127, 128, 16384, rng.randint(0, 3000)])),
                             rng.randint(0, u64) if seqnum else None)
            for _ in range(rng.choice([0, 1, 2, rng.randint(0, 30)]))))
              for _ in range(rng.choice([0, 1, 1, 2, rng.randint(0, 10)]))),
        seqnum, rng.randint(0, 0xFFFF), random_name(rng), rng.randint(0, 255),
        rng.randint(0, u32))


def outcome(decoder, msg_id: int, payload):
    try:
        return decoder(msg_id, payload)
    except Exception as error:  # noqa: BLE001 - the type and text are what is compared
        return type(error), str(error)


def assert_twins(msg_id: int, payload) -> object:
    c, python = outcome(decode_request, msg_id, payload), outcome(decode_request_python, msg_id,
                                                                 payload)
    assert c == python
    assert type(c) is type(python)
    return c


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("msg_id", HOT)
def test_valid_requests_decode_to_the_same_objects(seed: int, msg_id: int) -> None:
    rng = random.Random(seed * 7 + msg_id)
    request = random_request(rng, msg_id)
    payload = encode_request_payload(request)
    for given in (payload, bytearray(payload), memoryview(bytearray(payload))):
        decoded = assert_twins(msg_id, given)
        assert decoded == request
    if msg_id != MsgId.CONSUME:  # bundles are views of the payload, not copies
        buffer = bytearray(payload)
        decoded = decode_request(msg_id, memoryview(buffer))
        bundles = [p.bundle for t in decoded.topics for p in t.partitions]
        assert all(type(b) is memoryview and b.format == "B" and b.obj is buffer
                   for b in bundles)


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("msg_id", HOT)
def test_malformed_requests_fail_alike(seed: int, msg_id: int) -> None:
    rng = random.Random(1000 + seed * 7 + msg_id)
    payload = encode_request_payload(random_request(rng, msg_id))
    cuts = range(len(payload)) if len(payload) < 600 else sorted(
        set(rng.sample(range(len(payload)), 400)) | set(range(40)))
    for cut in cuts:  # truncated anywhere
        assert type(assert_twins(msg_id, payload[:cut])) is tuple
    for _ in range(200):  # bytes changed, added, or the whole payload random
        mutated = bytearray(payload)
        choice = rng.random()
        if choice < 0.6 and mutated:
            for _ in range(rng.randint(1, 4)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        elif choice < 0.8:
            mutated += rng.randbytes(rng.randint(1, 9))
        else:
            mutated = bytearray(rng.randbytes(rng.randint(0, 300)))
        assert_twins(msg_id, bytes(mutated))


@pytest.mark.parametrize("msg_id", HOT)
def test_the_texts_of_each_fault(msg_id: int) -> None:
    """Each way a payload can be wrong, worded as the reference words it."""
    produce = msg_id != MsgId.CONSUME
    request = random_request(random.Random(5), msg_id)
    payload = encode_request_payload(request)
    faults = [b"", b"\x01", payload + b"\x00"]
    if produce:  # a varint of 6 bytes, and one whose 5th byte is above 0x0f
        head = b"\x02\x00" + b"\x01\x00\x00\x00" + b"\x00" + b"\x00" + b"\x00\x00\x00\x00"
        topic = head + b"\x01\x01t\x01\x00\x00"
        faults += [topic + b"\xff\xff\xff\xff\x1f", topic + b"\x80\x80\x80\x80\x80\x01",
                   topic + b"\x05" + (b"\x00" * 8 if msg_id == MsgId.PRODUCE_WITH_SEQNUM else b"")
                   + b"abc"]
    texts = {assert_twins(msg_id, fault)[1] for fault in faults}
    assert any("left over after the last field" in text for text in texts)
    assert any("wanted at" in text for text in texts)
    if produce:
        assert any("runs past the payload" in text for text in texts)
        assert any("varint longer than 32 bits" in text for text in texts)


def test_the_broker_decodes_produce_and_consume_in_c() -> None:
    """What a server uses: the twin, for the hot two (the others stay on the reference)."""
    found = subprocess.run(
        [sys.executable, "-c", "from rill.protocol.tank import messages as m; "
         "print(sorted(map(int, m._FAST_DECODERS)), m.REQUESTS_ACCELERATOR.__name__)"],
        capture_output=True, text=True, check=True)
    assert found.stdout.split("]")[0] == "[1, 2, 5"
    assert "rill.protocol.tank._requests" in found.stdout


def test_decoding_keeps_nothing_behind() -> None:
    """No reference leaks: decoding the same payloads (and encoding the same answers) many
    times does not grow the heap."""
    rng = random.Random(3)
    payloads = [(msg_id, encode_request_payload(random_request(rng, msg_id))) for msg_id in HOT
                for _ in range(5)]
    bad = [(msg_id, payload[: len(payload) // 2]) for msg_id, payload in payloads]

    answers = [random_response(rng) for _ in range(10)]

    def rounds(count: int) -> None:
        for _ in range(count):
            for msg_id, payload in payloads + bad:
                outcome(decode_request, msg_id, payload)
            for answer in answers:
                encoded(m.encode_response_parts, answer)

    rounds(50)
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        rounds(500)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024  # (one leaked name a decode would be 15,000 objects here)


# -- the Consume answer ------------------------------------------------------------------------


def random_response(rng: random.Random) -> m.ConsumeResponse:
    flags = list(ConsumeFlag)
    topics = []
    for _ in range(rng.choice([0, 1, 1, 2, rng.randint(0, 12)])):
        name = random_name(rng)
        if rng.random() < 0.15:
            topics.append(m.ConsumeTopicResult(name, unknown_count=rng.randint(0, 255)))
            continue
        parts = []
        for _ in range(rng.choice([0, 1, 1, 3, rng.randint(0, 40)])):
            flag = rng.choice(flags + [ConsumeFlag.OK] * 4)
            chunk = rng.choice([b"", rng.randbytes(rng.randint(1, 2000)),
                                memoryview(rng.randbytes(rng.randint(1, 500)))])
            parts.append(m.ConsumePartitionResult(
                rng.randint(0, 0xFFFF), flag, rng.randint(0, (1 << 64) - 1),
                rng.randint(0, (1 << 64) - 1), chunk, rng.randint(0, (1 << 64) - 1),
                ("10.0.0.%d" % rng.randint(1, 254), rng.randint(1, 0xFFFF))
                if flag == ConsumeFlag.OTHER_LEADER else None))
        topics.append(m.ConsumeTopicResult(name, tuple(parts)))
    return m.ConsumeResponse(rng.randint(0, (1 << 32) - 1), tuple(topics))


def encoded(encode, response):
    try:
        return b"".join(bytes(part) for part in encode(response))
    except Exception as error:  # noqa: BLE001 - the type and text are what is compared
        return type(error), str(error)


@pytest.mark.parametrize("seed", SEEDS)
def test_consume_answers_encode_to_the_same_bytes(seed: int) -> None:
    rng = random.Random(seed)
    response = random_response(rng)
    c = encoded(m.encode_response_parts, response)
    assert c == encoded(m.encode_consume_parts_python, response)
    assert type(c) is bytes
    parts = m.encode_response_parts(response)
    chunks = [p.chunk for t in response.topics for p in t.partitions
              if len(p.chunk) and p.flag in (ConsumeFlag.OK, ConsumeFlag.SPARSE_FIRST,
                                             ConsumeFlag.BOUNDARY_CHECK)]
    if not any(p.flag == ConsumeFlag.OTHER_LEADER for t in response.topics
               for p in t.partitions):  # the C twin's own answer: chunks passed, not copied
        assert all(got is given for got, given in zip(parts[1:], chunks, strict=True))


@pytest.mark.parametrize("seed", range(30))
def test_consume_answers_out_of_range_fail_alike(seed: int) -> None:
    """What no field can hold: the reference's error, whichever twin was asked."""
    rng = random.Random(500 + seed)
    good = m.ConsumePartitionResult(1, ConsumeFlag.OK, 1, 2, b"abc")
    bad = rng.choice([
        m.ConsumePartitionResult(1 << 16, ConsumeFlag.OK, 1, 2, b"abc"),
        m.ConsumePartitionResult(-1, ConsumeFlag.OK, 1, 2, b"abc"),
        m.ConsumePartitionResult(1, ConsumeFlag.OK, 1 << 64, 2, b"abc"),
        m.ConsumePartitionResult(1, ConsumeFlag.OK, 1, -2, b"abc"),
        m.ConsumePartitionResult(1, 0x42, 1, 2, b"abc"),
        m.ConsumePartitionResult(1, ConsumeFlag.BOUNDARY_CHECK, 0, 2, b"", -1),
    ])
    topics = [m.ConsumeTopicResult("t", (good, bad))]
    if rng.random() < 0.3:
        topics = [m.ConsumeTopicResult("x" * 256, (good,))]
    if rng.random() < 0.2:
        topics = [m.ConsumeTopicResult("t", (good,) * 256)]
    if rng.random() < 0.2:
        topics = [m.ConsumeTopicResult("t", unknown_count=256)]
    response = m.ConsumeResponse(rng.choice([5, 1 << 32]), tuple(topics))
    c = encoded(m.encode_response_parts, response)
    assert c == encoded(m.encode_consume_parts_python, response)
    assert type(c) is tuple  # an error, the same one


def test_the_common_answer_is_encoded_in_c() -> None:
    response = m.ConsumeResponse(9, (m.ConsumeTopicResult("t", (
        m.ConsumePartitionResult(0, ConsumeFlag.OK, 5, 9, b"bundle"),
        m.ConsumePartitionResult(1, ConsumeFlag.UNKNOWN_PARTITION))),
        m.ConsumeTopicResult("gone", unknown_count=2)))
    parts = m.REQUESTS_ACCELERATOR.encode_consume(response)
    assert parts is not None and parts[1] == b"bundle"
    assert b"".join(parts) == b"".join(m.encode_consume_parts_python(response))


def test_encoding_an_answer_keeps_no_reference_to_it() -> None:
    """The chunks and the answer's objects are held by the parts while they live, not after."""
    chunk = bytes(range(256)) * 4
    response = m.ConsumeResponse(9, (m.ConsumeTopicResult("t", (
        m.ConsumePartitionResult(0, ConsumeFlag.OK, 5, 9, chunk),
        m.ConsumePartitionResult(1, ConsumeFlag.BOUNDARY_CHECK, 0, 9, b"", 3))),))
    watched = [chunk, response, response.topics, response.topics[0].partitions]
    before = [sys.getrefcount(item) for item in watched]
    for _ in range(100):
        parts = m.encode_response_parts(response)
    assert parts[1] is chunk
    del parts
    assert [sys.getrefcount(item) for item in watched] == before
