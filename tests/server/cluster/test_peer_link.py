"""A link to another node (``cluster.peer_link``) over a real socket, against a scripted peer:
answers reach their own requests in any order, a fetch answer of megabytes arrives whole and
stays intact after later answers arrive, a peer that goes away or sends garbage fails what
waits (``PeerUnavailable``) and the link says it is closed."""

from __future__ import annotations

import asyncio
import os
import struct

import pytest

from rill.protocol.peer import codec
from rill.protocol.peer.codec import Message
from rill.server.cluster.peer_link import PeerAnswerLost, PeerLink, PeerUnavailable


class ScriptedPeer:
    """A peer listener that answers HELLO, then hands every later request to ``answer``."""

    def __init__(self, answer) -> None:  # type: ignore[no-untyped-def]
        self.answer = answer
        self.server: asyncio.base_events.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> tuple[str, int]:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[:2]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            while True:
                kind, length = struct.unpack("<BI", await reader.readexactly(5))
                request = codec.decode(kind, memoryview(await reader.readexactly(length)))
                if kind == codec.HELLO:
                    writer.writelines(codec.encode(codec.answer(request)))
                else:
                    await self.answer(request, writer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def stop(self) -> None:
        for writer in self.writers:
            writer.close()
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


def run(scenario) -> None:  # type: ignore[no-untyped-def]
    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_answers_reach_their_requests_and_a_large_body_stays_whole() -> None:
    records = os.urandom(3 * 1024 * 1024 + 17)  # a fetch answer of several read()s
    held: list[Message] = []

    async def answer(request: Message, writer: asyncio.StreamWriter) -> None:
        held.append(request)
        if len(held) % 2 == 0:  # each pair: the second request is answered first
            for message in reversed(held[-2:]):
                size = message.header["size"]
                writer.writelines(codec.encode(codec.answer(
                    message, {"size": size}, chunks=[records[:size // 2], records[size // 2:size]])))

    async def scenario() -> None:
        peer = ScriptedPeer(answer)
        link = PeerLink(*(await peer.start()), 2, b"secret")
        await link.open()
        try:
            big, small = await asyncio.gather(
                link.request(codec.FETCH, {"size": len(records)}),
                link.request(codec.FETCH, {"size": 1000}))
            assert big.header["size"] == len(records) and bytes(big.body) == records
            assert small.header["size"] == 1000 and bytes(small.body) == records[:1000]
            later = await asyncio.gather(link.request(codec.FETCH, {"size": 10}),
                                         link.request(codec.FETCH, {"size": 20}))
            assert [bytes(m.body) for m in later] == [records[:10], records[:20]]
            assert bytes(big.body) == records  # its buffer was not reused by later answers
        finally:
            link.close()
            await link.wait_closed()
            await peer.stop()

    run(scenario)


@pytest.mark.parametrize("ending", ["closed", "garbage"])
def test_a_peer_that_goes_away_or_sends_garbage_fails_what_waits(ending: str) -> None:
    async def answer(request: Message, writer: asyncio.StreamWriter) -> None:
        if ending == "closed":
            writer.close()
        else:  # a frame too short to hold a message head
            writer.write(struct.pack("<BI", codec.FETCH | codec.ANSWER, 3) + b"abc")

    async def scenario() -> None:
        peer = ScriptedPeer(answer)
        link = PeerLink(*(await peer.start()), 2, b"secret")
        await link.open()
        try:
            # sent, then the link ended: the peer may have acted on it
            with pytest.raises(PeerAnswerLost, match="link closed"):
                await link.request(codec.FETCH, {"size": 1}, timeout=10)
            assert link.closed
            # not sent at all: plainly unavailable, safe to send elsewhere
            with pytest.raises(PeerUnavailable, match="link closed") as refused:
                await link.request(codec.FETCH, {"size": 1})
            assert not isinstance(refused.value, PeerAnswerLost)
        finally:
            link.close()
            await link.wait_closed()
            await peer.stop()

    run(scenario)


def test_a_peer_that_is_not_listening_is_unavailable() -> None:
    async def scenario() -> None:
        peer = ScriptedPeer(None)
        host, port = await peer.start()
        await peer.stop()
        link = PeerLink(host, port, 2, b"secret")
        with pytest.raises(PeerUnavailable) as refused:
            await link.open()
        assert not isinstance(refused.value, PeerAnswerLost)  # nothing was sent
        assert link.closed

    run(scenario)


def test_a_request_cancelled_as_its_answer_arrives_ends_cancelled() -> None:
    """A follower is stopped by cancelling its task; a cancellation that lands in the same turn
    of the loop as the answer it waits for must not be lost (Python 3.11's ``wait_for`` would
    return the answer, and the stopped follower would go on fetching)."""
    async def answer(request: Message, writer: asyncio.StreamWriter) -> None:
        writer.writelines(codec.encode(codec.answer(request, {"size": 1})))

    async def scenario() -> None:
        peer = ScriptedPeer(answer)
        link = PeerLink(*(await peer.start()), 2, b"secret")
        await link.open()
        asking: asyncio.Task[Message] | None = None
        deliver = link._deliver

        def deliver_then_cancel(message: Message) -> None:
            deliver(message)  # the waiter is done ...
            assert asking is not None
            asking.cancel()  # ... and its task is cancelled in the same turn

        link._deliver = deliver_then_cancel  # type: ignore[method-assign]
        try:
            asking = asyncio.create_task(link.request(codec.FETCH, {"size": 1}, timeout=10))
            with pytest.raises(asyncio.CancelledError):
                await asking
        finally:
            link.close()
            await link.wait_closed()
            await peer.stop()

    run(scenario)


def test_a_request_cancelled_before_its_answer_leaves_no_waiter_and_the_link_serves_on() -> None:
    """A forward given up (its leader left the cluster) is cancelled while the answer is still
    to come: its waiter goes, the late answer is dropped, and the next request on the link
    gets its own answer."""
    held: list[tuple[Message, asyncio.StreamWriter]] = []

    async def answer(request: Message, writer: asyncio.StreamWriter) -> None:
        if not held:  # the first is answered only with the second
            held.append((request, writer))
            return
        first, _ = held[0]
        writer.writelines(codec.encode(codec.answer(first, {"size": 1})))
        writer.writelines(codec.encode(codec.answer(request, {"size": 2})))

    async def scenario() -> None:
        peer = ScriptedPeer(answer)
        link = PeerLink(*(await peer.start()), 2, b"secret")
        await link.open()
        try:
            asking = asyncio.create_task(link.request(codec.FETCH, {"size": 1}, timeout=10))
            while not held:
                await asyncio.sleep(0.01)
            asking.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asking
            assert link._pending == {}
            answer_ = await link.request(codec.FETCH, {"size": 2}, timeout=10)
            assert answer_.header["size"] == 2 and not link.closed
        finally:
            link.close()
            await link.wait_closed()
            await peer.stop()

    run(scenario)


class Links:
    """``ClusterNode.links`` whose request fails as ``failure`` says."""

    def __init__(self, failure: Exception) -> None:
        self.failure = failure

    async def request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise self.failure


@pytest.mark.parametrize(("failure", "expected"), [
    (PeerAnswerLost("peer 127.0.0.1:1: no answer in 35.0 s"), "LeaderAnswerLost"),
    (PeerUnavailable("peer 127.0.0.1:1: connection refused"), "LeaderNotAvailable"),
])
def test_a_forward_whose_answer_is_lost_is_told_apart_from_one_never_sent(failure, expected
                                                                          ) -> None:
    """``ClusterNode.forward`` on this link's failures: sent and unanswered is an unknown
    outcome (the leader may have applied it); never sent is a leader not available."""
    from types import SimpleNamespace

    from rill import errors
    from rill.server.cluster.node import ClusterNode
    from rill.server.core.cluster_view import NodeInfo

    node = SimpleNamespace(members={2: NodeInfo(2, {"peer": ("127.0.0.1", 1)})},
                           links=Links(failure), _departures={})
    with pytest.raises(errors.RillError) as raised:
        asyncio.run(ClusterNode.forward(node, 2, "iggy", 1, b"frame"))  # type: ignore[arg-type]
    assert type(raised.value).__name__ == expected
    assert "node 2" in raised.value.reason
