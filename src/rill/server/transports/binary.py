"""The transport-neutral connection loop of the binary protocol, shared by TCP and QUIC.

Owns: one client session per link (``core.connect`` when the link opens, ``core.disconnect``
when it goes away), the in-order queue of ``(code, payload, tag)`` requests the link has framed,
calling ``handle_request`` for each one, and handing every reply back to the link through the
small ``ReplyLink`` interface. The link (a TCP socket, a QUIC connection) keeps the byte-level
concerns: framing, buffers, certificates, streams.

Invariants:

* requests of one link are answered one at a time, in the order they were submitted; links are
  served concurrently (one worker task per link);
* ``tag`` travels untouched from ``submit`` to ``ReplyLink.send_reply`` (TCP passes None; QUIC
  passes the stream id the answer belongs to);
* inbound back-pressure: while more than ``max_queued_bytes`` of payload wait to be served the
  link is asked to ``pause_reading``, and to ``resume_reading`` once half of it is served;
* outbound back-pressure: after ``pause_writing`` (called by the link) the loop waits for
  ``resume_writing`` before serving the next request;
* a reply whose ``close`` flag is set (stale or vanished session) is delivered, then the link
  is closed; ``refuse(status)`` answers ``status`` after the requests queued before it and
  closes the link; after ``close()`` no reply is delivered any more.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any, Protocol, Sequence

from rill.protocol.primitives import Transport
from rill.server.core.core import Core
from rill.server.handlers import error_reply, handle_request

log = logging.getLogger(__name__)

MAX_QUEUED_BYTES = 64 * 1024 * 1024  # ask the link to stop reading while this much waits

Buffer = bytes | bytearray | memoryview


class ReplyLink(Protocol):
    """What the loop needs from a link; every method is called from the event loop."""

    def send_reply(self, tag: Any, parts: Sequence[Buffer]) -> None:
        """Write one whole response frame (``parts`` back to back) for request ``tag``."""

    def close_link(self) -> None:
        """Close the link; the link later calls ``BinaryConnection.close``."""

    def pause_reading(self) -> None:
        """Stop accepting request bytes for now (may be a no-op)."""

    def resume_reading(self) -> None:
        """Accept request bytes again."""


class _Refusal:
    """A queued marker: answer ``status`` after the requests before it, then close."""

    __slots__ = ("status", "tag")

    def __init__(self, status: int, tag: Any) -> None:
        self.status = status
        self.tag = tag


class BinaryConnection:
    """One client session served request by request over any ``ReplyLink``."""

    def __init__(
        self,
        core: Core,
        link: ReplyLink,
        address: str,
        transport: Transport,
        max_queued_bytes: int = MAX_QUEUED_BYTES,
    ) -> None:
        self.core = core
        self.link = link
        self.max_queued_bytes = max_queued_bytes
        self.queue: collections.deque = collections.deque()
        self.queued_bytes = 0
        self.reading_paused = False
        self.closed = False
        self.wakeup = asyncio.Event()
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.session = core.connect(address, transport)
        self.worker: asyncio.Task[None] = asyncio.get_running_loop().create_task(self._serve())

    # -- called by the link ----------------------------------------------------------------

    def submit(self, code: int, payload: memoryview, tag: Any = None) -> None:
        """Queue one framed request; its reply goes to ``link.send_reply(tag, ...)``."""
        self.queue.append((code, payload, tag))
        self.queued_bytes += len(payload)
        if self.queued_bytes > self.max_queued_bytes and not self.reading_paused:
            self.reading_paused = True
            self.link.pause_reading()
        self.wakeup.set()

    def refuse(self, status: int, tag: Any = None) -> None:
        """Answer ``status`` once the requests queued so far are answered, then close."""
        self.queue.append(_Refusal(status, tag))
        self.wakeup.set()

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    def close(self) -> None:
        """The link is gone: stop serving, drop what is queued, end the session. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.queue.clear()
        self.can_write.set()
        self.wakeup.set()
        self.core.disconnect(self.session)

    # -- the loop --------------------------------------------------------------------------

    async def _serve(self) -> None:
        queue = self.queue
        link = self.link
        try:
            while not self.closed:
                if not queue:
                    self.wakeup.clear()
                    await self.wakeup.wait()
                    continue
                item = queue.popleft()
                if type(item) is _Refusal:
                    link.send_reply(item.tag, error_reply(item.status).parts)
                    link.close_link()
                    return
                code, payload, tag = item
                self.queued_bytes -= len(payload)
                if self.reading_paused and self.queued_bytes <= self.max_queued_bytes // 2:
                    self.reading_paused = False
                    link.resume_reading()
                reply = await handle_request(self.core, self.session, code, payload)
                if self.closed:
                    return
                link.send_reply(tag, reply.parts)
                if reply.close:
                    link.close_link()
                    return
                if not self.can_write.is_set():
                    await self.can_write.wait()
        except Exception:
            log.exception("connection %s failed", self.session.address)
            link.close_link()
