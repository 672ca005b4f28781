"""The binary protocol over TCP.

Owns: accepting connections, splitting the byte stream into frames without extra copies, and
answering each connection's requests strictly in order while connections are served
concurrently. Small frames are parsed out of one shared receive buffer; a frame larger than
that buffer gets its own bytearray that the socket fills directly (BufferedProtocol), so a
multi-megabyte SEND is read with no copy at all. A frame whose length is below 4 or above the
configured maximum is refused without being read: the client gets an error status and the
connection is closed; nobody else is affected.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import struct

from rill import errors
from rill.protocol.framing import LENGTH_PREFIX_SIZE, REQUEST_HEADER_SIZE
from rill.protocol.primitives import Transport
from rill.server.core.core import Core
from rill.server.handlers import error_reply, handle_request

log = logging.getLogger(__name__)

LENGTH = struct.Struct("<I")
CODE = struct.Struct("<I")
RECEIVE_BUFFER_SIZE = 256 * 1024
MAX_QUEUED_BYTES = 64 * 1024 * 1024  # pause reading while this much is waiting to be served


class _Refusal:
    """A queued marker: answer ``status`` after the requests before it, then close."""

    def __init__(self, status: int) -> None:
        self.status = status


class TcpConnection(asyncio.BufferedProtocol):
    def __init__(self, core: Core, max_frame_size: int) -> None:
        self.core = core
        self.max_frame_size = max_frame_size
        self.buffer = bytearray(RECEIVE_BUFFER_SIZE)
        self.start = 0  # first unparsed byte in buffer
        self.end = 0  # end of received bytes in buffer
        self.large: bytearray | None = None  # payload of a frame too big for the buffer
        self.large_filled = 0
        self.large_code = 0
        self.queue: collections.deque = collections.deque()
        self.queued_bytes = 0
        self.wakeup = asyncio.Event()
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.reading_paused = False
        self.refused = False
        self.closed = False
        self.transport: asyncio.Transport | None = None
        self.session = None
        self.worker: asyncio.Task[None] | None = None

    # -- connection lifecycle --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername") or ("unknown", 0)
        address = f"{peer[0]}:{peer[1]}"
        self.session = self.core.connect(address, Transport.TCP)
        self.worker = asyncio.get_running_loop().create_task(self._serve())

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.can_write.set()
        self.wakeup.set()
        if self.session is not None:
            self.core.disconnect(self.session)

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

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
                self._enqueue(self.large_code, memoryview(self.large))
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
                payload = bytes(buffer[payload_start : payload_start + payload_size])
                self.start = payload_start + payload_size
                self._enqueue(code, memoryview(payload))
                continue
            if payload_size > len(buffer) - REQUEST_HEADER_SIZE:
                # too big for the shared buffer: give it its own, filled in place by the socket
                self.large = bytearray(payload_size)
                self.large[:available] = buffer[payload_start : self.end]
                self.large_filled = available
                self.large_code = code
                self.start = self.end = 0
                return
            if self.start > 0 and len(buffer) - self.start < REQUEST_HEADER_SIZE + payload_size:
                self._compact()
            return
        if self.start == self.end:
            self.start = self.end = 0

    def _enqueue(self, code: int, payload: memoryview) -> None:
        self.queue.append((code, payload))
        self.queued_bytes += len(payload)
        if self.queued_bytes > MAX_QUEUED_BYTES and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()
        self.wakeup.set()

    def _refuse(self, status: int) -> None:
        """Stop reading this connection; answer what is queued, then ``status``, then close."""
        self.refused = True
        self.transport.pause_reading()
        self.queue.append(_Refusal(status))
        self.wakeup.set()

    # -- serving ---------------------------------------------------------------------------

    async def _serve(self) -> None:
        queue = self.queue
        try:
            while not self.closed:
                if not queue:
                    self.wakeup.clear()
                    await self.wakeup.wait()
                    continue
                item = queue.popleft()
                if isinstance(item, _Refusal):
                    self.transport.write(error_reply(item.status).parts[0])
                    self.transport.close()
                    return
                code, payload = item
                self.queued_bytes -= len(payload)
                if self.reading_paused and self.queued_bytes <= MAX_QUEUED_BYTES // 2:
                    self.reading_paused = False
                    self.transport.resume_reading()
                reply = await handle_request(self.core, self.session, code, payload)
                if self.closed:
                    return
                self.transport.writelines(reply.parts)
                if reply.close:
                    self.transport.close()
                    return
                if not self.can_write.is_set():
                    await self.can_write.wait()
        except Exception:
            log.exception("connection %s failed", self.session and self.session.address)
            if self.transport is not None:
                self.transport.close()


class TcpListener:
    def __init__(self, core: Core, host: str, port: int, max_frame_size: int) -> None:
        self.core = core
        self.host = host
        self.port = port
        self.max_frame_size = max_frame_size
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: TcpConnection(self.core, self.max_frame_size),
            self.host,
            self.port,
            reuse_address=True,
            backlog=1024,
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
