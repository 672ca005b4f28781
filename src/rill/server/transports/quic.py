"""The binary protocol over QUIC (aioquic), wire reference §1.5.

Owns: the UDP endpoint, one ``QuicSession`` per QUIC connection, turning request streams into
frames (one frame decoder of the listener's protocol per stream: ``WireProtocol.frame_decoder``,
Iggy's ``RequestFrameDecoder`` on the Iggy listener) for the shared
``BinaryConnection`` loop (``transports/binary.py``) and writing its answers back on the stream
each request came from. Certificates come from ``server/auth/certificates.py``.

Wire rules:

* one request per client-initiated bidirectional stream: the client writes one TCP-format
  request frame and finishes its side; the server reads to the end, answers with one TCP-format
  response frame and finishes the stream. Other stream kinds are ignored;
* a QUIC connection is one client session (transport byte 2 in GET_CLIENTS): it is registered
  when the handshake completes and disconnected when the connection terminates (close by
  either side, idle timeout, listener stop). Requests of one connection are answered in the
  order their streams ended; connections are served concurrently;
* a stream longer than ``quic.max_request_size`` bytes (or whose length prefix announces more)
  is refused unanswered: STOP_SENDING and RESET_STREAM with application error code 4029
  (``command_length_error``); the connection and its other streams go on. Before the
  connection has logged in, the limit is ``[connections] max_request_size_unauthenticated``.
  The bytes of request streams being received count against the server-wide request memory
  (``transports.limits``); a stream that arrives while it is used up is refused the same way;
* a malformed frame (shorter than the protocol's header, or a length prefix that disagrees
  with the stream's length) gets the protocol's answer of status 3 (``invalid_command``,
  ``WireProtocol.error_reply``) on its own stream at once (it never reaches the
  core, so it does not wait for the queued requests), where Iggy drops the stream silently;
  the connection and its other streams go on. Undecodable payloads get status 3 from
  ``handle_request`` as on TCP;
* ALPN: none is negotiated, exactly like Iggy 0.4 (its quinn endpoint sets no ALPN), so Iggy's
  QUIC clients connect. aioquic rejects every client that offers no ALPN as soon as the server
  lists one, so a "rill" id would lock Iggy's clients out; rill's SDK offers none either;
* ``quic.max_idle_timeout`` is the QUIC idle timeout ("none" means a year); the server sends a
  PING every ``quic.keep_alive_interval`` (0 or "none" turns that off);
  ``quic.max_concurrent_bidi_streams`` is the number of request streams a client may have open
  at once (set on aioquic's stream limit before the handshake advertises it).

Limits: aioquic grants flow-control credit as data arrives, not as it is consumed, so reading
cannot be paused (``pause_reading`` is a no-op); what one connection can queue is bounded by
``max_concurrent_bidi_streams`` x ``max_request_size``. Answers are buffered by aioquic until
acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Sequence

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer
from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.packet import QuicErrorCode

from rill import errors
from rill.protocol.framing import DEFAULT_MAX_FRAME_SIZE, BadLength, Frame, FrameDecoder, LargeFrame
from rill.quic_tuning import widen_socket_buffers, widen_windows
from rill.server.config import NEVER, QuicConfig, split_address
from rill.server.core.core import Core
from rill.server.protocols import WireProtocol
from rill.server.transports.binary import Buffer, BinaryConnection
from rill.server.auth.certificates import ensure_self_signed
from rill.server.transports.limits import UNLIMITED, ConnectionLimits, RequestMemory, Supervisor

log = logging.getLogger(__name__)

LONGEST_IDLE_TIMEOUT = 365 * 86400.0  # what "none" becomes: aioquic needs a finite timeout
OVERSIZE_ERROR_CODE = errors.CommandLengthError.code
MALFORMED_STATUS = errors.InvalidCommand.code


def _is_client_bidirectional(stream_id: int) -> bool:
    return stream_id & 0x3 == 0  # RFC 9000 §2.1: low bits 00 = client-initiated, bidirectional


class _RequestStream:
    """One request stream being received: its frame decoder, the bytes it brought (taken from
    the request memory), and its frame once whole (the stream must end right after it)."""

    __slots__ = ("decoder", "size", "frame")

    def __init__(self, protocol: WireProtocol) -> None:
        # small buffers: a stream's bytes arrive a packet at a time, and what a header merely
        # announces must not be allocated ahead of them
        self.decoder: FrameDecoder = protocol.frame_decoder(
            DEFAULT_MAX_FRAME_SIZE, initial_buffer_size=2048, max_buffer_size=16 * 1024,
            large_first_chunk=16 * 1024)
        self.size = 0
        self.frame: Frame | None = None


class QuicSession(QuicConnectionProtocol):
    """One QUIC connection: request streams in, ``BinaryConnection`` in the middle, answers out."""

    def __init__(self, quic: Any, stream_handler: Any = None, *, listener: QuicListener) -> None:
        super().__init__(quic, stream_handler)
        self.listener = listener
        self.peer: Any = None
        self.requests: dict[int, _RequestStream] = {}  # request streams still being received
        self.held = 0  # their bytes, taken from the listener's request memory
        self.refused: set[int] = set()  # oversize streams whose remaining data is ignored
        self.connection: BinaryConnection | None = None
        self.terminated = False
        self._flush_pending = False
        self._keep_alive: asyncio.TimerHandle | None = None

    # -- QUIC events -----------------------------------------------------------------------

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        if self.peer is None:
            self.peer = addr
        super().datagram_received(data, addr)

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.StreamDataReceived):
            self._stream_data(event.stream_id, event.data, event.end_stream)
        elif isinstance(event, events.StreamReset):
            self._drop_request(event.stream_id)
            self.refused.discard(event.stream_id)
        elif isinstance(event, events.HandshakeCompleted):
            self._open()
            self._schedule_keep_alive()
        elif isinstance(event, events.ConnectionTerminated):
            self.shutdown()

    def _open(self) -> BinaryConnection | None:
        """The session's connection, made at the first need; None (and the QUIC connection
        closed) when ``max_connections`` are open already."""
        if self.connection is None and not self.terminated:
            host, port = (self.peer or ("unknown", 0))[:2]
            address = f"{host}:{port}"
            listener = self.listener
            if listener.supervisor is not None and not listener.supervisor.admits(address):
                self._quic.close(error_code=QuicErrorCode.CONNECTION_REFUSED,
                                 reason_phrase="too many connections")
                self.transmit()
                self.shutdown()
                return None
            self.connection = BinaryConnection(
                listener.core, self, address, "quic", listener.protocol,
                limits=listener.limits,
                memory=listener.memory, supervisor=listener.supervisor,
            )
        return self.connection

    def shutdown(self) -> None:
        """The connection is over (or the listener stops): end the session. Idempotent."""
        self.terminated = True
        if self._keep_alive is not None:
            self._keep_alive.cancel()
            self._keep_alive = None
        self.requests.clear()
        self.listener.memory.give_back(self.held)
        self.held = 0
        self.refused.clear()
        if self.connection is not None:
            self.connection.close()
        self.listener.sessions.discard(self)

    # -- request streams -------------------------------------------------------------------

    def _stream_data(self, stream_id: int, data: bytes, end_stream: bool) -> None:
        if not _is_client_bidirectional(stream_id) or self.terminated:
            return
        if stream_id in self.refused:
            if end_stream:
                self.refused.discard(stream_id)
            return
        memory = self.listener.memory
        request = self.requests.get(stream_id)
        if request is None:
            if memory.spent:  # every connection together holds too much already
                self._refuse_stream(stream_id)
                return
            request = self.requests[stream_id] = _RequestStream(self.listener.protocol)
        request.size += len(data)
        self.held += len(data)
        memory.take(len(data))
        connection = self._open()
        if connection is None:
            self._drop_request(stream_id)
            return
        limit = connection.max_request_size(self.listener.max_request_size)
        if request.size > limit:
            self._refuse_stream(stream_id)  # too long already
            return
        decoder = request.decoder
        decoder.max_payload_size = limit - decoder.HEADER_SIZE
        decoder.feed(data)
        if request.frame is None:
            event = decoder.next_frame()
            if type(event) is Frame:
                request.frame = event
            elif type(event) is LargeFrame:  # its bytes are accounted as they arrive
                decoder.start_large_frame()
            elif type(event) is BadLength and event.too_large:
                self._refuse_stream(stream_id)  # announced as too long
                return
        if end_stream:
            del self.requests[stream_id]
            self.held -= request.size  # from here on the BinaryConnection accounts it
            self._request(stream_id, request)

    def _drop_request(self, stream_id: int) -> None:
        request = self.requests.pop(stream_id, None)
        if request is not None:
            self.held -= request.size
            self.listener.memory.give_back(request.size)

    def _request(self, stream_id: int, request: _RequestStream) -> None:
        frame = request.frame
        if frame is None or request.decoder.buffered:  # short, a bad length, or bytes after it
            self.listener.memory.give_back(request.size)
            self.send_reply(stream_id, self.listener.malformed_reply)
            return
        payload_size = len(frame.payload)
        # the header's bytes go back now; the payload's once its request is served
        self.listener.memory.give_back(request.size - payload_size)
        connection = self._open()
        if connection is None:
            self.listener.memory.give_back(payload_size)
            return
        connection.submit(frame.code, frame.payload, stream_id, accounted=True)

    def _refuse_stream(self, stream_id: int) -> None:
        self._drop_request(stream_id)
        self.refused.add(stream_id)
        log.debug("stream %d of %s exceeds %d bytes: refused", stream_id, self.peer,
                  self.listener.max_request_size)
        try:
            self._quic.stop_stream(stream_id, OVERSIZE_ERROR_CODE)
            self._quic.reset_stream(stream_id, OVERSIZE_ERROR_CODE)
        except (ValueError, RuntimeError):  # the stream is already gone
            pass
        self._flush_soon()

    # -- the ReplyLink side of BinaryConnection ----------------------------------------------

    def send_reply(self, tag: Any, parts: Sequence[Buffer]) -> None:
        if self.terminated:
            return
        last = len(parts) - 1
        try:
            for index, part in enumerate(parts):
                self._quic.send_stream_data(tag, part, end_stream=index == last)
        except (ValueError, RuntimeError, AssertionError) as error:
            log.debug("stream %d of %s: answer dropped (%s)", tag, self.peer, error)
        self._flush_soon()

    def close_link(self) -> None:
        if not self.terminated:
            self.close()

    def pause_reading(self) -> None:
        """aioquic cannot withhold flow-control credit: nothing to do (see the module doc)."""

    def resume_reading(self) -> None:
        pass

    # -- sending ---------------------------------------------------------------------------

    def _flush_soon(self) -> None:
        """Coalesce the datagrams of answers written in one event-loop iteration."""
        if not self._flush_pending:
            self._flush_pending = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        if self._transport is not None and not self._transport.is_closing():
            self.transmit()

    def _schedule_keep_alive(self) -> None:
        interval = self.listener.keep_alive_interval
        if interval and not self.terminated:
            self._keep_alive = self._loop.call_later(interval, self._send_keep_alive)

    def _send_keep_alive(self) -> None:
        self._keep_alive = None
        if self.terminated:
            return
        self._quic.send_ping(0)
        self._flush_soon()
        self._schedule_keep_alive()


class QuicListener:
    """The QUIC endpoint on ``quic.address``; ``start`` returns the bound (host, UDP port)."""

    def __init__(
        self, core: Core, protocol: WireProtocol, config: QuicConfig, certificate: Path, key: Path,
        limits: ConnectionLimits = UNLIMITED, memory: RequestMemory | None = None,
        supervisor: Supervisor | None = None,
    ) -> None:
        self.core = core
        self.protocol = protocol  # what the requests framed on its streams mean
        self.malformed_reply = protocol.error_reply(MALFORMED_STATUS).parts
        self.config = config
        self.limits = limits
        self.memory = memory if memory is not None else RequestMemory()
        self.supervisor = supervisor
        self.certificate = Path(certificate)
        self.key = Path(key)
        self.max_request_size = config.max_request_size
        interval = config.keep_alive_interval
        self.keep_alive_interval = interval if 0 < interval < NEVER else 0.0
        self.sessions: set[QuicSession] = set()
        self.server: QuicServer | None = None

    @classmethod
    def from_config(
        cls, core: Core, protocol: WireProtocol, config: QuicConfig,
        limits: ConnectionLimits = UNLIMITED, memory: RequestMemory | None = None,
        supervisor: Supervisor | None = None,
    ) -> QuicListener:
        """The listener with its certificate: the generated self-signed one (made at the first
        start in the data directory's secrets, reused afterwards) or the configured PEM files."""
        if config.certificate.self_signed:
            paths = core.paths
            certificate, key = ensure_self_signed(paths.self_signed_certificate, paths.self_signed_key)
        else:
            certificate, key = Path(config.certificate.certificate), Path(config.certificate.key)
        return cls(core, protocol, config, certificate, key, limits, memory, supervisor)

    def _configuration(self) -> QuicConfiguration:
        idle = self.config.max_idle_timeout
        configuration = QuicConfiguration(
            is_client=False,
            alpn_protocols=None,
            idle_timeout=idle if 0 < idle < NEVER else LONGEST_IDLE_TIMEOUT,
        )
        configuration.load_cert_chain(self.certificate, self.key)
        return widen_windows(configuration, split_address(self.config.address, "quic.address")[0])

    def _create_session(self, quic: Any, stream_handler: Any = None) -> QuicSession:
        # aioquic has no setting for the peer's stream limit; it lives on this Limit object, is
        # advertised as initial_max_streams_bidi when the handshake starts and raised by one
        # for every stream that closes ("sent" must match, or no MAX_STREAMS ever goes out)
        limit = getattr(quic, "_local_max_streams_bidi", None)
        if limit is not None and hasattr(limit, "value") and hasattr(limit, "sent"):
            limit.value = limit.sent = self.config.max_concurrent_bidi_streams
        session = QuicSession(quic, stream_handler, listener=self)
        self.sessions.add(session)
        return session

    async def start(self) -> tuple[str, int]:
        quic_log = logging.getLogger("quic")  # aioquic logs every connection at INFO
        if quic_log.level == logging.NOTSET and not log.isEnabledFor(logging.DEBUG):
            quic_log.setLevel(logging.WARNING)
        host, port = split_address(self.config.address, "quic.address")
        configuration = self._configuration()
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.create_datagram_endpoint(
            lambda: QuicServer(configuration=configuration, create_protocol=self._create_session),
            local_addr=(host, port),
        )
        widen_socket_buffers(transport)
        self.server = protocol
        bound = transport.get_extra_info("sockname")
        return bound[0], bound[1]

    async def stop(self) -> None:
        """Close every connection (CONNECTION_CLOSE), end their sessions, close the socket."""
        server, self.server = self.server, None
        if server is None:
            return
        sessions = list(self.sessions)
        server.close()
        for session in sessions:
            session.shutdown()
