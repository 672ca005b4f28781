"""The TANK listener of a real server (``[tank] enabled``) over plain sockets: the ping on
accept, the worked exchanges of tank-wire-reference §11 byte for byte, the answers of every
request id, and the connection rules (bad input closes only that connection or is answered
with the reference's error byte, and writes nothing)."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from rill.protocol.tank import messages as m
from rill.protocol.tank.bundles import decode_chunk, encode_bundle
from rill.protocol.tank.primitives import encode_str8
from server_process import RillProcess

TANK_ENV = {"RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "127.0.0.1:0",
            "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false"}
PING = bytes.fromhex("0300000000")


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", "").replace("\n", ""))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = RillProcess(tmp_path_factory.mktemp("tank") / "data", env=TANK_ENV).start()
    yield process
    process.kill()


@pytest.fixture
def fresh(tmp_path):
    """A server of its own: answers that list every topic are deterministic."""
    process = RillProcess(tmp_path / "data", env=TANK_ENV).start()
    yield process
    process.kill()


class Raw:
    """One plain socket to the TANK listener; the broker's ping is read on connect."""

    def __init__(self, server) -> None:
        self.sock = socket.create_connection(server.tank_address, timeout=20)
        self.greeting = self._exactly(5)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frame(self) -> bytes | None:
        """The next whole frame (header included); None when the server closed."""
        head = self._exactly(5)
        if head is None:
            return None
        body = self._exactly(struct.unpack_from("<I", head, 1)[0])
        assert body is not None
        return head + body

    def call(self, request) -> bytes:
        self.send(m.encode_request(request))
        answer = self.frame()
        assert answer is not None, "the server closed the connection"
        return answer

    def closed(self) -> bool:
        """Whether the server closes the connection without writing anything more."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _exactly(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                assert not data, "the server closed in the middle of a frame"
                return None
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def create(raw: Raw, topic: str, partitions: int = 1) -> int:
    answer = m.decode_response(m.MsgId.CREATE_TOPIC, raw.call(
        m.CreateTopicRequest(7, topic, partitions))[5:])
    return answer.error


def hwm(raw: Raw, topic: str, partition: int = 0) -> int:
    answer = m.decode_response(m.MsgId.DISCOVER_PARTITIONS, raw.call(
        m.DiscoverPartitionsRequest(9, topic))[5:])
    return answer.partitions[partition].hwm


def produce_frame(topic: str, bundle: bytes, partition: int = 0, request_id: int = 5) -> bytes:
    return m.encode_request(m.ProduceRequest(request_id, (m.ProduceTopic(topic, (
        m.ProducePartition(partition, bundle),)),)))


# -- the ping and the worked examples --------------------------------------------------------


def test_the_ping_is_the_first_thing_on_every_connection_and_a_clients_gets_no_answer(server):
    raw = Raw(server)
    try:
        assert raw.greeting == PING
        raw.send(PING)  # no answer: the next frame is the Status answer
        raw.send(h("0a 04000000 2a000000"))
        answer = raw.frame()
        assert answer[:1] == b"\x0a" and answer[5:9] == h("2a000000")
    finally:
        raw.close()


def test_section_11_1_to_11_3_byte_for_byte(server):
    raw = Raw(server)
    try:
        assert create(raw, "wire") == 0
        raw.send(h("""01 36 00 00 00 02 00 2a 00 00 00 03 63 2b 2b 00
                      00 00 00 00 01 04 77 69 72 65 01 00 00 1d 08 01
                      00 68 e5 cf 8b 01 00 00 02 6b 31 05 68 65 6c 6c
                      6f 03 02 6b 32 05 77 6f 72 6c 64"""))
        assert raw.frame() == h("01 05 00 00 00 2a 00 00 00 00")
        raw.send(h("""02 28 00 00 00 02 00 2b 00 00 00 00 00 00 00 00
                      00 00 00 00 00 00 00 00 01 04 77 69 72 65 01 00
                      00 01 00 00 00 00 00 00 00 00 10 00 00"""))
        assert raw.frame() == h("""02 44 00 00 00 22 00 00 00 2b 00 00 00 01 04 77
                                   69 72 65 01 00 00 00 01 00 00 00 00 00 00 00 02
                                   00 00 00 00 00 00 00 1e 00 00 00 1d 08 01 00 68
                                   e5 cf 8b 01 00 00 02 6b 31 05 68 65 6c 6c 6f 03
                                   02 6b 32 05 77 6f 72 6c 64""")
    finally:
        raw.close()


def test_section_11_5_captured_exchanges_byte_for_byte(fresh):
    raw = Raw(fresh)
    try:
        assert raw.greeting == PING
        raw.send(h("07 0e000000 01000000 066f7264657273 0100 00"))
        assert raw.frame() == h("07 0c000000 01000000 066f7264657273 00")
        raw.send(produce_frame("orders", encode_bundle([b"a", b"b"], timestamps=1)))
        assert raw.frame() == h("01 05000000 05000000 00")
        raw.send(h("06 0b000000 01000000 066f7264657273"))
        assert raw.frame() == h("06 1d000000 01000000 066f7264657273 0100 0100000000000000 "
                                "0200000000000000")
        # EOF answer to seq 3 when hwm = 2 (request id 2)
        raw.send(m.encode_request(m.ConsumeRequest(2, (m.ConsumeTopic("orders", (
            m.ConsumePartition(0, 3, 4096),)),))))
        assert raw.frame() == h("02 28000000 24000000 02000000 01 066f7264657273 01 0000 00 "
                                "0100000000000000 0200000000000000 00000000")
        # boundary check (seq 10, hwm 2)
        raw.send(m.encode_request(m.ConsumeRequest(1, (m.ConsumeTopic("orders", (
            m.ConsumePartition(0, 10, 4096),)),))))
        assert raw.frame() == h("02 30000000 2c000000 01000000 01 066f7264657273 01 0000 01 "
                                "0000000000000000 0200000000000000 00000000 0100000000000000")
        raw.send(m.encode_request(m.ConsumeRequest(1, (m.ConsumeTopic("nosuch", (
            m.ConsumePartition(0, 0, 4096),)),))))
        assert raw.frame() == h("02 13000000 0f000000 01000000 01 066e6f73756368 01 ffff")
        raw.send(m.encode_request(m.ConsumeRequest(1, (m.ConsumeTopic("orders", (
            m.ConsumePartition(3, 0, 4096),)),))))
        assert raw.frame() == h("02 14000000 10000000 01000000 01 066f7264657273 01 0300 ff")
        # ProduceWithSeqnum, one message "a" at the next seq (3): answered with msg_id 0x01
        raw.send(h("05 37000000 0200 01000000 03632b2b 00 00000000 01 066f7264657273 01 0000 "
                   "14 0300000000000000 44 0300000000000000 00 b7ad2709a2010000 01 61"))
        assert raw.frame() == h("01 05000000 01000000 00")
        # the reference's capture at seq 100: kept at 100 (a hole 4..99), the hwm is 100
        raw.send(h("05 37000000 0200 01000000 03632b2b 00 00000000 01 066f7264657273 01 0000 "
                   "14 6400000000000000 44 6400000000000000 00 b7ad2709a2010000 01 61"))
        assert raw.frame() == h("01 05000000 01000000 00")
        assert hwm(raw, "orders") == 100
        # and again at 100: at or below the high-water mark -> 0x0a, nothing kept
        raw.send(h("05 37000000 0200 01000000 03632b2b 00 00000000 01 066f7264657273 01 0000 "
                   "14 6400000000000000 44 6400000000000000 00 b7ad2709a2010000 01 61"))
        assert raw.frame() == h("01 05000000 01000000 0a")
        assert hwm(raw, "orders") == 100
        raw.send(h("07 0e000000 01000000 066576656e7473 0200 00"))  # events, 2 partitions
        assert raw.frame() == h("07 0c000000 01000000 066576656e7473 00")
        raw.send(h("0b 05000000 01000000 00"))
        answer = raw.frame()
        assert answer[:14] == h("0b 1d000000 01000000 02000000 00")
        assert sorted([answer[14:24], answer[24:]]) == sorted(
            [h("066f7264657273 01 0100"), h("066576656e7473 01 0200")])
        raw.send(h("0c 05000000 01000000 00"))
        assert raw.frame() == h("0c 06000000 01000000 ffff")
        raw.send(h("0a 04000000 01000000"))
        status = raw.frame()
        assert status[:23] == h("0a 1e000000 01000000 00 00 02000000 03000000 03000000")
        assert status[-4:] == h("90010000")  # version 400
        # ReloadConf: rill topics have no TANK configuration file -> 12 (not supported)
        raw.send(h("08 0d000000 01000000 066f7264657273 0000"))
        assert raw.frame() == h("08 0e000000 01000000 066f7264657273 0000 0c")
        raw.send(h("08 0d000000 01000000 066f7264657273 0500"))
        assert raw.frame() == h("08 0e000000 01000000 066f7264657273 0500 0a")
        raw.send(h("08 0d000000 01000000 066e6f73756368 0000"))
        assert raw.frame() == h("08 0e000000 01000000 066e6f73756368 0000 0b")
    finally:
        raw.close()


def test_produce_answers_group_bytes_per_topic_as_section_5_3_measures(server):
    raw = Raw(server)
    try:
        assert create(raw, "sem", 2) == 0
        bundle = encode_bundle([b"x"], timestamps=1)
        request = m.ProduceRequest(11, (
            m.ProduceTopic("sem", (m.ProducePartition(0, bundle), m.ProducePartition(7, bundle))),
            m.ProduceTopic("nope", (m.ProducePartition(0, bundle), m.ProducePartition(1, bundle))),
            m.ProduceTopic("sem", (m.ProducePartition(1, bundle),)),
            m.ProduceTopic("empty", ()),
        ))
        assert raw.call(request) == h("01 08000000 0b000000 00 01 ff 00")
        assert hwm(raw, "sem", 0) == 1 and hwm(raw, "sem", 1) == 1
    finally:
        raw.close()


def test_a_version_3_consume_carries_op_flags(server):
    raw = Raw(server)
    try:
        assert create(raw, "v3") == 0
        raw.call(m.ProduceRequest(1, (m.ProduceTopic("v3", (m.ProducePartition(
            0, encode_bundle([b"hello"], timestamps=5)),)),)))
        answer = m.decode_response(m.MsgId.CONSUME, raw.call(m.ConsumeRequest(
            3, (m.ConsumeTopic("v3", (m.ConsumePartition(0, 1, 4096),)),),
            client_version=3, op_flags=1))[5:])
        part = answer.topics[0].partitions[0]
        assert (part.flag, part.base, part.hwm) == (0, 1, 1)
        assert bytes(part.chunk)[1:] == encode_bundle([b"hello"], timestamps=5)
    finally:
        raw.close()


def test_create_topic_rules(server):
    raw = Raw(server)
    try:
        assert create(raw, "made") == 0
        assert create(raw, "made") == 1  # exists
        assert create(raw, "none", 0) == 10  # no partitions
        for bad in ("-dash", "under_", "a.b", "x" * 65, "Upper"):
            assert create(raw, bad) == 10, bad
        bad_config = m.CreateTopicRequest(8, "conf", 1, b"this is not key value\n")
        assert raw.call(bad_config)[-1] == 4
        good_config = m.CreateTopicRequest(8, "conf", 1,
                                           b"# comment\nlog.retention.secs = 3600\n")
        assert raw.call(good_config)[-1] == 0
    finally:
        raw.close()


def test_discover_partitions_explicit_list_and_unknown_ids(server):
    raw = Raw(server)
    try:
        assert create(raw, "disc", 3) == 0
        raw.call(m.ProduceRequest(1, (m.ProduceTopic("disc", (m.ProducePartition(
            2, encode_bundle([b"a", b"b", b"c"], timestamps=5)),)),)))
        listed = m.decode_response(m.MsgId.DISCOVER_PARTITIONS, raw.call(
            m.DiscoverPartitionsRequest(4, "disc", (2, 0)))[5:])
        assert [(p.first_available, p.hwm) for p in listed.partitions] == [(1, 3), (0, 0)]
        unknown = raw.call(m.DiscoverPartitionsRequest(4, "disc", (0, 9)))
        assert unknown == h("06 0b000000 04000000 04646973630000")
        assert raw.call(m.DiscoverPartitionsRequest(4, "nosuch")) == h(
            "06 0d000000 04000000 066e6f737563680000")
    finally:
        raw.close()


# -- bad input -------------------------------------------------------------------------------


def _still_serves(server) -> None:
    other = Raw(server)
    try:
        assert other.call(m.DiscoverTopologyRequest(77)) == h("0c 06000000 4d000000 ffff")
    finally:
        other.close()


@pytest.mark.parametrize("name, frame", [
    ("unknown msg_id", h("0d 04000000 01000000")),
    ("RegReplica 0x04", h("04 02000000 0100")),
    ("ConsumePeer 0x09", m.encode_request(m.ConsumePeerRequest(1, 0, 0, ()))),
    ("payload shorter than its fields", h("0a 02000000 0100")),
    ("bytes left over", h("0a 05000000 01000000 ff")),
    ("a 6-byte varint as bundle_len", h("01 1a000000 0200 01000000 00 00 00000000 01 04626164"
                                        "78 01 0000 8080808080 01")),
    ("a 5th varint byte above 0x0f", h("01 19000000 0200 01000000 00 00 00000000 01 0462616478"
                                       " 01 0000 8080808010")),
    ("bundle_len past the payload", h("01 15000000 0200 01000000 00 00 00000000 01 0462616478"
                                      " 01 0000 30")),
    ("a frame above the limit", h("01 ffffffff")),
])
def test_malformed_requests_close_only_that_connection_and_write_nothing(server, name, frame):
    setup = Raw(server)
    try:
        create(setup, "badx")
        before = hwm(setup, "badx")
    finally:
        setup.close()
    raw = Raw(server)
    try:
        raw.send(frame)
        assert raw.closed(), name
    finally:
        raw.close()
    _still_serves(server)
    check = Raw(server)
    try:
        assert hwm(check, "badx") == before
    finally:
        check.close()


@pytest.mark.parametrize("name, bundle", [
    ("empty bundle (aborts TANK)", b""),
    ("zero messages (aborts TANK)", h("00 00")),
    ("count says 3, holds 2", h("0c") + encode_bundle([b"a", b"b"], timestamps=1)[1:]),
    ("count says 1, holds 2", h("04") + encode_bundle([b"a", b"b"], timestamps=1)[1:]),
    ("content_len past the set", h("04 00 0100000000000000 09 61")),
    ("corrupt Snappy block", h("05 0a ffffffffff")),
    ("codec 2", h("06 00 0100000000000000 01 61")),
    ("flag bit 7", h("84 00 0100000000000000 01 61")),
    ("unknown message flag", h("04 10 0100000000000000 01 61")),
    ("sparse first_seq 0", h("44 0000000000000000 00 0100000000000000 01 61")),
])
def test_invalid_bundles_are_answered_0x02_and_write_nothing(server, name, bundle):
    raw = Raw(server)
    try:
        create(raw, "badb")
        before = hwm(raw, "badb")
        assert raw.call(m.ProduceRequest(3, (m.ProduceTopic("badb", (
            m.ProducePartition(0, bundle),)),))) == h("01 05000000 03000000 02"), name
        assert hwm(raw, "badb") == before
        # the same connection goes on
        assert raw.call(m.ProduceRequest(4, (m.ProduceTopic("badb", (
            m.ProducePartition(0, encode_bundle([b"ok"], timestamps=1)),)),)))[-1] == 0
        assert hwm(raw, "badb") == before + 1
    finally:
        raw.close()


def test_a_frame_cut_off_by_the_client_writes_nothing(server):
    raw = Raw(server)
    try:
        create(raw, "cut")
        before = hwm(raw, "cut")
    finally:
        raw.close()
    whole = produce_frame("cut", encode_bundle([b"never"] * 3, timestamps=1))
    cut = Raw(server)
    cut.send(whole[: len(whole) - 4])
    cut.close()
    check = Raw(server)
    try:
        assert hwm(check, "cut") == before
        check.send(whole)
        assert check.frame()[-1] == 0
        assert hwm(check, "cut") == before + 3
    finally:
        check.close()


def test_str8_names_are_bytes_compared(server):
    raw = Raw(server)
    try:
        # a name TANK accepts but rill would store lowercased is unknown, never another topic
        create(raw, "lower")
        frame = h("02") + b""
        payload = (struct.pack("<HIB", 2, 1, 0) + struct.pack("<QI", 0, 0) + b"\x01"
                   + encode_str8("LOWER") + b"\x01" + struct.pack("<HQI", 0, 0, 100))
        raw.send(frame + struct.pack("<I", len(payload)) + payload)
        assert raw.frame()[-2:] == h("ffff")
    finally:
        raw.close()


def test_the_java_clients_captured_consume_is_served(server):
    # §11.5: version 0, client id "JC01", max_wait 5000, fetch_size 1000, topic "jv" from seq 4
    raw = Raw(server)
    try:
        assert create(raw, "jv") == 0
        raw.call(m.ProduceRequest(1, (m.ProduceTopic("jv", (m.ProducePartition(
            0, encode_bundle([b"a", b"b", b"c"], timestamps=1)),)),)))
        raw.call(m.ProduceRequest(2, (m.ProduceTopic("jv", (m.ProducePartition(
            0, encode_bundle([b"d", b"e"], timestamps=2)),)),)))
        raw.send(h("02 2a000000 0000 00000000 044a433031 8813000000000000 00000000 01 026a76 01 "
                   "0000 0400000000000000 e8030000"))
        answer = m.decode_response(m.MsgId.CONSUME, raw.frame()[5:])
        part = answer.topics[0].partitions[0]
        assert (answer.request_id, part.flag, part.base, part.hwm) == (0, 0, 4, 5)
        assert bytes(part.chunk)[1:] == encode_bundle([b"d", b"e"], timestamps=2)
    finally:
        raw.close()


def test_idle_connections_are_closed_but_not_one_with_a_long_poll_waiting(tmp_path):
    """TANK's idle rule (reference §2), with ``[tank] idle_timeout`` shortened from 16 s: a
    connection with nothing to do is closed; one whose consume is waiting is kept until its
    answer, and the Iggy listener's idle rule is untouched."""
    env = {**TANK_ENV, "RILL_TANK_IDLE_TIMEOUT": "1 s"}
    process = RillProcess(tmp_path / "data", env=env).start()
    idle, polling, iggy = Raw(process), Raw(process), None
    try:
        assert create(polling, "waiting") == 0
        polling.send(m.encode_request(m.ConsumeRequest(
            3, (m.ConsumeTopic("waiting", (m.ConsumePartition(0, 1, 4096),)),),
            max_wait_ms=4_000)))
        iggy = socket.create_connection(process.tcp_address, timeout=20)
        idle.sock.settimeout(10)
        assert idle.closed()  # after about 1 s (the sweep: about 1 s more at most)
        answer = polling.frame()  # the long poll's timed-out answer, after 4 s
        assert answer is not None and answer[0] == m.MsgId.CONSUME
        iggy.setblocking(False)
        with pytest.raises(BlockingIOError):
            iggy.recv(1)  # still open: [connections] keeps its own timeouts
    finally:
        idle.close()
        polling.close()
        if iggy is not None:
            iggy.close()
        process.kill()


