"""The QUIC transport of the SDK (aioquic): one bidirectional stream per request.

Owns: ``QuicTransport`` (registered as ``"quic"``, so ``AsyncClient(address, transport="quic")``
uses it) and its aioquic connection protocol. Each ``request`` opens a new client-initiated
bidirectional stream, writes the same request frame as TCP, finishes its side and waits for
the response frame the server writes on that stream before finishing it (wire §1.5), split by
a ``ResponseFrameDecoder`` (``rill.protocol.iggy.framing``). Streams are independent, so any number
of requests may be in flight on one connection at once; answers are matched by stream id, not
by order.

Certificates are verified by default (unlike Iggy's clients, whose ``validate_certificate``
is false): against the system's CAs, or ``ca_file=PATH`` (e.g. a rill server's self-signed
certificate, ``<data dir>/secrets/self_signed_cert.pem``). ``verify=False`` (the client's
``verify_certificate=False``, which its errors name) is the explicit opt-out for a self-signed
local server one cannot get the certificate of. A certificate that is not trusted fails the
connection at once with ``InvalidTlsCertificate`` (66), never retried. ``server_name`` is the
name checked and sent in SNI (default: the host of ``address``). No ALPN is offered: rill and
Iggy 0.4 servers negotiate none. ``ssl=`` (the TCP-style argument) may be an
``ssl.SSLContext`` with ``verify_mode`` CERT_NONE, which also opts out.

Failures: a connection that cannot be made raises ``ConnectionError`` (an ``OSError``) or
``TimeoutError``, so AsyncClient retries it like TCP; when the connection terminates every
request in flight fails with ``errors.Disconnected``; a stream the server resets fails with the
error of the reset's code (4029 ``CommandLengthError`` for an oversize request).

Invariant: a transport never retries or re-logs-in; AsyncClient owns that policy.
"""

from __future__ import annotations

import asyncio
import socket
import ssl as ssl_module
from typing import Any

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection

from rill import errors
from rill.protocol.framing import BadLength, Frame, LargeFrame
from rill.protocol.iggy.framing import HEADER_SIZE, ResponseFrameDecoder, request_header
from rill.quic_tuning import widen_socket_buffers, widen_windows
from rill.client.transport import Payload, Transport, parse_address, payload_parts, register_transport

DEFAULT_QUIC_PORT = 8080
DEFAULT_MAX_RESPONSE_SIZE = 2**31
_CANCELLED = 0  # application error code of streams whose caller gave up


class _Response:
    """One response stream: its caller, its frame decoder, the bytes it brought, and its frame
    once whole (the stream must end right after it)."""

    __slots__ = ("future", "decoder", "size", "frame")

    def __init__(self, future: asyncio.Future[Any], max_response_size: int) -> None:
        self.future = future
        # a small shared buffer (bytes arrive a packet at a time); a larger payload is read into
        # one buffer of exactly its size, handed to the caller without a copy
        self.decoder = ResponseFrameDecoder(max_response_size, initial_buffer_size=2048,
                                            max_buffer_size=16 * 1024,
                                            large_first_chunk=max_response_size)
        self.size = 0
        self.frame: Frame | None = None


def _is_tls_alert(error_code: int) -> bool:
    """CRYPTO_ERROR (RFC 9001 §4.8): 0x100 + a TLS alert, e.g. bad_certificate."""
    return 0x100 <= error_code <= 0x1FF


