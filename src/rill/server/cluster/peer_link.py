"""A link to another node's peer listener: requests with correlation ids, answers in any order.

Owns: ``PeerLink`` (connect, HELLO with the cluster's secret, ``request``) and ``PeerLinks``
(one link per node, opened on first use, dropped when it breaks). A request that gets no
answer in ``timeout`` seconds, or whose link breaks, raises ``PeerUnavailable``; an answer
with an error status raises ``PeerRefused`` (``status``: the error's name).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
from typing import Any

from rill.protocol.framing import NEED_DATA, Frame, LargeFrame
from rill.protocol.peer import codec
from rill.protocol.peer.codec import Message


class PeerUnavailable(Exception):
    """The node could not be reached, or did not answer in time."""


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
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self._numbers = itertools.count(1)
        self._reader_task: asyncio.Task[None] | None = None
        self.closed = False

    async def open(self, timeout: float = 2.0) -> None:
        try:
            reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), timeout)
        except (OSError, TimeoutError) as error:
            self.closed = True
            raise PeerUnavailable(f"peer {self.host}:{self.port}: {error}") from None
        self._reader_task = asyncio.create_task(self._read(reader))
        await self.request(codec.HELLO, {"node_id": self.node_id,
                                         "proof": proof(self.secret, self.node_id)},
                           timeout=timeout)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        decoder = codec.PeerFrameDecoder()
        try:
            while True:
                data = await reader.read(256 * 1024)
                if not data:
                    break
                decoder.feed(data)
                while True:
                    frame = decoder.next_frame()
                    if frame is NEED_DATA:
                        break
                    if isinstance(frame, LargeFrame):
                        decoder.start_large_frame()
                        continue
                    if not isinstance(frame, Frame):
                        raise ConnectionError(f"bad peer frame {frame!r}")
                    message = codec.decode(frame.code, frame.payload)
                    waiter = self._pending.pop(message.correlation, None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(message)
        except (OSError, ConnectionError, ValueError):
            pass
        finally:
            self._fail_all()

    def _fail_all(self) -> None:
        self.closed = True
        for waiter in self._pending.values():
            if not waiter.done():
                waiter.set_exception(PeerUnavailable(f"peer {self.host}:{self.port}: link closed"))
        self._pending.clear()

    async def request(self, kind: int, header: dict[str, Any], body: bytes = b"",
                      timeout: float = 5.0) -> Message:
        if self.closed or self._writer is None:
            raise PeerUnavailable(f"peer {self.host}:{self.port}: link closed")
        correlation = next(self._numbers)
        waiter: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[correlation] = waiter
        try:
            self._writer.writelines(codec.encode(Message(kind, correlation, header, body)))
            await self._writer.drain()
            answer = await asyncio.wait_for(waiter, timeout)
        except (OSError, TimeoutError) as error:
            self._pending.pop(correlation, None)
            if isinstance(error, TimeoutError):
                raise PeerUnavailable(f"peer {self.host}:{self.port}: no answer in "
                                      f"{timeout} s") from None
            self.close()
            raise PeerUnavailable(f"peer {self.host}:{self.port}: {error}") from None
        status = answer.header.get("status")
        if status != codec.OK:
            raise PeerRefused(str(status), str(answer.header.get("message", "")))
        return answer

    def close(self) -> None:
        self.closed = True
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
        self._fail_all()

    async def wait_closed(self) -> None:
        if self._reader_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task


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
