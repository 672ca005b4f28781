"""The generic connection loop of the binary listeners, shared by TCP and QUIC and by any
protocol (``server.protocols``: Iggy, Kafka, TANK).

Owns: one client session per link (``core.connect`` when the link opens, ``core.disconnect``
when it goes away), the in-order queue of ``(code, payload, tag)`` requests the link has framed,
calling the protocol's ``handle_request`` for each one, and handing every reply back to the link
through the small ``ReplyLink`` interface. The link (a TCP socket, a QUIC connection) keeps the
byte-level concerns: framing, buffers, certificates, streams.

Invariants:

* requests of one link are answered one at a time, in the order they were submitted; links are
  served concurrently (one worker task per link). Except: a reply with ``later`` (TANK's
  long-polling consume) is written when that awaitable is done, while the requests behind it
  are served and answered; a closing link cancels it;
* ``tag`` travels untouched from ``submit`` to ``ReplyLink.send_reply`` (TCP passes None; QUIC
  passes the stream id the answer belongs to);
* inbound back-pressure: while more than ``max_queued_bytes`` of payload wait to be served the
  link is asked to ``pause_reading``, and to ``resume_reading`` once half of it is served;
* outbound back-pressure: after ``pause_writing`` (called by the link) the loop waits for
  ``resume_writing`` before serving the next request;
* a reply whose ``close`` flag is set (stale or vanished session) is delivered, then the link
  is closed; ``refuse(status)`` answers ``status`` after the requests queued before it and
  closes the link; after ``close()`` no reply is delivered any more;
* the protocol's ``open_session`` sees the session before any request (a listener's own login
  rule, e.g. Kafka on loopback); a protocol's ``greeting`` bytes, when it has any, are the
  first thing written on the link (TANK's ping on accept);
* memory: every queued payload is accounted in the server-wide ``RequestMemory`` until it is
  served (a link accounts a large frame itself, as its bytes arrive: ``submit(accounted=True)``);
  while the budget is spent a link holding more than ``ALWAYS_READ_BYTES`` is asked to pause
  reading (one holding less is always read: small requests never wait for the others). Before
  login at most ``limits.max_request_size_unauthenticated`` bytes may wait. A large request
  that the principal may not make anywhere is refused from its header, before its body is
  read (``refusal_before_body``); A reply is let go as soon as the
  link has it (a 400 MB poll answer is not kept until the next request);
* pipelined requests: for a protocol that asks for it (``WireProtocol.holds_replies``: TANK,
  whose clients pipeline requests with ids), a small reply whose request has others queued
  right behind it (on a link without tags: TCP) is held back, up to ``HELD_REPLY_BYTES`` of
  replies answering up to ``HELD_REQUEST_BYTES`` of requests, and written together with
  theirs when the queue runs dry -- one socket write for a burst of requests instead of one
  each. Held replies are written before anything else is (a later reply, a file region, a
  refusal, a close), before the loop waits on the link's writing, and at the event loop's
  next turn in any case (a request behind them that waits does not hold them back);
* served together: for a protocol that names ``coalesced_codes``, requests of such a code
  queued one right behind the other (on a link without tags, at most ``COALESCED_REQUESTS``
  of them and ``COALESCED_BYTES`` of payload) are handed to its ``handle_requests`` in one
  call, which answers each, in order -- or the first of them (at least one), when their
  answers would hold too much memory at once: the others go back to the head of the queue
  and are served next, after the link has taken the answers (and its writing allows more);
  each is counted in the metrics with the call's duration; with ``holds_replies``, their
  small replies are held as replies of requests queued behind (up to ``HELD_REPLY_BYTES``)
  and written together once the last is handed over;
* timeouts (``transports.limits``): the ``Supervisor`` closes a link that has not logged in
  within ``unauthenticated_timeout``, that is logged in and idle for ``idle_timeout``, whose
  request has been arriving for longer than ``request_timeout``, or whose large request arrives
  slower than ``min_request_rate`` (while the server reads it); never while a request of it is
  being served. The session's ``close_link`` closes the link for the core (a heartbeat-stale
  session);
* metrics: while the server's metrics are on (``Metrics.enabled`` when the link opens), every
  request is counted by protocol, kind (``WireProtocol.request_kind``), transport and outcome
  (``Reply.outcome``) and timed from the start of ``handle_request`` to its reply (a later
  reply's wait is not included). The link keeps the ``RequestSeries`` of each request code it
  has seen, so a request costs a dict look-up, two clock reads and a bisect; with metrics off,
  one test of a local.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any, Protocol, Sequence

from rill.server.core.core import Core
from rill.server.metrics import RequestSeries
from rill.server.protocols import WireProtocol
from rill.server.transports.limits import (
    RATE_GRACE,
    UNLIMITED,
    ConnectionLimits,
    RequestMemory,
    Supervisor,
)

log = logging.getLogger(__name__)

MAX_QUEUED_BYTES = 64 * 1024 * 1024  # ask the link to stop reading while this much waits
# a link holding less than this is read whatever the request memory says: small requests (a
# PING, a login, a small send) never wait for what other connections hold
ALWAYS_READ_BYTES = 256 * 1024
# the most request codes whose metrics a link keeps at hand (more: looked up each time)
KEPT_SERIES = 64
# replies of pipelined requests held back to be written together, at most (bytes); a reply
# this large is written at once (its bytes cost more than the write call saved)
HELD_REPLY_BYTES = 64 * 1024
# while replies are held, the requests they answer may hold at most this much payload: the
# first held reply waits for no more than the serving of about this many request bytes (large
# requests -- a Kafka producer's 1 MB batches -- get their replies at once, so the client's
# window of requests in flight refills as soon as it would have)
HELD_REQUEST_BYTES = 64 * 1024
# at most this many queued requests (and this much of their payload) are served together
COALESCED_REQUESTS = 64
COALESCED_BYTES = 4 * 1024 * 1024
_PLAIN = (bytes, bytearray, memoryview)

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

    def large_frame_progress(self) -> tuple[int, float] | None:
        """(bytes received, since when) of a large frame being read while reading is not held
        back by the server, for ``min_request_rate``; None otherwise (or when not tracked)."""


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
        transport: str,
        protocol: WireProtocol,
        max_queued_bytes: int = MAX_QUEUED_BYTES,
        limits: ConnectionLimits = UNLIMITED,
        memory: RequestMemory | None = None,
        supervisor: Supervisor | None = None,
    ) -> None:
        self.core = core
        self.link = link
        self.address = address
        self.protocol = protocol
        self.max_queued_bytes = max_queued_bytes
        self.limits = limits
        self.memory = memory if memory is not None else RequestMemory()
        self.supervisor = supervisor
        self.queue: collections.deque = collections.deque()
        self.queued_bytes = 0
        self.reading_paused = False
        self.closed = False
        self.serving = False  # a request is being handled or its reply written
        self.drain_waiter = False  # the link waits for the queue to empty (see wait_for_drain)
        now = time.monotonic()
        self.last_request = now  # of the last request received or answered
        self.unauthenticated_since: float | None = now
        self.frame_started_at: float | None = None  # set by the link while a frame arrives
        self.idle: asyncio.Future[None] | None = None  # the worker waits for a request on it
        self.later: set[asyncio.Task] = set()  # replies that come later (Reply.later)
        self.can_write = asyncio.Event()
        self.held: list[Buffer] = []  # replies of pipelined requests, to write together
        self.held_bytes = 0
        self.held_requests = 0  # the payload bytes of the requests whose replies are held
        self.run_behind = 0  # replies of a run served together still to be handed over
        self.holds_replies = bool(getattr(protocol, "holds_replies", False))
        self.coalesced_codes = frozenset(getattr(protocol, "coalesced_codes", ()))
        self.flush_soon: asyncio.Handle | None = None
        self.can_write.set()
        self._large_frame_progress = getattr(link, "large_frame_progress", lambda: None)
        self.session = core.connect(address, transport)
        self.session.protocol = protocol.name
        self.session.close_link = self._close_for_core
        protocol.open_session(core, self.session)
        if protocol.greeting:  # bytes a protocol sends first (TANK's ping)
            link.send_reply(None, [protocol.greeting])
        # request code -> its metrics (None: metrics are off)
        self.series: dict[int, RequestSeries] | None = {} if core.metrics.enabled else None
        self.transport_name = transport
        self.worker: asyncio.Task[None] = asyncio.get_running_loop().create_task(self._serve())
        if supervisor is not None:
            supervisor.add(self)

    # -- called by the link ----------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A request is queued or being served."""
        return self.serving or bool(self.queue)

    def max_request_size(self, transport_limit: int) -> int:
        """The largest request the link may accept now: small before login."""
        if self.session.is_authenticated:
            return transport_limit
        return min(transport_limit, self.limits.max_request_size_unauthenticated)

    def submit(self, code: int, payload: memoryview, tag: Any = None,
               accounted: bool = False) -> None:
        """Queue one framed request; its reply goes to ``link.send_reply(tag, ...)``.
        ``accounted``: the link already took the payload's size from the request memory."""
        size = len(payload)
        self.queue.append((code, payload, tag))
        self.queued_bytes += size
        if not accounted:
            self.memory.take(size)
        self.last_request = time.monotonic()
        limit = self.max_queued_bytes if self.session.is_authenticated else min(
            self.max_queued_bytes, self.limits.max_request_size_unauthenticated)
        memory_held = self.memory.spent and self.queued_bytes > ALWAYS_READ_BYTES
        if (self.queued_bytes > limit or memory_held) and not self.reading_paused:
            self.reading_paused = True
            self.link.pause_reading()
            if memory_held:
                self.memory.wait(self, self._maybe_resume)
        self._wake()

    def _wake(self) -> None:
        """Resume the worker if it waits for a request (a bare future, resolved here: the
        worker runs at the event loop's next turn)."""
        idle = self.idle
        if idle is not None:
            self.idle = None
            if not idle.done():
                idle.set_result(None)

    def refusal_before_body(self, code: int) -> int | None:
        """The status refusing a large request of kind ``code`` before its body is read (the
        principal may not make it anywhere), or None to read it (``refuse_before_body`` of
        the protocol, when it has one)."""
        refuse = getattr(self.protocol, "refuse_before_body", None)
        return refuse(self.core, self.session, code) if refuse is not None else None

    def wait_for_drain(self) -> None:
        """The link stopped reading until every queued request is answered (a large frame
        arrived before the login queued ahead of it was served); ``resume_reading`` follows."""
        self.drain_waiter = True
        if not self.busy:
            self._resume_drain_waiter()

    def _resume_drain_waiter(self) -> None:
        self.drain_waiter = False
        self.link.resume_reading()

    def _maybe_resume(self) -> None:
        if not self.reading_paused or self.closed:
            return
        memory_held = self.memory.spent and self.queued_bytes > ALWAYS_READ_BYTES
        if not memory_held and self.queued_bytes <= self.max_queued_bytes // 2:
            self.reading_paused = False
            self.link.resume_reading()
        elif memory_held:
            self.memory.wait(self, self._maybe_resume)

    def refuse(self, status: int, tag: Any = None) -> None:
        """Answer ``status`` once the requests queued so far are answered, then close."""
        self.queue.append(_Refusal(status, tag))
        self._wake()

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    def close(self) -> None:
        """The link is gone: stop serving, drop what is queued, end the session. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.held.clear()
        self.held_bytes = self.held_requests = 0
        if self.flush_soon is not None:
            self.flush_soon.cancel()
            self.flush_soon = None
        for item in self.queue:
            if type(item) is not _Refusal:
                self.memory.give_back(len(item[1]))
        self.queue.clear()
        self.queued_bytes = 0
        for task in self.later:
            task.cancel()
        self.memory.forget(self)
        if self.supervisor is not None:
            self.supervisor.discard(self)
        self.can_write.set()
        self._wake()
        self.core.disconnect(self.session)

    def _close_for_core(self) -> None:
        """The core ended the session (heartbeat): close the link, which then calls close()."""
        if not self.closed:
            self.flush()
            self.link.close_link()

    # -- timeouts (called by the Supervisor) -----------------------------------------------

    def overdue(self, now: float) -> str | None:
        limits = self.limits
        started = self.frame_started_at
        if started is not None and now - started > limits.request_timeout:
            return f"a request did not arrive whole within {limits.request_timeout:g} s"
        if started is not None and limits.min_request_rate:
            progress = self._large_frame_progress()
            if progress is not None:
                received, since = progress
                elapsed = now - since
                if elapsed > RATE_GRACE and received < limits.min_request_rate * elapsed:
                    return (f"a large request arrived at {received / elapsed:.0f} B/s, below "
                            f"min_request_rate ({limits.min_request_rate:.0f} B/s)")
        if self.busy or self.later:
            return None  # the server is working for this connection
        if not self.session.is_authenticated:
            if self.unauthenticated_since is None:  # logged out since the last sweep
                self.unauthenticated_since = now
            elif now - self.unauthenticated_since > limits.unauthenticated_timeout:
                return f"no login within {limits.unauthenticated_timeout:g} s"
            return None
        self.unauthenticated_since = None
        if started is None and now - self.last_request > limits.idle_timeout:
            return f"idle for {limits.idle_timeout:g} s"
        return None

    def expire(self, reason: str) -> None:
        log.info("closing connection %s: %s", self.session.address, reason)
        self.link.close_link()
        self.close()

    # -- replies ---------------------------------------------------------------------------

    def _send(self, tag: Any, parts: Sequence[Buffer], request_size: int = 0) -> None:
        """Hand a reply to the link, or hold it back for the replies of the requests queued
        right behind it (see the module's invariants); ``request_size``: the payload bytes of
        the request it answers."""
        if tag is None and self.holds_replies:
            queue = self.queue
            if self.run_behind or (queue and type(queue[0]) is not _Refusal
                                   and self.held_requests + request_size < HELD_REQUEST_BYTES):
                size = 0
                for part in parts:
                    if type(part) not in _PLAIN:
                        break
                    size += len(part)
                else:
                    if size < HELD_REPLY_BYTES:  # small, more right behind: held for them
                        self.held.extend(parts)
                        self.held_bytes += size
                        self.held_requests += request_size
                        if self.held_bytes >= HELD_REPLY_BYTES:
                            self.flush()
                        elif self.flush_soon is None:
                            self.flush_soon = asyncio.get_running_loop().call_soon(self.flush)
                        return
            if self.held and all(type(part) in _PLAIN for part in parts):
                self.held.extend(parts)  # the last of a burst: written with the ones held
                self.flush()
                return
        if self.held or self.flush_soon is not None:
            self.flush()
        self.link.send_reply(tag, parts)

    def flush(self) -> None:
        """Write the held replies, if any, in one go."""
        if self.flush_soon is not None:
            self.flush_soon.cancel()
            self.flush_soon = None
        if self.held and not self.closed:
            held, self.held = self.held, []
            self.held_bytes = self.held_requests = 0
            self.link.send_reply(None, held)

    # -- the loop --------------------------------------------------------------------------

    async def _reply_later(self, tag: Any, later) -> None:
        try:
            reply = await later
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("connection %s: a later reply failed", self.session.address)
            if not self.closed:
                self.link.close_link()
            return
        if self.closed:
            return
        self.last_request = time.monotonic()
        self._send(tag, reply.parts)
        if reply.close:
            self.flush()
            self.link.close_link()

    def _measured(self, code: int, outcome: str, seconds: float) -> None:
        """Count request ``code`` with its outcome and duration (metrics on)."""
        series = self.series
        one = series.get(code)
        if one is None:
            one = self.core.metrics.request_series(
                self.protocol.name, self.protocol.request_kind(code), self.transport_name)
            if len(series) < KEPT_SERIES:
                series[code] = one
        one.record(outcome, seconds)

    def _answered(self, tag: Any, reply: Any, size: int) -> bool:
        """Hand ``reply`` (to a request of ``size`` bytes) to the link; False once the link
        is closed by it."""
        if reply.later is not None:
            task = asyncio.ensure_future(self._reply_later(tag, reply.later))
            self.later.add(task)
            task.add_done_callback(self.later.discard)
        if reply.parts:  # (a later reply may have nothing to write now)
            self._send(tag, reply.parts, size)
        self.last_request = time.monotonic()
        self.serving = False
        if reply.close:
            self.flush()
            self.link.close_link()
            return False
        return True

    async def _serve_together(self, code: int, payload: memoryview) -> bool:
        """``payload`` and the requests of ``code`` queued right behind it (see "served
        together"), in one ``handle_requests`` call; False once the link is closed."""
        queue = self.queue
        payloads = [payload]
        total = len(payload)
        while (queue and len(payloads) < COALESCED_REQUESTS and type(queue[0]) is tuple
               and queue[0][0] == code and queue[0][2] is None
               and total + len(queue[0][1]) <= COALESCED_BYTES):
            payloads.append(queue.popleft()[1])
            total += len(payloads[-1])
        sizes = [len(one) for one in payloads]
        self.queued_bytes -= total
        self.serving = True
        started = time.perf_counter()
        try:
            replies = await self.protocol.handle_requests(self.core, self.session, code,
                                                          payloads)
            rest = payloads[len(replies):]  # (answered later: see "served together")
        finally:
            payloads.clear()
            self.memory.give_back(total)
        if self.series is not None:
            each = (time.perf_counter() - started) / max(len(replies), 1)  # (those answered)
            for reply in replies:
                self._measured(code, reply.outcome, each)
        if self.closed:
            return False
        if not replies:  # (a protocol answers at least the first: a failure of its own)
            log.error("connection %s: %s answered none of %d requests served together",
                      self.session.address, self.protocol.name, len(sizes))
            self.flush()
            self.link.close_link()
            return False
        self.run_behind = len(replies)  # all served: their replies go out together
        try:
            for reply, size in zip(replies, sizes):
                self.run_behind -= 1
                if not self._answered(None, reply, size):
                    return False
        finally:
            self.run_behind = 0
        if rest:  # not answered yet: first in the queue again, served next
            size = 0
            for one in reversed(rest):
                queue.appendleft((code, one, None))
                size += len(one)
            self.queued_bytes += size
            self.memory.take(size)
        return True

    async def _serve(self) -> None:
        queue = self.queue
        link = self.link
        measured = self.series is not None
        clock = time.perf_counter
        loop = asyncio.get_running_loop()
        started = 0.0
        try:
            while not self.closed:
                if not queue:
                    idle = self.idle = loop.create_future()
                    try:
                        await idle
                    finally:
                        self.idle = None
                    continue
                item = queue.popleft()
                if type(item) is _Refusal:
                    self.flush()
                    link.send_reply(item.tag, self.protocol.error_reply(item.status).parts)
                    link.close_link()
                    return
                code, payload, tag = item
                item = None
                if (code in self.coalesced_codes and tag is None and queue
                        and type(queue[0]) is tuple and queue[0][0] == code):
                    if not await self._serve_together(code, payload):
                        return
                    payload = None
                else:
                    size = len(payload)
                    self.queued_bytes -= size
                    self.serving = True
                    if measured:
                        started = clock()
                    try:
                        reply = await self.protocol.handle_request(self.core, self.session, code,
                                                                   payload)
                    finally:
                        payload = None
                        self.memory.give_back(size)
                    if measured:
                        self._measured(code, reply.outcome, clock() - started)
                    if self.closed or not self._answered(tag, reply, size):
                        return
                    reply = None  # the link has the bytes; don't keep them until the next one
                self._maybe_resume()
                if self.drain_waiter and not queue:
                    self._resume_drain_waiter()
                if not self.can_write.is_set():
                    self.flush()
                    await self.can_write.wait()
        except Exception:
            log.exception("connection %s failed", self.session.address)
            link.close_link()