# -- the frame limit -------------------------------------------------------------------------


def _logged(process: RillProcess, text: str, wait: float = 20.0) -> list[str]:
    """The server's log lines holding ``text`` (waiting for the output to be read)."""
    deadline = time.monotonic() + wait
    while True:
        found = [line for line in process.output if text in line]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_a_produce_above_the_frame_limit_is_logged_and_closed_and_one_within_it_is_stored(
        tmp_path):
    """A 65 MiB produce: above the default [tank] max_frame_size (64 MiB) the connection is
    closed with a log line naming the size and the setting; with the limit raised towards
    TANK's own 256 MiB the same frame is stored."""
    value = b"x" * (65 << 20)
    frame = produce_frame("big", encode_bundle([value], timestamps=1))
    process = RillProcess(tmp_path / "default", env=TANK_ENV).start()
    try:
        raw = Raw(process)
        try:
            assert create(raw, "big") == 0
            try:
                raw.send(frame)
            except (BrokenPipeError, ConnectionResetError):
                pass  # closed while the frame was still being written
            assert raw.closed()
        finally:
            raw.close()
        lines = _logged(process, "TANK request of")
        assert len(lines) == 1 and f"of {len(frame) - 5} bytes refused" in lines[0]
        assert f"above [tank] max_frame_size ({64 << 20} bytes" in lines[0]
        check = Raw(process)
        try:
            assert hwm(check, "big") == 0
        finally:
            check.close()
    finally:
        process.kill()

    raised = {**TANK_ENV, "RILL_TANK_MAX_FRAME_SIZE": "80 MiB"}
    process = RillProcess(tmp_path / "raised", env=raised).start()
    try:
        raw = Raw(process)
        try:
            assert create(raw, "big") == 0
            raw.send(frame)
            assert raw.frame() == h("01 05000000 05000000 00")
            assert hwm(raw, "big") == 1
            raw.send(m.encode_request(m.ConsumeRequest(
                6, (m.ConsumeTopic("big", (m.ConsumePartition(0, 1, 1 << 20),)),))))
            answer = m.decode_response(m.MsgId.CONSUME, raw.frame()[5:])
            part = answer.topics[0].partitions[0]
            assert part.flag == 0 and decode_chunk(part.chunk, part.base).values == [value]
        finally:
            raw.close()
        assert not _logged(process, "TANK request of", wait=0)
    finally:
        process.kill()
