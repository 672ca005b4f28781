"""The transport-neutral connection loop (transports/binary.py) through a fake link and a real
core: session lifecycle, order, tags, refusal, closing statuses, both kinds of back-pressure."""

from __future__ import annotations

import asyncio
import struct

from rill.protocol.iggy.commands.streams import CreateStream, GetStreams
from rill.protocol.iggy.commands.users import LoginUser
from rill.server.config import ServerConfig
from rill.server.core.core import Core
from rill.server.protocols.iggy import IGGY
from rill.server.transports.binary import BinaryConnection

OK_EMPTY = bytes(8)


class FakeLink:
    """Records what the loop asks of a link."""

    def __init__(self) -> None:
        self.replies: list[tuple[object, bytes]] = []
        self.closed = 0
        self.paused = 0
        self.resumed = 0
        self.fail_on_send = False
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def send_reply(self, tag, parts) -> None:
        if self.fail_on_send:
            raise RuntimeError("the link broke")
        self.replies.append((tag, b"".join(bytes(part) for part in parts)))
        for count, waiter in list(self._waiters):
            if len(self.replies) >= count and not waiter.done():
                waiter.set_result(None)

    def close_link(self) -> None:
        self.closed += 1

    def pause_reading(self) -> None:
        self.paused += 1

    def resume_reading(self) -> None:
        self.resumed += 1

    async def replies_count(self, count: int) -> list[tuple[object, bytes]]:
        if len(self.replies) < count:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append((count, waiter))
            await asyncio.wait_for(waiter, 20)
        return self.replies


def run_with_core(tmp_path, scenario) -> None:
    async def main() -> None:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        core = Core(config)
        await core.start()
        try:
            await scenario(core)
        finally:
            await core.stop()

    asyncio.run(main())


def payload(command) -> memoryview:
    return memoryview(command.encode())


async def settle(connection: BinaryConnection) -> None:
    """Let the worker run until it waits for more work (no clock involved)."""
    for _ in range(50):
        await asyncio.sleep(0)


async def finished(connection: BinaryConnection) -> None:
    await asyncio.wait_for(asyncio.shield(connection.worker), 20)