class _ClientProtocol(QuicConnectionProtocol):
    """Matches stream data to the request futures; fails them all when the connection ends."""

    def __init__(self, quic: QuicConnection, max_response_size: int) -> None:
        super().__init__(quic)
        self.max_response_size = max_response_size
        self.responses: dict[int, _Response] = {}
        self.handshake: asyncio.Future[None] = self._loop.create_future()
        self.lost = False
        self._keep_alive: asyncio.TimerHandle | None = None
        self._flush_pending = False

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.StreamDataReceived):
            self._data(event.stream_id, event.data, event.end_stream)
        elif isinstance(event, events.StreamReset):
            response = self.responses.pop(event.stream_id, None)
            if response is not None and not response.future.done():
                code = event.error_code
                failure = errors.from_status(code) if code else errors.Disconnected(reason="Disconnected: stream reset")
                response.future.set_exception(failure)
        elif isinstance(event, events.HandshakeCompleted):
            if not self.handshake.done():
                self.handshake.set_result(None)
        elif isinstance(event, events.ConnectionTerminated):
            reason = event.reason_phrase or f"QUIC error {event.error_code}"
            if not self.handshake.done() and _is_tls_alert(event.error_code):
                self.lose(errors.InvalidTlsCertificate(reason=(
                    f"Invalid TLS certificate: the server's certificate is not trusted ({reason}); "
                    "give its certificate or CA as ca_file, or opt out with "
                    "verify_certificate=False")))
                return
            self.lose(ConnectionError(f"QUIC connection closed: {reason}"))

    def error_received(self, exc: Exception) -> None:
        if not self.handshake.done():  # e.g. ICMP port unreachable: nobody listens there
            self.lose(exc)

    def _data(self, stream_id: int, data: bytes, end_stream: bool) -> None:
        response = self.responses.get(stream_id)
        if response is None:
            return  # the caller gave up on this stream
        response.size += len(data)
        if response.size > self.max_response_size + HEADER_SIZE:
            self._too_large(stream_id, response)
            return
        decoder = response.decoder
        decoder.feed(data)
        if response.frame is None:
            event = decoder.next_frame()
            if type(event) is Frame:
                response.frame = event
            elif type(event) is LargeFrame:
                decoder.start_large_frame()
            elif type(event) is BadLength:  # announced above max_response_size
                self._too_large(stream_id, response)
                return
        if not end_stream:
            return
        del self.responses[stream_id]
        if response.future.done():
            return
        frame = response.frame
        if frame is None:  # no frame, or a short one
            response.future.set_exception(
                errors.EmptyResponse() if not response.size else errors.InvalidBytesResponse())
        elif frame.code:
            response.future.set_exception(errors.from_status(frame.code))
        elif decoder.buffered:  # bytes after the frame
            response.future.set_exception(errors.InvalidBytesResponse())
        else:
            response.future.set_result(frame.payload)

    def _too_large(self, stream_id: int, response: _Response) -> None:
        self.abandon(stream_id)
        if not response.future.done():
            response.future.set_exception(errors.Disconnected(
                reason=f"Disconnected: response exceeds {self.max_response_size} bytes"))

    def lose(self, failure: Exception) -> None:
        """The connection is over: fail the handshake waiter and every request in flight."""
        if not self.handshake.done():
            self.handshake.set_exception(failure)
            self.handshake.exception()  # retrieved: nobody may be waiting any more
        if self.lost:
            return
        self.lost = True
        if self._keep_alive is not None:
            self._keep_alive.cancel()
        responses, self.responses = self.responses, {}
        for response in responses.values():
            if not response.future.done():
                response.future.set_exception(errors.Disconnected(reason=f"Disconnected: {failure}"))

    def send_request(self, frame_parts: list[Any], future: asyncio.Future[Any]) -> int:
        quic = self._quic
        stream_id = quic.get_next_available_stream_id()
        self.responses[stream_id] = _Response(future, self.max_response_size)
        last = len(frame_parts) - 1
        for index, part in enumerate(frame_parts):
            quic.send_stream_data(stream_id, part, end_stream=index == last)
        self.flush_soon()
        return stream_id

    def abandon(self, stream_id: int) -> None:
        """The caller gave up: forget the stream and tell the server to stop sending."""
        self.responses.pop(stream_id, None)
        if self.lost:
            return
        try:
            self._quic.stop_stream(stream_id, _CANCELLED)
        except (ValueError, RuntimeError):
            pass
        self.flush_soon()

    def flush_soon(self) -> None:
        """Coalesce the datagrams of the requests written in one event-loop iteration."""
        if not self._flush_pending:
            self._flush_pending = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        if not self.lost and self._transport is not None and not self._transport.is_closing():
            self.transmit()

    def close_socket(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def keep_alive(self, interval: float) -> None:
        """PING every ``interval`` seconds so an idle connection outlives the idle timeout."""
        def ping() -> None:
            if self.lost:
                return
            self._quic.send_ping(0)
            self.flush_soon()
            self._keep_alive = self._loop.call_later(interval, ping)

        self._keep_alive = self._loop.call_later(interval, ping)


class QuicTransport(Transport):
    """A binary-protocol link over QUIC; requests run concurrently, one stream each."""

    name = "quic"

    def __init__(
        self,
        address: str = "127.0.0.1:8080",
        *,
        ssl: ssl_module.SSLContext | bool | None = None,
        verify: bool | None = None,
        ca_file: str | None = None,
        server_name: str | None = None,
        connect_timeout: float | None = 10.0,
        idle_timeout: float = 10.0,
        keep_alive_interval: float | None = 5.0,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
    ) -> None:
        self.address = address
        self.host, self.port = parse_address(address, DEFAULT_QUIC_PORT)
        if verify is None:  # a TCP-style ssl= context may opt out; otherwise verify
            verify = not (isinstance(ssl, ssl_module.SSLContext)
                          and ssl.verify_mode == ssl_module.CERT_NONE)
        self.verify = bool(verify)
        self.ca_file = ca_file
        self.server_name = server_name or self.host
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.keep_alive_interval = keep_alive_interval
        self.max_response_size = max_response_size
        self._protocol: _ClientProtocol | None = None

    @property
    def is_connected(self) -> bool:
        protocol = self._protocol
        return protocol is not None and protocol.handshake.done() and not protocol.lost

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._protocol.responses) if self._protocol is not None else 0

    def _configuration(self) -> QuicConfiguration:
        configuration = QuicConfiguration(
            is_client=True, alpn_protocols=None, server_name=self.server_name,
            idle_timeout=self.idle_timeout,
        )
        if self.verify:
            configuration.verify_mode = ssl_module.CERT_REQUIRED
            if self.ca_file is not None:
                configuration.load_verify_locations(cafile=self.ca_file)
        else:
            configuration.verify_mode = ssl_module.CERT_NONE
        return widen_windows(configuration, self.host)

    async def connect(self) -> None:
        if self.is_connected:
            return
        await self.close()
        loop = asyncio.get_running_loop()
        family, _, _, _, remote = (await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_DGRAM))[0]
        connection = QuicConnection(configuration=self._configuration())
        max_size = self.max_response_size
        # a connected UDP socket: an ICMP "port unreachable" then fails the handshake at once
        transport, protocol = await loop.create_datagram_endpoint(
            lambda: _ClientProtocol(connection, max_size), remote_addr=remote, family=family,
        )
        widen_socket_buffers(transport)
        try:
            protocol.connect(remote)
            await asyncio.wait_for(asyncio.shield(protocol.handshake), self.connect_timeout)
        except BaseException:
            protocol.lose(ConnectionError("QUIC connection attempt abandoned"))
            transport.close()
            raise
        if self.keep_alive_interval:
            protocol.keep_alive(self.keep_alive_interval)
        self._protocol = protocol

    async def request(self, code: int, payload: Payload = b"") -> bytes | memoryview:
        protocol = self._protocol
        if protocol is None:
            raise errors.NotConnected()  # never connected, or closed by us
        if protocol.lost:
            raise errors.Disconnected()  # the connection dropped; connect() again
        parts = payload_parts(payload)
        length = sum(memoryview(part).nbytes for part in parts)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        stream_id = protocol.send_request([request_header(code, length), *parts], future)
        try:
            return await future
        except asyncio.CancelledError:
            protocol.abandon(stream_id)
            raise

    async def close(self) -> None:
        protocol, self._protocol = self._protocol, None
        if protocol is None:
            return
        if not protocol.lost:
            protocol.close()  # CONNECTION_CLOSE goes out now: the server ends the session
        protocol.lose(ConnectionError("closed by the client"))
        protocol.close_socket()

    def __repr__(self) -> str:
        state = "connected" if self.is_connected else "disconnected"
        return f"<QuicTransport quic://{self.host}:{self.port} {state}>"


register_transport("quic", QuicTransport)
