"""A link to another node's peer listener: requests with correlation ids, answers in any order.

Owns: ``PeerLink`` (connect, HELLO with the cluster's secret, ``request``) and ``PeerLinks``
(one link per node, opened on first use, dropped when it breaks). A request that gets no
answer in ``timeout`` seconds, or whose link breaks, raises ``PeerUnavailable``; an answer
with an error status raises ``PeerRefused`` (``status``: the error's name).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
from typing import Any

from rill.protocol.framing import NEED_DATA, Frame, LargeFrame
from rill.protocol.peer import codec
from rill.protocol.peer.codec import Message


LARGE_ANSWER_BUFFER = 8 * 1024 * 1024  # a fetch answer (4 MiB of records at most) in one piece


class PeerUnavailable(Exception):
    """The node could not be reached, or did not answer in time."""


class PeerAnswerLost(PeerUnavailable):
    """The request was sent, but its answer never came (the link closed, failed or timed out
    first): the peer may have acted on it."""


class PeerRefused(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def proof(secret: bytes, node_id: int) -> str:
    """What HELLO carries: an HMAC of the sender's node id under the cluster's secret."""
    return hmac.new(secret, b"rill-peer:%d" % node_id, hashlib.sha256).hexdigest()


class PeerLink:
    def __init__(self, host: str, port: int, node_id: int, secret: bytes) -> None:
        self.host, self.port = host, port
        self.node_id = node_id
        self.secret = secret
        self._protocol: _LinkProtocol | None = None
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self._numbers = itertools.count(1)
        self.closed = False

    async def open(self, timeout: float = 2.0) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                _, self._protocol = await loop.create_connection(
                    lambda: _LinkProtocol(self), self.host, self.port)
        except (OSError, TimeoutError) as error:
            self.closed = True
            raise PeerUnavailable(f"peer {self.host}:{self.port}: {error}") from None
        await self.request(codec.HELLO, {"node_id": self.node_id,
                                         "proof": proof(self.secret, self.node_id)},
                           timeout=timeout)

    def _deliver(self, message: Message) -> None:
        waiter = self._pending.pop(message.correlation, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(message)

    def _fail_all(self) -> None:
        self.closed = True
        for waiter in self._pending.values():
            if not waiter.done():
                waiter.set_exception(PeerAnswerLost(f"peer {self.host}:{self.port}: link closed"))
        self._pending.clear()

    async def request(self, kind: int, header: dict[str, Any], body: bytes = b"",
                      timeout: float = 5.0) -> Message:
        protocol = self._protocol
        if self.closed or protocol is None:
            raise PeerUnavailable(f"peer {self.host}:{self.port}: link closed")
        correlation = next(self._numbers)
        waiter: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[correlation] = waiter
        try:
            protocol.transport.writelines(codec.encode(Message(kind, correlation, header, body)))
            await protocol.drained()
            # (asyncio.timeout, not wait_for: Python 3.11's wait_for returns an answer that
            # arrived as the caller was cancelled, and the cancellation is lost)
            async with asyncio.timeout(timeout):
                answer = await waiter
        except (OSError, TimeoutError) as error:
            self._pending.pop(correlation, None)
            if isinstance(error, TimeoutError):
                raise PeerAnswerLost(f"peer {self.host}:{self.port}: no answer in "
                                     f"{timeout} s") from None
            self.close()
            raise PeerAnswerLost(f"peer {self.host}:{self.port}: {error}") from None
        except asyncio.CancelledError:  # (its answer, if one comes, is dropped)
            self._pending.pop(correlation, None)
            raise
        status = answer.header.get("status")
        if status != codec.OK:
            raise PeerRefused(str(status), str(answer.header.get("message", "")))
        return answer

    def close(self) -> None:
        self.closed = True
        if self._protocol is not None:
            self._protocol.transport.close()
        self._fail_all()

    async def wait_closed(self) -> None:
        if self._protocol is not None:
            await self._protocol.lost.wait()


class _LinkProtocol(asyncio.BufferedProtocol):
    """A link's reading and flow control: bytes arrive straight into the decoder's buffers (a
    large answer -- a fetch's records -- into a buffer of its own, allocated once at its size
    and never reused, so its body stays valid for whoever holds the answer), and each answer
    goes to its waiter; writing waits while the transport's buffer is full."""

    def __init__(self, link: PeerLink) -> None:
        self.link = link
        self.decoder = codec.PeerFrameDecoder(large_first_chunk=LARGE_ANSWER_BUFFER)
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # (connection_made)
        self.lost = asyncio.Event()
        self._resumed: asyncio.Future[None] | None = None  # while writing is paused

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        decoder = self.decoder
        decoder.buffer_updated(nbytes)
        try:
            while True:
                frame = decoder.next_frame()
                if frame is NEED_DATA:
                    return
                if isinstance(frame, LargeFrame):
                    decoder.start_large_frame()
                    continue
                if not isinstance(frame, Frame):
                    raise ValueError(f"bad peer frame {frame!r}")
                self.link._deliver(codec.decode(frame.code, frame.payload))
        except ValueError:  # (DecodeError too): the link is unusable
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.link._fail_all()
        self.lost.set()
        self.resume_writing()

    def pause_writing(self) -> None:
        if self._resumed is None:
            self._resumed = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._resumed is not None:
            if not self._resumed.done():
                self._resumed.set_result(None)
            self._resumed = None

    async def drained(self) -> None:
        if self.transport.is_closing():
            raise ConnectionResetError("the link is closed")
        if self._resumed is not None:
            await asyncio.shield(self._resumed)


class PeerLinks:
    """One link per node (for control requests: catalog, forward, epoch ends)."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.secret = b""
        self._links: dict[tuple[str, int], PeerLink] = {}
        self._opening: dict[tuple[str, int], asyncio.Lock] = {}

    async def link(self, host: str, port: int) -> PeerLink:
        key = (host, port)
        lock = self._opening.setdefault(key, asyncio.Lock())
        async with lock:
            link = self._links.get(key)
            if link is None or link.closed:
                link = PeerLink(host, port, self.node_id, self.secret)
                await link.open()
                self._links[key] = link
            return link

    async def request(self, host: str, port: int, kind: int, header: dict[str, Any],
                      body: bytes = b"", timeout: float = 5.0) -> Message:
        link = await self.link(host, port)
        return await link.request(kind, header, body, timeout)

    async def close(self) -> None:
        for link in self._links.values():
            link.close()
            await link.wait_closed()
        self._links.clear()
