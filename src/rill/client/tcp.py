"""The TCP (optionally TLS) transport of the SDK: pipelined requests over one asyncio link.

Owns: ``TcpTransport`` and its ``asyncio.BufferedProtocol``. Requests are pipelined: each
``request`` writes its frame at once and waits on a future; the server answers strictly in
order (wire §1.3), so responses are matched to callers first-in, first-out.

Reading: frames are split by a ``ResponseFrameDecoder`` (``rill.protocol.iggy.framing``). Small
responses land in its one 64 KiB scratch buffer and are copied out from there, so many
pipelined replies cost one ``recv`` together. As soon as a header announces a payload too big
for the scratch buffer, one ``bytearray`` of exactly that size is allocated and the socket
reads straight into it (``get_buffer``/``buffer_updated``); a poll response of tens of MB is
therefore read without ``StreamReader`` and without copies beyond the part that arrived
together with its header. A length above ``max_response_size`` drops the link.

Writing: the 8-byte header and the payload parts are handed to the transport separately
(``writelines`` where the event loop implements it natively, e.g. TLS or Python >= 3.12);
small pieces are coalesced into one write so a small request is one TCP segment even with
TCP_NODELAY on. Back-pressure from ``pause_writing``/``resume_writing`` makes requesters wait.

Invariants: one future per written frame, queued before the frame is written; a cancelled
caller leaves its future queued so the answer it will still get is consumed and dropped; when
the link drops every queued future fails with ``errors.Disconnected``.
"""

from __future__ import annotations

import asyncio
import socket
import ssl as ssl_module
from collections import deque
from typing import Any

from rill import errors
from rill.client.flow import WriteFlow
from rill.client.transport import (
    Buffer,
    Payload,
    Transport,
    tls_context,
    parse_address,
    payload_parts,
    register_transport,
)
from rill.protocol.framing import NEED_DATA, Frame, LargeFrame
from rill.protocol.iggy.framing import HEADER_SIZE, ResponseFrameDecoder, request_header

SCRATCH_SIZE = 64 * 1024
COALESCE_LIMIT = 64 * 1024  # parts smaller than this are joined into one write
DEFAULT_MAX_RESPONSE_SIZE = 2**31  # a sanity bound against a garbage length
_NATIVE_WRITELINES_MISSING = asyncio.WriteTransport.writelines


class _LinkProtocol(WriteFlow, asyncio.BufferedProtocol):
    """Frame splitter and FIFO matcher for one connection."""

    def __init__(self, max_response_size: int) -> None:
        super().__init__()
        self.transport: asyncio.Transport | None = None
        self.pending: deque[asyncio.Future[Any]] = deque()
        self.lost = False
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._max_response_size = max_response_size
        # one scratch buffer; a payload that does not fit whole gets one of exactly its size
        self._decoder = ResponseFrameDecoder(
            max_response_size, initial_buffer_size=SCRATCH_SIZE, max_buffer_size=SCRATCH_SIZE,
            large_first_chunk=max_response_size)
        self._native_writelines = False

    # --- connection events -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  (uvloop's is not a subclass)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._native_writelines = type(transport).writelines is not _NATIVE_WRITELINES_MISSING

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        reason = f"Disconnected: {exc}" if exc else None
        while self.pending:
            future = self.pending.popleft()
            if not future.done():
                future.set_exception(errors.Disconnected(reason=reason))
        self.wake_writers()
        self._decoder = ResponseFrameDecoder(0)  # let go of a big payload being read
        if not self.closed.done():
            self.closed.set_result(None)

    def eof_received(self) -> bool:
        return False  # the server closed its side: close ours too

    def gone(self) -> bool:
        return self.lost

    # --- writing -------------------------------------------------------------------------------

    def write_frame(self, header: bytes, parts: tuple[Buffer, ...]) -> None:
        transport = self.transport
        assert transport is not None
        chunks: list[Buffer] = []
        small: list[Buffer] = [header]
        small_size = HEADER_SIZE
        for part in parts:
            size = memoryview(part).nbytes
            if size == 0:
                continue
            if size < COALESCE_LIMIT and small_size + size <= COALESCE_LIMIT:
                small.append(part)
                small_size += size
                continue
            if small:
                chunks.append(small[0] if len(small) == 1 else b"".join(small))
                small, small_size = [], 0
            if size < COALESCE_LIMIT:
                small, small_size = [part], size
            else:
                chunks.append(part)
        if small:
            chunks.append(small[0] if len(small) == 1 else b"".join(small))
        if len(chunks) == 1:
            transport.write(chunks[0])
        elif self._native_writelines:
            transport.writelines(chunks)
        else:  # Python 3.11 selector transports join writelines(): write pieces one by one
            for chunk in chunks:
                transport.write(chunk)

    # --- reading -------------------------------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        decoder = self._decoder
        if not decoder.buffer_updated(nbytes):
            return  # more of a big payload: nothing to split yet
        while True:
            event = decoder.next_frame()
            if type(event) is Frame:
                self._deliver(event.code, event.payload)
                if self.lost:
                    return
            elif type(event) is LargeFrame:  # read the rest straight into its own buffer
                decoder.start_large_frame()
            elif event is NEED_DATA:
                return
            else:
                self._abort(f"response of {event.payload_size} bytes exceeds "
                            f"{self._max_response_size}")
                return

    def _deliver(self, status: int, payload: memoryview) -> None:
        if not self.pending:
            self._abort(f"unsolicited response with status {status}")
            return
        future = self.pending.popleft()
        if future.done():  # the caller gave up (cancelled / timed out): drop the answer
            return
        if status == 0:
            future.set_result(payload)
        else:
            future.set_exception(errors.from_status(status))

    def _abort(self, reason: str) -> None:
        self.lost = True
        while self.pending:
            future = self.pending.popleft()
            if not future.done():
                future.set_exception(errors.Disconnected(reason=f"Disconnected: {reason}"))
        if self.transport is not None:
            self.transport.abort()


