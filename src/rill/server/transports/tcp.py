"""The binary protocol over TCP (optionally TLS).

Owns: accepting connections (wrapped in TLS when the listener has an ``ssl.SSLContext``) and
splitting each byte stream into frames without extra copies. Small frames are parsed out of one
shared receive buffer; a frame larger than that buffer gets its own bytearray that the socket
fills directly (BufferedProtocol), so a multi-megabyte SEND is read with no copy at all. A frame
whose length is below 4 or above the configured maximum is refused without being read: the
client gets an error status and the connection is closed; nobody else is affected.

The session, the in-order serving of requests and both directions of back-pressure belong to
the transport-neutral ``BinaryConnection`` (``transports/binary.py``) that QUIC shares; this
module only feeds it frames and writes what it answers.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
from typing import Any, Sequence

from rill import errors
from rill.protocol.framing import LENGTH_PREFIX_SIZE, REQUEST_HEADER_SIZE
from rill.protocol.primitives import Transport
from rill.server.core.core import Core
from rill.server.transports.binary import Buffer, BinaryConnection

LENGTH = struct.Struct("<I")
CODE = struct.Struct("<I")
RECEIVE_BUFFER_SIZE = 256 * 1024


class TcpConnection(asyncio.BufferedProtocol):
    """One TCP link: framing in, ``BinaryConnection`` in the middle, frames out."""

    def __init__(self, core: Core, max_frame_size: int) -> None:
        self.core = core
        self.max_frame_size = max_frame_size
        self.buffer = bytearray(RECEIVE_BUFFER_SIZE)
        self.start = 0  # first unparsed byte in buffer
        self.end = 0  # end of received bytes in buffer
        self.large: bytearray | None = None  # payload of a frame too big for the buffer
        self.large_filled = 0
        self.large_code = 0
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
        self.connection = BinaryConnection(self.core, self, address, Transport.TCP)

    def connection_lost(self, exc: Exception | None) -> None:
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
        if not self.refused:
            self.transport.resume_reading()

    # -- reading ---------------------------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.large is not None:
            return memoryview(self.large)[self.large_filled :]
        if self.end == len(self.buffer):
            self._compact()
        return memoryview(self.buffer)[self.end :]

    def _compact(self) -> None:
        remaining = self.end - self.start
        self.buffer[:remaining] = self.buffer[self.start : self.end]
        self.start, self.end = 0, remaining

    def buffer_updated(self, nbytes: int) -> None:
        if self.refused:
            return
        if self.large is not None:
            self.large_filled += nbytes
            if self.large_filled == len(self.large):
                self.connection.submit(self.large_code, memoryview(self.large))
                self.large = None
            return
        self.end += nbytes
        self._parse_frames()

    def _parse_frames(self) -> None:
        buffer = self.buffer
        while self.end - self.start >= LENGTH_PREFIX_SIZE and not self.refused:
            (length,) = LENGTH.unpack_from(buffer, self.start)
            if length < 4:  # cannot even hold the code: the stream cannot be resynchronised
                self._refuse(errors.InvalidCommand.code)
                return
            if self.end - self.start < REQUEST_HEADER_SIZE:
                break
            code = CODE.unpack_from(buffer, self.start + LENGTH_PREFIX_SIZE)[0]
            payload_size = length - 4
            if payload_size > self.max_frame_size:
                self._refuse(errors.CommandLengthError.code)
                return
            payload_start = self.start + REQUEST_HEADER_SIZE
            available = self.end - payload_start
            if available >= payload_size:
                with memoryview(buffer) as view:  # one copy (a bytearray slice would add one)
                    payload = bytes(view[payload_start : payload_start + payload_size])
                self.start = payload_start + payload_size
                self.connection.submit(code, memoryview(payload))
                continue
            if payload_size > len(buffer) - REQUEST_HEADER_SIZE:
                # too big for the shared buffer: give it its own, filled in place by the socket
                self.large = bytearray(payload_size)
                with memoryview(buffer) as view:
                    self.large[:available] = view[payload_start : self.end]
                self.large_filled = available
                self.large_code = code
                self.start = self.end = 0
                return
            if self.start > 0 and len(buffer) - self.start < REQUEST_HEADER_SIZE + payload_size:
                self._compact()
            return
        if self.start == self.end:
            self.start = self.end = 0

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
        host: str,
        port: int,
        max_frame_size: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.core = core
        self.host = host
        self.port = port
        self.max_frame_size = max_frame_size
        self.ssl_context = ssl_context
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: TcpConnection(self.core, self.max_frame_size),
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
