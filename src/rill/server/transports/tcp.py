"""The binary protocol over TCP (optionally TLS).

Owns: accepting connections (wrapped in TLS when the listener has an ``ssl.SSLContext``) and
splitting each byte stream into frames with few copies. Small frames are parsed out of the
connection's receive buffer, which starts small (a connection costs little at accept) and grows
only when a frame needs it (up to ``SHARED_BUFFER_MAX``). A larger frame gets a buffer of its own
that the socket fills directly (BufferedProtocol): it grows with the bytes that actually arrive,
never to what the header merely announces, and its announced size is taken from the server-wide
request memory first (reading waits while that is spent), so that a frame once begun can always
complete.

Refused without being read, the client answered and the connection closed (nobody else is
affected): a length below 4 (status 3) and a frame above the limit (4029), which is
``tcp.max_frame_size`` once logged in and ``[connections] max_request_size_unauthenticated``
before (a larger frame behind a login that is still being served waits for that login's answer).
Timeouts and the in-order serving belong to the transport-neutral ``BinaryConnection``
(``transports/binary.py``, shared with QUIC); this module feeds it frames, tells it when a frame
is arriving, and writes what it answers.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
from typing import Any, Sequence

from rill import errors
from rill.protocol.framing import LENGTH_PREFIX_SIZE, REQUEST_HEADER_SIZE
from rill.protocol.primitives import Transport
from rill.server.core.core import Core
from rill.server.protocols import WireProtocol
from rill.server.transports.binary import Buffer, BinaryConnection
from rill.server.transports.limits import UNLIMITED, ConnectionLimits, RequestMemory, Supervisor

LENGTH = struct.Struct("<I")
CODE = struct.Struct("<I")
INITIAL_BUFFER_SIZE = 4 * 1024  # what an idle connection holds
SHARED_BUFFER_MAX = 256 * 1024  # frames up to this are parsed from the receive buffer
LARGE_FIRST_CHUNK = 1024 * 1024  # a large frame's buffer starts here and doubles as bytes arrive


class TcpConnection(asyncio.BufferedProtocol):
    """One TCP link: framing in, ``BinaryConnection`` in the middle, frames out."""

    def __init__(self, listener: TcpListener) -> None:
        self.listener = listener
        self.max_frame_size = listener.max_frame_size
        self.memory = listener.memory
        self.buffer = bytearray(INITIAL_BUFFER_SIZE)
        self.start = 0  # first unparsed byte in buffer
        self.end = 0  # end of received bytes in buffer
        self.large: bytearray | None = None  # payload of a frame too big for the buffer
        self.large_size = 0  # its announced size (taken from the request memory)
        self.large_filled = 0
        self.large_code = 0
        self.waiting_memory = 0  # a large frame's size waiting for the request memory
        self.refused = False
        self.transport: asyncio.Transport | None = None
        self.connection: BinaryConnection | None = None

    # -- connection lifecycle --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername") or ("unknown", 0)
        address = f"{peer[0]}:{peer[1]}"
        listener = self.listener
        if listener.supervisor is not None and not listener.supervisor.admits(address):
            self.refused = True
            transport.abort()  # nothing was allocated for it; its descriptor goes at once
            return
        self.connection = BinaryConnection(
            listener.core, self, address, Transport.TCP, listener.protocol, limits=listener.limits,
            memory=listener.memory, supervisor=listener.supervisor,
        )

    def connection_lost(self, exc: Exception | None) -> None:
        if self.large is not None or self.waiting_memory:
            self.memory.forget(self)
            if self.large is not None:
                self.memory.give_back(self.large_size)
            self.large = None
            self.waiting_memory = 0
        if self.connection is not None:
            self.connection.close()

    def pause_writing(self) -> None:
        self.connection.pause_writing()

    def resume_writing(self) -> None:
        self.connection.resume_writing()

    # -- the ReplyLink side of BinaryConnection ----------------------------------------------

    def send_reply(self, tag: Any, parts: Sequence[Buffer]) -> None:
        self.transport.writelines(parts)

    def close_link(self) -> None:
        self.transport.close()

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        """Read again, unless something else still holds reading back: the request memory, the
        connection's queue, a login being answered."""
        if self.refused or self.transport.is_closing():
            return
        if self.waiting_memory or self.start < self.end:
            self._parse_frames()  # a frame held back (memory, login) may go on now
        connection = self.connection
        if not (self.refused or self.waiting_memory or connection.reading_paused
                or connection.drain_waiter):
            self.transport.resume_reading()

    # -- reading ---------------------------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.large is not None:
            if self.large_filled == len(self.large):  # grow with what actually arrived
                grown = bytearray(min(self.large_size, 2 * len(self.large)))
                grown[: self.large_filled] = self.large
                self.large = grown
            return memoryview(self.large)[self.large_filled :]
        if self.end == len(self.buffer):
            self._compact()
            if self.end == len(self.buffer):  # a frame's start fills it: grow (up to the max)
                self._grow(2 * len(self.buffer))
        return memoryview(self.buffer)[self.end :]

    def _compact(self) -> None:
        remaining = self.end - self.start
        self.buffer[:remaining] = self.buffer[self.start : self.end]
        self.start, self.end = 0, remaining

    def _grow(self, size: int) -> None:
        grown = bytearray(min(max(size, len(self.buffer)), SHARED_BUFFER_MAX))
        grown[: self.end - self.start] = self.buffer[self.start : self.end]
        self.buffer, self.start, self.end = grown, 0, self.end - self.start

    def buffer_updated(self, nbytes: int) -> None:
        if self.refused:
            return
        if self.large is not None:
            self.large_filled += nbytes
            if self.large_filled == self.large_size:
                large, self.large = self.large, None
                self.connection.frame_started_at = None
                self.connection.submit(self.large_code, memoryview(large), accounted=True)
            return
        self.end += nbytes
        self._parse_frames()

    def _parse_frames(self) -> None:
        buffer = self.buffer
        connection = self.connection
        while self.end - self.start >= LENGTH_PREFIX_SIZE and not self.refused:
            (length,) = LENGTH.unpack_from(buffer, self.start)
            if length < 4:  # cannot even hold the code: the stream cannot be resynchronised
                self._refuse(errors.InvalidCommand.code)
                return
            if self.end - self.start < REQUEST_HEADER_SIZE:
                break
            code = CODE.unpack_from(buffer, self.start + LENGTH_PREFIX_SIZE)[0]
            payload_size = length - 4
            if payload_size > connection.max_request_size(self.max_frame_size):
                if connection.busy and payload_size <= self.max_frame_size:
                    # maybe a login is being served: decide once it is answered
                    self.transport.pause_reading()
                    connection.wait_for_drain()
                    return
                self._refuse(errors.CommandLengthError.code)
                return
            payload_start = self.start + REQUEST_HEADER_SIZE
            available = self.end - payload_start
            if available >= payload_size:
                with memoryview(buffer) as view:  # one copy (a bytearray slice would add one)
                    payload = bytes(view[payload_start : payload_start + payload_size])
                self.start = payload_start + payload_size
                connection.frame_started_at = None
                connection.submit(code, memoryview(payload))
                continue
            if connection.frame_started_at is None:
                connection.frame_started_at = time.monotonic()
            if payload_size > SHARED_BUFFER_MAX - REQUEST_HEADER_SIZE:
                self._start_large(code, payload_size, payload_start, available)
                return
            needed = REQUEST_HEADER_SIZE + payload_size
            if len(buffer) - self.start < needed:
                if len(buffer) >= needed:
                    self._compact()
                else:
                    self._grow(1 << (needed - 1).bit_length())
            return
        if self.start == self.end:
            self.start = self.end = 0

    def _start_large(self, code: int, payload_size: int, payload_start: int, available: int) -> None:
        """Give a frame too big for the receive buffer its own, once the request memory can
        take its announced size; until then reading waits."""
        memory = self.memory
        if memory.spent:
            self.waiting_memory = payload_size
            self.transport.pause_reading()
            memory.wait(self, self.resume_reading)
            return
        self.waiting_memory = 0
        memory.take(payload_size)
        self.large_size = payload_size
        self.large = bytearray(max(min(payload_size, LARGE_FIRST_CHUNK), available))
        with memoryview(self.buffer) as view:
            self.large[:available] = view[payload_start : self.end]
        self.large_filled = available
        self.large_code = code
        self.start = self.end = 0
        if len(self.buffer) > INITIAL_BUFFER_SIZE:  # the frame has its own buffer now
            self.buffer = bytearray(INITIAL_BUFFER_SIZE)

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