def test_session_is_registered_and_removed(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        connection = BinaryConnection(core, link, "10.1.2.3:4567", "quic", IGGY)
        session = connection.session
        assert core.sessions[session.client_id] is session
        assert (session.address, session.transport) == ("10.1.2.3:4567", "quic")
        connection.close()
        connection.close()  # idempotent
        assert session.client_id not in core.sessions
        await finished(connection)

    run_with_core(tmp_path, scenario)


def test_replies_come_in_submission_order_with_their_tags(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        connection = BinaryConnection(core, link, "127.0.0.1:1", "tcp", IGGY)
        connection.submit(1, memoryview(b""), "first")
        connection.submit(LoginUser.CODE, payload(LoginUser("iggy", "iggy")), 8)
        connection.submit(CreateStream.CODE, payload(CreateStream(5, "orders")), None)
        connection.submit(GetStreams.CODE, memoryview(b""), ("stream", 12))
        replies = await link.replies_count(4)
        assert [tag for tag, _ in replies] == ["first", 8, None, ("stream", 12)]
        assert replies[0][1] == OK_EMPTY
        assert replies[1][1] == struct.pack("<III", 0, 4, 1)  # logged in as user 1
        assert struct.unpack_from("<I", replies[2][1])[0] == 0
        status, length = struct.unpack_from("<II", replies[3][1])
        assert status == 0 and length == len(replies[3][1]) - 8 > 0
        assert link.closed == 0
        connection.close()

    run_with_core(tmp_path, scenario)


def test_undecodable_request_gets_status_3_and_serving_goes_on(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        connection = BinaryConnection(core, link, "127.0.0.1:2", "tcp", IGGY)
        connection.submit(1, memoryview(b"unexpected"), "bad")
        connection.submit(1, memoryview(b""), "good")
        replies = await link.replies_count(2)
        assert replies == [("bad", struct.pack("<II", 3, 0)), ("good", OK_EMPTY)]
        assert link.closed == 0
        connection.close()

    run_with_core(tmp_path, scenario)


def test_refusal_is_answered_after_the_queued_requests_then_the_link_closes(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        connection = BinaryConnection(core, link, "127.0.0.1:3", "tcp", IGGY)
        connection.submit(1, memoryview(b""), "a")
        connection.submit(1, memoryview(b""), "b")
        connection.refuse(4029, "refused")
        connection.submit(1, memoryview(b""), "never")
        replies = await link.replies_count(3)
        await finished(connection)
        assert replies == [("a", OK_EMPTY), ("b", OK_EMPTY), ("refused", struct.pack("<II", 4029, 0))]
        assert link.closed == 1
        connection.close()

    run_with_core(tmp_path, scenario)


def test_a_stale_session_is_answered_30_and_the_link_closes(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        connection = BinaryConnection(core, link, "127.0.0.1:4", "tcp", IGGY)
        del core.sessions[connection.session.client_id]  # what the heartbeat verifier does
        connection.submit(1, memoryview(b""), "late")
        replies = await link.replies_count(1)
        await finished(connection)
        assert replies == [("late", struct.pack("<II", 30, 0))]
        assert link.closed == 1
        connection.close()

    run_with_core(tmp_path, scenario)


def test_nothing_is_delivered_after_close(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        connection = BinaryConnection(core, link, "127.0.0.1:5", "tcp", IGGY)
        connection.submit(1, memoryview(b""), "dropped")
        connection.close()
        await finished(connection)
        assert link.replies == [] and link.closed == 0

    run_with_core(tmp_path, scenario)


def test_reading_pauses_above_the_queued_limit_and_resumes_at_half(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        connection = BinaryConnection(core, link, "127.0.0.1:6", "tcp", IGGY, max_queued_bytes=100)
        for index in range(4):  # 4 x 40 bytes: over the limit after the third
            connection.submit(1, memoryview(bytes(40)), index)
        assert link.paused == 1 and link.resumed == 0
        replies = await link.replies_count(4)
        assert [tag for tag, _ in replies] == [0, 1, 2, 3]
        assert all(reply == struct.pack("<II", 3, 0) for _, reply in replies)  # PING takes no payload
        assert link.paused == 1 and link.resumed == 1
        assert connection.queued_bytes == 0
        connection.close()

    run_with_core(tmp_path, scenario)


def test_paused_writing_holds_the_next_request_until_resumed(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        connection = BinaryConnection(core, link, "127.0.0.1:7", "tcp", IGGY)
        connection.pause_writing()
        connection.submit(1, memoryview(b""), "first")
        connection.submit(1, memoryview(b""), "second")
        await link.replies_count(1)
        await settle(connection)
        assert [tag for tag, _ in link.replies] == ["first"]
        connection.resume_writing()
        replies = await link.replies_count(2)
        assert [tag for tag, _ in replies] == ["first", "second"]
        connection.close()

    run_with_core(tmp_path, scenario)


def test_a_failing_link_is_closed_and_the_session_ends_with_it(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        link.fail_on_send = True
        connection = BinaryConnection(core, link, "127.0.0.1:8", "tcp", IGGY)
        connection.submit(1, memoryview(b""), "boom")
        await finished(connection)
        assert link.closed == 1
        connection.close()  # what the link does once it is closed
        assert connection.session.client_id not in core.sessions

    run_with_core(tmp_path, scenario)


class Reply(bytearray):
    """A reply payload that can be watched with a weak reference."""


def test_a_reply_is_let_go_once_the_link_has_it(tmp_path, monkeypatch):
    import gc
    import weakref

    from rill.server.protocols.iggy.dispatch import COMMANDS

    async def scenario(core: Core) -> None:
        watched: list[weakref.ref] = []

        def big_reply(core, session, command):
            reply = Reply(b"r" * 1_000_000)
            watched.append(weakref.ref(reply))
            return reply

        monkeypatch.setitem(COMMANDS, "ping", big_reply)
        link = FakeLink()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", IGGY)
        connection.submit(1, memoryview(b""))
        await link.replies_count(1)
        await settle(connection)  # the loop waits for the next request now
        gc.collect()
        assert watched[0]() is None  # not kept until the next request
        assert len(link.replies[0][1]) == 8 + 1_000_000
        connection.close()

    run_with_core(tmp_path, scenario)


def test_request_memory_is_taken_while_queued_and_given_back_when_served(tmp_path):
    from rill.server.transports.limits import RequestMemory

    async def scenario(core: Core) -> None:
        kib = 1024
        memory = RequestMemory(limit=400 * kib)
        link, small_link = FakeLink(), FakeLink()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", IGGY, memory=memory)
        small = BinaryConnection(core, small_link, "10.0.0.2:1", "tcp", IGGY,
                                 memory=memory)
        connection.submit(1, memoryview(bytes(150 * kib)))  # undecodable PINGs: status 3, served
        assert memory.used == 150 * kib and link.paused == 0
        connection.submit(1, memoryview(bytes(300 * kib)))
        assert memory.used == 450 * kib and link.paused == 1  # spent: the link stops reading
        small.submit(1, memoryview(bytes(60)))  # holding under ALWAYS_READ_BYTES: still read
        assert small_link.paused == 0
        await link.replies_count(2)
        await settle(connection)
        await small_link.replies_count(1)
        await settle(small)
        assert memory.used == 0 and link.resumed == 1
        connection.submit(1, memoryview(bytes(50)))
        connection.close()  # what was still queued goes back too
        small.close()
        await settle(connection)
        assert memory.used == 0

    run_with_core(tmp_path, scenario)


class CountedProtocol:
    """A protocol of the loop's contract alone: every request answered, its outcome by code."""

    name = "counted"
    greeting = b""
    holds_replies = True

    def frame_decoder(self, max_payload_size, **buffer_sizes):
        raise NotImplementedError  # the fake link frames nothing

    def open_session(self, core, session) -> None:
        session.user_id = 1  # logged in

    async def handle_request(self, core, session, code, payload):
        from rill.server.protocols import Reply

        return Reply([b"x"], outcome="ok" if code < 100 else "too_big")

    def error_reply(self, status):
        raise NotImplementedError

    def request_kind(self, code: int) -> str:
        return {1: "one", 2: "two"}.get(code, "unknown")


def test_every_request_is_counted_by_protocol_kind_transport_and_outcome(tmp_path):
    async def scenario(core: Core) -> None:
        core.metrics.instrument(core)
        link = FakeLink()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", CountedProtocol())
        for code in (1, 1, 2, 7, 300):
            connection.submit(code, memoryview(b"p"))
        await link.replies_count(1)  # pipelined: the five replies are written together
        assert b"".join(reply for _tag, reply in link.replies) == b"x" * 5
        requests = core.metrics.requests
        assert {key: (series.outcomes, series.latency.count)
                for key, series in requests.items()} == {
            ("counted", "one", "tcp"): ({"ok": 2}, 2),
            ("counted", "two", "tcp"): ({"ok": 1}, 1),
            ("counted", "unknown", "tcp"): ({"ok": 1, "too_big": 1}, 2),
        }
        text = core.metrics.render()
        assert ('rill_requests_total{protocol="counted",command="unknown",transport="tcp",'
                'outcome="too_big"} 1') in text.splitlines()
        connection.close()
        await finished(connection)

    run_with_core(tmp_path, scenario)


def test_nothing_is_counted_while_metrics_are_off(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", CountedProtocol())
        assert connection.series is None
        connection.submit(1, memoryview(b"p"))
        await link.replies_count(1)
        assert core.metrics.requests == {}
        connection.close()
        await finished(connection)

    run_with_core(tmp_path, scenario)


class EchoProtocol(CountedProtocol):
    """Answers each request with its payload; code 9 first waits for ``release``."""

    name = "echo"
    holds_replies = True

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def handle_request(self, core, session, code, payload):
        from rill.server.protocols import Reply

        if code == 9:
            await self.release.wait()
        return Reply([bytes(payload)])


def test_the_replies_of_pipelined_requests_are_written_together_in_order(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", EchoProtocol())
        for number in range(6):
            connection.submit(1, memoryview(b"<%d>" % number))
        await link.replies_count(1)
        await settle(connection)
        assert link.replies == [(None, b"<0><1><2><3><4><5>")]  # one write, in order
        connection.submit(1, memoryview(b"<alone>"))  # nothing behind it: written at once
        await link.replies_count(2)
        assert link.replies[1] == (None, b"<alone>")
        connection.close()
        await finished(connection)

    run_with_core(tmp_path, scenario)


def test_a_held_reply_is_not_kept_waiting_by_a_slow_request_behind_it(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        protocol = EchoProtocol()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", protocol)
        connection.submit(1, memoryview(b"fast"))
        connection.submit(9, memoryview(b"slow"))  # waits until released
        await link.replies_count(1)
        await settle(connection)
        assert link.replies == [(None, b"fast")]  # out while "slow" still waits
        protocol.release.set()
        await link.replies_count(2)
        assert link.replies[1] == (None, b"slow")
        connection.close()
        await finished(connection)

    run_with_core(tmp_path, scenario)


def test_tagged_replies_are_never_held(tmp_path):
    """A link with tags (QUIC: a stream per request) gets every reply on its own."""
    async def scenario(core: Core) -> None:
        link = FakeLink()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "quic", EchoProtocol())
        for number in range(3):
            connection.submit(1, memoryview(b"%d" % number), number)
        await link.replies_count(3)
        assert link.replies == [(0, b"0"), (1, b"1"), (2, b"2")]
        connection.close()
        await finished(connection)

    run_with_core(tmp_path, scenario)


def test_replies_to_large_requests_are_not_held_for_long(tmp_path):
    """Replies are held while the requests they answer add up to less than
    HELD_REQUEST_BYTES: behind large requests (a Kafka producer's big batches) a reply goes out
    about as soon as it would have, so the client's window of requests refills."""
    from rill.server.transports.binary import HELD_REQUEST_BYTES

    async def scenario(core: Core) -> None:
        link = FakeLink()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", CountedProtocol())
        large = memoryview(bytes(HELD_REQUEST_BYTES * 2 // 3))
        for _ in range(4):
            connection.submit(1, large)
        await link.replies_count(2)
        await settle(connection)
        assert [reply for _tag, reply in link.replies] == [b"xx", b"xx"]
        connection.close()
        await finished(connection)

    run_with_core(tmp_path, scenario)


def test_a_protocol_that_does_not_ask_gets_every_reply_written_as_it_is_made(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        protocol = EchoProtocol()
        protocol.holds_replies = False
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", protocol)
        for number in range(3):
            connection.submit(1, memoryview(b"%d" % number))
        await link.replies_count(3)
        assert link.replies == [(None, b"0"), (None, b"1"), (None, b"2")]
        connection.close()
        await finished(connection)

    run_with_core(tmp_path, scenario)


class LaterProtocol(CountedProtocol):
    """Code 7 answers later (as TANK's long-polling consume): once ``release`` is set; any
    other code is echoed at once."""

    name = "later"
    holds_replies = True

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.cancelled = 0

    async def _later(self):
        from rill.server.protocols import Reply

        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return Reply([b"late"])

    async def handle_request(self, core, session, code, payload):
        from rill.server.protocols import Reply

        if code == 7:
            return Reply([], later=self._later())
        return Reply([bytes(payload)])


def test_a_later_reply_writes_nothing_until_its_answer_and_lets_the_next_requests_through(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        protocol = LaterProtocol()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", protocol)
        connection.submit(7, memoryview(b""))
        await settle(connection)
        assert link.replies == []  # no empty write for the reply that comes later
        connection.submit(1, memoryview(b"next"))
        await link.replies_count(1)
        assert link.replies == [(None, b"next")]
        protocol.release.set()
        await link.replies_count(2)
        assert link.replies[1] == (None, b"late") and len(link.replies) == 2
        connection.close()
        await finished(connection)

    run_with_core(tmp_path, scenario)


def test_a_closing_link_cancels_the_reply_that_waits(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        protocol = LaterProtocol()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", protocol)
        connection.submit(7, memoryview(b""))
        await settle(connection)
        assert len(connection.later) == 1
        connection.close()  # the client went away: its long poll ends
        await finished(connection)
        await settle(connection)
        assert protocol.cancelled == 1 and not connection.later
        assert not any(reply for _tag, reply in link.replies)  # its answer is never written

    run_with_core(tmp_path, scenario)


class BatchingProtocol(EchoProtocol):
    """Code 5 is served together: ``calls`` records each ``handle_requests`` call's payloads;
    a payload of b"close" ends the answers there (the reply before it closing)."""

    name = "batching"
    holds_replies = False
    coalesced_codes = frozenset({5})

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[bytes]] = []

    async def handle_requests(self, core, session, code, payloads):
        from rill.server.protocols import Reply

        assert code == 5
        self.calls.append([bytes(payload) for payload in payloads])
        await asyncio.sleep(0)
        if bytes(payloads[0]) == b"none":  # a protocol failing its contract: no answer
            return []
        replies = []
        for payload in payloads:
            if bytes(payload) == b"close":
                replies.append(Reply([b"bye"], close=True))
                break
            replies.append(Reply([b"[%s]" % bytes(payload)], outcome="ok"))
            if bytes(payload).startswith(b"big"):  # an answer that holds much: the rest later
                break
        return replies


def test_queued_requests_of_a_coalesced_code_are_served_in_one_call_in_order(tmp_path):
    """Requests of the protocol's ``coalesced_codes`` queued right behind each other reach
    ``handle_requests`` together (up to another code, which is served alone, in its place);
    every one is answered, in order, and counted; the request memory is given back."""
    async def scenario(core: Core) -> None:
        core.metrics.instrument(core)
        link = FakeLink()
        protocol = BatchingProtocol()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", protocol)
        for code, body in ((5, b"a"), (5, b"b"), (5, b"c"), (1, b"d"), (5, b"e"), (5, b"f"),
                           (5, b"g")):
            connection.submit(code, memoryview(body))
        await link.replies_count(7)
        assert [reply for _tag, reply in link.replies] == [
            b"[a]", b"[b]", b"[c]", b"d", b"[e]", b"[f]", b"[g]"]
        assert protocol.calls == [[b"a", b"b", b"c"], [b"e", b"f", b"g"]]
        connection.submit(5, memoryview(b"h"))  # alone in the queue: handle_request
        await link.replies_count(8)
        assert link.replies[-1] == (None, b"h") and len(protocol.calls) == 2
        series = core.metrics.requests[("batching", "unknown", "tcp")]  # (code 5)
        assert series.outcomes == {"ok": 7} and series.latency.count == 7
        assert core.metrics.requests[("batching", "one", "tcp")].outcomes == {"ok": 1}
        assert connection.memory.used == 0 and connection.queued_bytes == 0
        connection.close()
        await finished(connection)

    run_with_core(tmp_path, scenario)


def test_the_replies_of_requests_served_together_are_written_in_one_go(tmp_path):
    """With ``holds_replies``, the small replies of a run served together leave in one write
    (one send on the socket, not one each), in order, even when nothing is queued behind the
    run; a large one is written as it comes."""
    async def scenario(core: Core) -> None:
        from rill.server.transports import binary

        link = FakeLink()
        protocol = BatchingProtocol()
        protocol.holds_replies = True
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", protocol)
        for body in (b"a", b"b", b"c"):
            connection.submit(5, memoryview(body))
        await link.replies_count(1)
        await asyncio.sleep(0.01)
        assert link.replies == [(None, b"[a][b][c]")] and protocol.calls == [[b"a", b"b", b"c"]]
        large = b"x" * binary.HELD_REPLY_BYTES
        for body in (b"d", large, b"e"):
            connection.submit(5, memoryview(body))
        await link.replies_count(3)
        await asyncio.sleep(0.01)
        assert link.replies[1:] == [(None, b"[d][%s]" % large), (None, b"[e]")]
        connection.close()
        await finished(connection)

    run_with_core(tmp_path, scenario)


def test_coalesced_requests_stop_at_the_caps_and_never_take_tagged_ones(tmp_path):
    async def scenario(core: Core) -> None:
        from rill.server.transports import binary

        link = FakeLink()
        protocol = BatchingProtocol()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", protocol)
        count = binary.COALESCED_REQUESTS + 3
        for number in range(count):
            connection.submit(5, memoryview(b"%d" % number))
        await link.replies_count(count)
        assert [len(call) for call in protocol.calls] == [binary.COALESCED_REQUESTS, 3]
        quic = BinaryConnection(core, FakeLink(), "10.0.0.1:2", "quic", protocol)
        for number in range(3):
            quic.submit(5, memoryview(b"t%d" % number), number)
        await quic.link.replies_count(3)
        assert quic.link.replies == [(0, b"t0"), (1, b"t1"), (2, b"t2")]
        assert len(protocol.calls) == 2  # tagged requests were served one by one
        for one in (connection, quic):
            one.close()
            await finished(one)

    run_with_core(tmp_path, scenario)


def test_requests_a_run_leaves_unanswered_are_served_next_after_the_link_takes_more(
        tmp_path):
    """``handle_requests`` answers the first requests of a run only (their answers hold much
    memory): the others are handed over again next, in order, once the link's writing allows
    -- never answered out of order, never lost, their memory accounted while they wait."""
    async def scenario(core: Core) -> None:
        link = FakeLink()
        protocol = BatchingProtocol()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", protocol)
        connection.pause_writing()
        for body in (b"a", b"big1", b"b", b"big2", b"c", b"d"):
            connection.submit(5, memoryview(body))
        await link.replies_count(2)
        await asyncio.sleep(0.01)
        assert [reply for _tag, reply in link.replies] == [b"[a]", b"[big1]"]
        assert protocol.calls == [[b"a", b"big1", b"b", b"big2", b"c", b"d"]]
        assert connection.queued_bytes == 7 and connection.memory.used == 7  # b, big2, c, d
        connection.resume_writing()
        await link.replies_count(6)
        assert [reply for _tag, reply in link.replies] == [
            b"[a]", b"[big1]", b"[b]", b"[big2]", b"[c]", b"[d]"]
        assert protocol.calls[1:] == [[b"b", b"big2", b"c", b"d"], [b"c", b"d"]]
        assert connection.memory.used == 0 and connection.queued_bytes == 0
        connection.close()
        await finished(connection)

    run_with_core(tmp_path, scenario)


def test_a_run_answered_with_nothing_closes_the_link_instead_of_serving_it_forever(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        protocol = BatchingProtocol()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", protocol)
        for body in (b"a", b"b"):
            connection.submit(1, memoryview(body))  # (code 1: answered alone)
        for body in (b"none", b"c"):
            connection.submit(5, memoryview(body))
        await finished(connection)
        assert [reply for _tag, reply in link.replies] == [b"a", b"b"]
        assert link.closed == 1 and len(protocol.calls) == 1
        assert connection.memory.used == 0

    run_with_core(tmp_path, scenario)


def test_a_closing_answer_among_coalesced_requests_closes_the_link_after_it(tmp_path):
    async def scenario(core: Core) -> None:
        link = FakeLink()
        protocol = BatchingProtocol()
        connection = BinaryConnection(core, link, "10.0.0.1:1", "tcp", protocol)
        for body in (b"a", b"close", b"never"):
            connection.submit(5, memoryview(body))
        await finished(connection)
        assert [reply for _tag, reply in link.replies] == [b"[a]", b"bye"]
        assert link.closed == 1

    run_with_core(tmp_path, scenario)