class TcpTransport(Transport):
    """A pipelined binary-protocol link over TCP, or TLS when ``ssl`` is given."""

    name = "tcp"

    def __init__(
        self,
        address: str = "127.0.0.1:8090",
        *,
        ssl: ssl_module.SSLContext | bool | None = None,
        ca_file: str | None = None,
        verify: bool = True,
        server_hostname: str | None = None,
        connect_timeout: float | None = 10.0,
        close_timeout: float = 5.0,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
    ) -> None:
        self.address = address
        self.host, self.port = parse_address(address)
        self._ssl = tls_context(ssl, ca_file, verify)
        self._server_hostname = server_hostname
        self.connect_timeout = connect_timeout
        self.close_timeout = close_timeout
        self.max_response_size = max_response_size
        self._protocol: _LinkProtocol | None = None

    @property
    def is_connected(self) -> bool:
        protocol = self._protocol
        return (
            protocol is not None
            and not protocol.lost
            and protocol.transport is not None
            and not protocol.transport.is_closing()
        )

    @property
    def in_flight(self) -> int:
        """Requests written and not yet answered."""
        return len(self._protocol.pending) if self._protocol is not None else 0

    async def connect(self) -> None:
        if self.is_connected:
            return
        loop = asyncio.get_running_loop()
        max_size = self.max_response_size
        kwargs: dict[str, Any] = {}
        if self._ssl is not None:
            kwargs["ssl"] = self._ssl
            kwargs["server_hostname"] = self._server_hostname or self.host
        _, protocol = await asyncio.wait_for(
            loop.create_connection(lambda: _LinkProtocol(max_size), self.host, self.port, **kwargs),
            self.connect_timeout,
        )
        self._protocol = protocol

    async def request(self, code: int, payload: Payload = b"") -> bytes | memoryview:
        protocol = self._protocol
        if protocol is None or protocol.transport is None:
            raise errors.NotConnected()  # never connected, or closed by us
        if protocol.lost or protocol.transport.is_closing():
            raise errors.Disconnected()  # the link dropped; connect() again
        parts = payload_parts(payload)
        length = sum(memoryview(part).nbytes for part in parts)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        protocol.pending.append(future)
        protocol.write_frame(request_header(code, length), parts)
        if protocol.paused:
            await protocol.drain()
        return await future

    async def close(self) -> None:
        protocol, self._protocol = self._protocol, None
        if protocol is None or protocol.transport is None:
            return
        protocol.transport.close()
        try:
            await asyncio.wait_for(asyncio.shield(protocol.closed), self.close_timeout)
        except asyncio.TimeoutError:
            protocol.transport.abort()

    def __repr__(self) -> str:
        state = "connected" if self.is_connected else "disconnected"
        scheme = "tls" if self._ssl else "tcp"
        return f"<TcpTransport {scheme}://{self.host}:{self.port} {state}>"


register_transport("tcp", TcpTransport)
