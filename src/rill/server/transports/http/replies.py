"""Replies that carry messages (polls, follow events): memory bounded per reply and in all, and
written only as fast as the client reads.

Owns:

* ``ReplyMemory``: the bytes of messages held by HTTP replies being written, over every
  connection, against ``[http] reply_memory``. Each reply is granted its bytes before it reads
  (``grant``): ``[http] max_poll_size`` while the memory lasts, what is left of it when less,
  and ``SMALL_REPLY`` when it is spent (so small replies never wait, and an unread client slows
  no one); the read takes at most that (at least one message), and the bytes are given back once
  the reply is written. A connection thus holds at most one reply's grant (or one message);
* ``ReplyWriter``: writes a reply body in pieces of ``PIECE`` bytes, each only once the
  connection's transport has taken the previous ones (the ASGI send alone would accept a whole
  body at once), so the text of a large poll is made a message at a time and never whole.
  ``write(..., drain=True)`` returns once the transport buffer has drained: a follow stream
  reads its next event only then. A reply the client takes slower than ``[connections]
  min_request_rate`` (judged after ``RATE_GRACE`` from the start of the piece of text being
  written; without a rate, not within ``request_timeout``) has its connection dropped;
* ``StreamedReply``: the Starlette response of such a body (``Content-Length`` when the whole
  text fits in one piece, chunked otherwise).

The writer reaches the connection through ``scope["state"][LINK]``, the ``ReplyLink`` the
listener's protocol puts there (listener.py); without one (an app run elsewhere) it writes
through the ASGI send alone.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from rill.server.transports.limits import RATE_GRACE

LINK = "rill.link"  # the scope["state"] key of the connection's ReplyLink
PIECE = 64 * 1024  # bytes of body text handed to the transport at once
SMALL_REPLY = 64 * 1024  # granted to a reply while the reply memory is spent


class ReplyMemory:
    """Bytes of messages held by replies being written, against ``limit``."""

    def __init__(self, limit: float, per_reply: int) -> None:
        self.limit = limit
        self.per_reply = per_reply
        self.used = 0

    def grant(self) -> Grant:
        size = min(self.per_reply, max(self.limit - self.used, SMALL_REPLY))
        self.used += size
        return Grant(self, int(size))


class Grant:
    """One reply's share of the ``ReplyMemory``: ``size`` bytes to read at most, then what the
    read really holds (``hold``), given back once (``release``)."""

    def __init__(self, memory: ReplyMemory, size: int) -> None:
        self.memory = memory
        self.size = size
        self.held = size

    def hold(self, size: int) -> None:
        self.memory.used += size - self.held
        self.held = size

    def release(self) -> None:
        self.memory.used -= self.held
        self.held = 0


class ReplyLink(Protocol):
    """What the writer needs of the connection (the listener's protocol)."""

    @property
    def gone(self) -> bool:
        """The connection is closed or closing."""

    @property
    def writing_paused(self) -> bool:
        """The transport holds more than its high-water mark."""

    async def writable(self) -> None:
        """Return once the transport is below its low-water mark (or the connection gone)."""

    def drop(self, reason: str) -> None:
        """Close the connection at once, unsent bytes discarded."""


class ReplyWriter:
    def __init__(self, scope: Scope, send: Send, min_rate: float, timeout: float) -> None:
        self.link: ReplyLink | None = scope.get("state", {}).get(LINK)
        self.send = send
        self.min_rate = min_rate
        self.timeout = timeout
        self.started = 0.0  # when the text being written began
        self.written = 0  # ... and its bytes written so far

    @property
    def gone(self) -> bool:
        return self.link is not None and self.link.gone

    async def write(self, text: Iterable[str | bytes], drain: bool = False) -> bool:
        """Write ``text`` (made a piece at a time, as the transport takes it); with ``drain``,
        also wait until the transport has sent it on. False when the connection is gone (or was
        dropped for reading too slowly)."""
        self.started = asyncio.get_running_loop().time()
        self.written = 0
        for piece in pieces(text):
            if not await self._writable():
                return False
            await self.send({"type": "http.response.body", "body": piece, "more_body": True})
            self.written += len(piece)
        if drain:
            return await self._writable()
        return not self.gone

    async def _writable(self) -> bool:
        link = self.link
        if link is None:
            return True
        if link.writing_paused and not link.gone:
            if self.min_rate:
                deadline = self.started + max(RATE_GRACE, self.written / self.min_rate)
            else:
                deadline = self.started + self.timeout
            wait = deadline - asyncio.get_running_loop().time()
            try:
                await asyncio.wait_for(link.writable(), max(wait, 0.0) if math.isfinite(wait)
                                       else None)
            except TimeoutError:
                link.drop(f"its reply was read slower than min_request_rate "
                          f"({self.min_rate:.0f} B/s)" if self.min_rate else
                          f"its reply was not read within request_timeout ({self.timeout:.0f} s)")
                return False
        return not link.gone


def pieces(text: Iterable[str | bytes]) -> Iterator[bytes]:
    """``text`` as UTF-8 pieces of ``PIECE`` bytes (the last one shorter)."""
    buffer: list[bytes] = []
    size = 0
    for part in text:
        data = part.encode() if isinstance(part, str) else part
        buffer.append(data)
        size += len(data)
        if size >= PIECE:
            joined = b"".join(buffer) if len(buffer) > 1 else data
            whole = size - size % PIECE
            for start in range(0, whole, PIECE):
                yield joined[start:start + PIECE]
            buffer = [joined[whole:]] if whole < size else []
            size -= whole
    if buffer:
        yield b"".join(buffer)


class StreamedReply(Response):
    """A 200 whose body ``produce`` writes through a ``ReplyWriter``; ``release`` runs once the
    body is written (or the connection gone)."""

    def __init__(self, produce: Callable[[ReplyWriter], Awaitable[None]], media_type: str,
                 min_rate: float, timeout: float, headers: Mapping[str, str] | None = None,
                 release: Callable[[], None] = lambda: None) -> None:
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.init_headers(headers)  # no body: no Content-Length (chunked)
        self.produce = produce
        self.min_rate = min_rate
        self.timeout = timeout
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            writer = ReplyWriter(scope, send, self.min_rate, self.timeout)
            await self.produce(writer)
            if not writer.gone:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.release()


class TextReply(StreamedReply):
    """``text`` (JSON) as one body: sent with its ``Content-Length`` when it fits in one piece,
    else written a piece at a time."""

    def __init__(self, text: Iterable[str | bytes], media_type: str, min_rate: float,
                 timeout: float, release: Callable[[], None] = lambda: None) -> None:
        super().__init__(self._write, media_type, min_rate, timeout, release=release)
        self.parts = iter(pieces(text))
        self.first = next(self.parts, b"")
        self.second = next(self.parts, None)
        if self.second is None:  # small: one body with its length
            self.body = self.first
            self.init_headers()

    async def _write(self, writer: ReplyWriter) -> None:
        assert self.second is not None
        await writer.write(_chain(self.first, self.second, self.parts))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.second is not None:
            await super().__call__(scope, receive, send)
            return
        try:
            await Response.__call__(self, scope, receive, send)
        finally:
            self.release()


def _chain(first: bytes, second: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield second
    yield from rest
