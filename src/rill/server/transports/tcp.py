"""A binary protocol over TCP (optionally TLS): Iggy's, Kafka's or TANK's, each on its own listener.

Owns: accepting connections (wrapped in TLS when the listener has an ``ssl.SSLContext``) and
feeding each byte stream to the frame decoder its protocol supplies (``WireProtocol.
frame_decoder``: Iggy's ``RequestFrameDecoder``, Kafka's ``KafkaRequestFrameDecoder``, both
``rill.protocol.framing.FrameDecoder``s) with few
copies: the socket reads straight into the decoder's buffers (BufferedProtocol). Small frames
are parsed out of its shared buffer, which starts small (a connection costs little at accept)
and grows only when a frame needs it; a larger frame gets a buffer of its own that grows with
the bytes that actually arrive, never to what the header merely announces. Those bytes are
taken from the server-wide request memory as they arrive (a header announcing 60 MiB takes
nothing, so frames trickled in stop nobody else); while the memory is spent, large frames wait
(the oldest one being read may finish, so that frames begun together cannot wait for each
other for ever) and small ones are still read. A large frame that the principal may not make
anywhere (the protocol's ``refuse_before_body``, from the header) is refused before its body.

Refused without being read, the client answered (the protocol's ``error_reply``: Iggy answers
the status, Kafka answers nothing) and the connection closed (nobody else is affected): a
length below the protocol's header (status 3) and a frame above the limit (4029), which is
``tcp.max_frame_size`` once logged in and ``[connections] max_request_size_unauthenticated``
before (a larger frame behind a login that is still being served waits for that login's answer);
a frame above the limit is logged at info with its size and the setting that bounds it (once
per client address, then at most once a minute with a count: ``logs.Refusals``).
Timeouts and the in-order serving belong to the transport-neutral ``BinaryConnection``
(``transports/binary.py``, shared with QUIC); this module feeds it frames, tells it when a frame
is arriving (from its first byte), and writes what it answers.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from typing import Any, Sequence

from rill import errors
from rill.protocol.framing import NEED_DATA, BadLength, Frame, LargeBuffers, LargeFrame
from rill.server.core.core import Core
from rill.server.logs import Refusals
from rill.server.protocols import WireProtocol
from rill.server.storage.file_region import FileRegion
from rill.server.transports.binary import Buffer, BinaryConnection
from rill.server.transports.file_send import FileSender
from rill.server.transports.limits import UNLIMITED, ConnectionLimits, RequestMemory, Supervisor

log = logging.getLogger(__name__)


class TcpConnection(asyncio.BufferedProtocol):
    """One TCP link: framing in (the protocol's frame decoder), ``BinaryConnection`` in the
    middle, frames out."""

    def __init__(self, listener: TcpListener) -> None:
        self.listener = listener
        self.max_frame_size = listener.max_frame_size
        self.memory = listener.memory
        self.decoder = listener.protocol.frame_decoder(listener.max_frame_size)
        self.decoder.large_buffers = listener.large_buffers
        self.get_buffer = self.decoder.get_buffer  # the socket reads into the decoder's buffers
        self.large_taken = 0  # bytes of the large frame being read (taken from memory)
        self.large_active = False  # a large frame is being read into its own buffer
        self.large_held = False  # ... and reading it waits for the request memory
        self.waiting_memory = 0  # a large frame's size waiting for the request memory to begin
        self.rate_since = 0.0  # min_request_rate: the large frame's bytes since this moment ...
        self.rate_base = 0  # ... beyond these
        self.rate_reading = False  # reading was on at the last look (off: the window restarts)
        self.refused = False
        self.files: FileSender | None = None  # replies that hold file regions
        self.transport_paused = False  # the transport's buffer is above its high-water mark
        self.transport: asyncio.Transport | None = None
        self.connection: BinaryConnection | None = None

    # -- connection lifecycle --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        listener = self.listener
        sock = transport.get_extra_info("socket")
        socket_descriptor = None  # set where replies may sendfile into the socket
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if listener.sendfile and listener.ssl_context is None:
                socket_descriptor = sock.fileno()  # the kernel may send log files as they are
        peer = transport.get_extra_info("peername") or ("unknown", 0)
        address = f"{peer[0]}:{peer[1]}"
        if listener.supervisor is not None and not listener.supervisor.admits(address):
            self.refused = True
            transport.abort()  # nothing was allocated for it; its descriptor goes at once
            return
        self.files = FileSender(self.transport, socket_descriptor,
                                hold=lambda: self.connection.pause_writing(),
                                release=self._release_writing)
        self.connection = BinaryConnection(
            listener.core, self, address, "tcp", listener.protocol, limits=listener.limits,
            memory=listener.memory, supervisor=listener.supervisor,
        )
        self.connection.session.sends_files = socket_descriptor is not None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.large_active or self.waiting_memory:
            self.memory.forget(self)
            if self.large_taken:
                self.memory.give_back(self.large_taken)
            self.large_taken = 0
            self.large_active = self.large_held = False
            self.waiting_memory = 0
        if self.files is not None:
            self.files.close()
        if self.connection is not None:
            self.connection.close()

    def pause_writing(self) -> None:
        self.transport_paused = True
        self.connection.pause_writing()

    def resume_writing(self) -> None:
        self.transport_paused = False
        if not self.files.busy:  # (a file region still waiting for the socket holds it)
            self.connection.resume_writing()

    # -- the ReplyLink side of BinaryConnection ----------------------------------------------

    def send_reply(self, tag: Any, parts: Sequence[Buffer | FileRegion]) -> None:
        for part in parts:
            if type(part) is FileRegion:
                break
        else:
            self.transport.writelines(parts)
            return
        try:
            self.files.send(parts)
        except OSError as error:  # the peer went away, or a log file cannot be read
            log.info("connection %s: reply dropped (%s)", self.connection.session.address, error)
            self.files.close()
            self.transport.abort()

    def _release_writing(self) -> None:
        """A reply's file region is sent: the next reply may go, unless the transport's own
        buffer still holds writing back."""
        if not self.transport_paused:
            self.connection.resume_writing()

    def close_link(self) -> None:
        self.transport.close()

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        """Read again, unless something else still holds reading back: the request memory, the
        connection's queue, a login being answered."""
        if self.refused or self.transport.is_closing():
            return
        if self.waiting_memory or self.decoder.buffered:
            self._parse_frames()  # a frame held back (memory, login) may go on now
        connection = self.connection
        if not (self.refused or self.waiting_memory or self.large_held or connection.reading_paused
                or connection.drain_waiter):
            self.transport.resume_reading()

    def _large_may_go_on(self) -> None:
        """The request memory may take more of the large frame being read."""
        self.large_held = False
        self.resume_reading()

    def large_frame_progress(self) -> tuple[int, float] | None:
        """(bytes of the large frame that arrived since the window began, when it began), None
        while no large frame is read or reading is held back (the window restarts after)."""
        if not self.large_active or self.transport is None or self.transport.is_closing():
            return None
        if not self.transport.is_reading():
            self.rate_reading = False
            return None
        received = self.decoder.buffered
        if not self.rate_reading:  # reading was held back: the client's time starts again
            self.rate_reading = True
            self.rate_since, self.rate_base = time.monotonic(), received
            return None
        return received - self.rate_base, self.rate_since

    # -- reading ---------------------------------------------------------------------------

    def buffer_updated(self, nbytes: int) -> None:
        if self.refused:
            return
        if self.large_active:  # the large frame's bytes count as they arrive
            memory = self.memory
            memory.take(nbytes)
            self.large_taken += nbytes
            if self.decoder.buffer_updated(nbytes):
                self._parse_frames()
            elif not memory.may_read_large(self):  # others hold the budget: wait for it
                self.large_held = True
                self.transport.pause_reading()
                memory.wait(self, self._large_may_go_on)
            return
        if self.decoder.buffer_updated(nbytes):
            self._parse_frames()

    def _parse_frames(self) -> None:
        decoder = self.decoder
        connection = self.connection
        # the limit changes only when a login is served, never while this loop runs
        decoder.max_payload_size = connection.max_request_size(self.max_frame_size)
        while True:
            event = decoder.next_frame()
            if type(event) is Frame:
                code, payload = event
                connection.frame_started_at = None
                if self.large_active:  # the large frame: its bytes were taken as they came
                    self.large_active = False
                    self.large_taken = 0
                    self.memory.end_large(self)
                    connection.submit(code, payload, accounted=True)
                else:
                    connection.submit(code, payload)
                continue
            if event is NEED_DATA:
                if decoder.buffered and connection.frame_started_at is None:
                    connection.frame_started_at = time.monotonic()
                return
            if type(event) is LargeFrame:
                if connection.frame_started_at is None:
                    connection.frame_started_at = time.monotonic()
                if not self._start_large(event):
                    return
                continue
            self._bad_length(event)
            return

    def _start_large(self, event: LargeFrame) -> bool:
        """Give a frame too big for the receive buffer its own, unless its kind is refused
        from the header or the request memory is spent by bytes that arrived (then reading
        waits: False). Its announced size takes nothing: its bytes count as they arrive."""
        refusal = self.connection.refusal_before_body(event.code)
        if refusal is not None:
            self._refuse(refusal)
            return False
        memory = self.memory
        if memory.spent:
            self.waiting_memory = event.payload_size
            self.transport.pause_reading()
            memory.wait(self, self.resume_reading)
            return False
        self.waiting_memory = 0
        self.decoder.start_large_frame()
        self.large_active = True
        memory.begin_large(self)
        self.large_taken = self.decoder.buffered  # what arrived with its header
        memory.take(self.large_taken)
        self.rate_reading = False  # the rate window starts at the supervisor's next look
        return True

    def _bad_length(self, bad: BadLength) -> None:
        """Below 4 (status 3) or above the limit (4029); a frame above the limit before login
        but within it after waits while a login may be being served."""
        if not bad.too_large:  # cannot even hold the code: the stream cannot be resynchronised
            self._refuse(errors.InvalidCommand.code)
        elif self.connection.busy and bad.payload_size <= self.max_frame_size:
            # maybe a login is being served: decide once it is answered
            self.transport.pause_reading()
            self.connection.wait_for_drain()
        else:
            self._log_too_large(bad.length)
            self._refuse(errors.CommandLengthError.code)

    def _log_too_large(self, size: int) -> None:
        """One line (``logs.Refusals``: per client address, then once a minute with a count)
        naming the frame's size and the setting that bounds it."""
        session = self.connection.session
        limit = self.decoder.max_payload_size
        setting = ("[tcp] max_frame_size"
                   if session.is_authenticated or limit >= self.max_frame_size
                   else "[connections] max_request_size_unauthenticated (before login)")
        self.listener.refusals.log(
            log, session.address, "frame above the limit",
            "%s connection %s: a request frame of %d bytes is above %s = %d bytes: refused "
            "unread, connection closed", self.listener.protocol.name, session.address, size,
            setting, limit)

    def _refuse(self, status: int) -> None:
        """Stop reading this connection; answer what is queued, then ``status``, then close."""
        self.refused = True
        self.transport.pause_reading()
        self.connection.refuse(status)


class TcpListener:
    """Accepts TCP (or, with ``ssl_context``, TLS) connections on HOST:PORT."""

    def __init__(
        self,
        core: Core,
        protocol: WireProtocol,
        host: str,
        port: int,
        max_frame_size: int,
        ssl_context: ssl.SSLContext | None = None,
        limits: ConnectionLimits = UNLIMITED,
        memory: RequestMemory | None = None,
        supervisor: Supervisor | None = None,
        sendfile: bool = False,
    ) -> None:
        self.core = core
        self.protocol = protocol  # what the requests framed on its links mean
        self.host = host
        self.port = port
        self.max_frame_size = max_frame_size
        self.ssl_context = ssl_context
        self.limits = limits
        self.memory = memory if memory is not None else RequestMemory()
        self.supervisor = supervisor
        self.sendfile = sendfile  # large polls may go from the log files by sendfile (not TLS)
        self.large_buffers = LargeBuffers()  # large requests are read into these again
        self.refusals = Refusals()  # frames above the limit: one line per client, then a count
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: TcpConnection(self),
            self.host,
            self.port,
            reuse_address=True,
            backlog=1024,
            ssl=self.ssl_context,
        )
        bound = self.server.sockets[0].getsockname()
        return bound[0], bound[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            try:
                await asyncio.wait_for(self.server.wait_closed(), timeout=2)
            except asyncio.TimeoutError:
                pass
