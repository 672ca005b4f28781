"""The TANK request handler: frame -> ``decode_request`` -> ``dispatch`` / ``data`` ->
``encode_response``.

Owns: ``TankProtocol``, the ``WireProtocol`` of the TANK listener, and TANK's connection-level
rules (tank-wire-reference §2, §3, §8.7):

* framing: ``TankFrameDecoder`` (``msg_id:u8 payload_len:u32``); a payload above the limit
  (``[tank] max_frame_size``, 64 MiB by default, at most TANK's 256 MiB) is logged with its
  size and the setting, and closes the connection unanswered (TANK has no answer for it);
* the ping on accept: ``03 00 00 00 00`` is the first thing written on every connection
  (``greeting``); no periodic heartbeat, as TANK v4.0. A client's ping gets no answer;
* login: TANK has no authentication; every connection acts as the user the listener was given
  (``[tank] user``, the root user by default on loopback: ``app``). A connection whose user
  is gone or inactive is closed at its first request;
* malformed input of any kind (unknown msg_id, 0x04, a payload shorter than its fields, a
  length or varint past the payload, a varint longer than 5 bytes, bytes left over) closes the
  connection without an answer, as TANK does; so do the cluster-only RegReplica (0x04), as a
  standalone TANK broker does, and ConsumePeer (0x09), which a standalone TANK broker answers
  but rill, with no replicas, does not (``CLOSES_CONNECTION``). An invalid
  bundle inside a well-formed Produce is answered 0x02 for its partition (``data``);
* ProduceWithSeqnum (0x05) is answered with msg_id 0x01 (the codec's rule);
* requests of one connection are answered in arrival order, except a long-polling consume:
  its answer comes when the wait ends (``Reply.later``), and the requests sent behind it are
  answered meanwhile, as TANK does; a disconnect cancels the wait;
* idle connections (nothing to read, nothing to send, no long poll waiting) are closed after
  ``[tank] idle_timeout``, TANK's 16 s by default (the listener's ``ConnectionLimits``, swept
  with every other connection: ``app``); TANK's other rule, the oldest idle connection closed
  whenever more than 64 are idle, is left to ``[connections] max_connections``;
* an unexpected failure answers nothing and closes the connection (logged);
* metrics: a request is counted under its msg_id's name (``request_kind``: ``produce``,
  ``consume``, ...); its outcome is "ok" when it is answered (a long-polling consume when its
  wait begins), "refused" when the connection closes on it, "error" when it failed
  unexpectedly.
"""

from __future__ import annotations

import inspect
import logging
import time

from rill import errors
from rill.protocol.tank import messages as m
from rill.protocol.tank.errors import TankDecodeError
from rill.protocol.framing import BadLength
from rill.protocol.tank.framing import MAX_PAYLOAD_SIZE, PING_FRAME, TankFrameDecoder
from rill.server.core.core import Core
from rill.server.core.types import Session
from rill.server.protocols import UNKNOWN_REQUEST, Reply
from rill.server.protocols.tank import data, dispatch
from rill.server.protocols.tank.dispatch import TankSettings

log = logging.getLogger(__name__)

_CLOSE = Reply([], close=True, outcome="refused")
_FAILED = Reply([], close=True, outcome="error")
_NOTHING = Reply([])
REQUEST_KINDS: dict[int, str] = {msg_id.value: msg_id.name.lower() for msg_id in m.MsgId}


def listener_protocol(server) -> TankProtocol:
    """The protocol of the ``[tank]`` listener of ``server``; its connections act as the user
    the server's start rules resolved (``server.tank_user_id()``)."""
    return TankProtocol(TankSettings(server.config.tank_stream, time.time()),
                        server.tank_user_id())


class _ListenerDecoder(TankFrameDecoder):
    """The listener's decoder: a frame above the limit is logged before the link closes."""

    __slots__ = ()

    def next_frame(self):
        event = TankFrameDecoder.next_frame(self)
        if type(event) is BadLength and event.too_large:
            log.warning("TANK request of %d bytes refused: above [tank] max_frame_size (%d "
                        "bytes; TANK's own limit, the most it may be set to, is %d); closing "
                        "the connection", event.payload_size, self.max_payload_size,
                        MAX_PAYLOAD_SIZE)
        return event


class TankProtocol:
    """TANK's protocol as the connection loop sees it; one per listener."""

    name = "tank"

    greeting = PING_FRAME  # written first on every connection
    # the small replies of pipelined requests are written together (transports.binary): TANK's
    # clients keep many requests in flight and match answers by request id
    holds_replies = True
    # pipelined Produce requests queued one behind the other are served together
    # (transports.binary): a run of them for one partition is one append
    # (``data.produce_all``); so are pipelined Consumes: the partitions a run reads are
    # looked up once (``data.consume_all``)
    coalesced_codes = frozenset({m.MsgId.PRODUCE, m.MsgId.CONSUME})

    def __init__(self, settings: TankSettings, user_id: int) -> None:
        self.settings = settings
        self.user_id = user_id  # who every TANK connection acts as

    @staticmethod
    def frame_decoder(max_payload_size: int, **buffer_sizes: int) -> TankFrameDecoder:
        return _ListenerDecoder(min(max_payload_size, MAX_PAYLOAD_SIZE), **buffer_sizes)

    @staticmethod
    def request_kind(code: int) -> str:
        return REQUEST_KINDS.get(code, UNKNOWN_REQUEST)

    def open_session(self, core: Core, session: Session) -> None:
        try:
            core.broker.authenticate_as(session, self.user_id)
        except errors.RillError as error:  # the user was deleted or deactivated meanwhile
            log.warning("TANK connection %s cannot act as user %d: %s", session.address,
                        self.user_id, error)

    @staticmethod
    def error_reply(status: int) -> Reply:
        """TANK has no error answer for a bad frame: the connection closes."""
        return _CLOSE

    @staticmethod
    async def _later(waiting) -> Reply:
        return Reply(m.encode_response_parts(await waiting))

    def _consumed(self, answer: data.ConsumeAnswer) -> Reply:
        """The reply of a Consume answer: encoded already, a response, or a long poll's
        awaitable (answered later)."""
        kind = type(answer)
        if kind is list:
            return Reply(answer)
        if kind is m.ConsumeResponse:
            return Reply(m.encode_response_parts(answer))
        return Reply([], later=self._later(answer))

    async def handle_requests(self, core: Core, session: Session, code: int,
                              payloads: list[memoryview]) -> list[Reply]:
        """Produce or Consume requests pipelined one behind the other, answered in order by
        ``data.produce_all`` / ``data.consume_all`` (a long-polling Consume later, as alone);
        one that does not decode closes the connection after the answers of those before it,
        as it would alone."""
        if not core.heartbeat(session) or not session.is_authenticated:
            return [_CLOSE]
        requests: list = []
        closing = False
        for payload in payloads:
            try:
                requests.append(m.decode_request(code, payload))
            except TankDecodeError as error:
                log.info("client %d: %s; closing the connection", session.client_id, error)
                closing = True
                break
        try:
            if code == m.MsgId.CONSUME:
                replies = [self._consumed(answer) for answer in
                           data.consume_all(core, session, self.settings, requests)]
            else:
                replies = [Reply([answer]) if type(answer) is bytes
                           else Reply(m.encode_response_parts(answer)) for answer in
                           await data.produce_all(core, session, self.settings, requests)]
        except Exception:
            log.exception("client %d: TANK msg_id 0x%02x failed unexpectedly",
                          session.client_id, code)
            return [_FAILED]
        if closing:
            replies.append(_CLOSE)
        return replies

    async def handle_request(self, core: Core, session: Session, code: int,
                             payload: memoryview) -> Reply:
        if not core.heartbeat(session) or not session.is_authenticated:
            return _CLOSE
        try:
            request = m.decode_request(code, payload)
        except TankDecodeError as error:
            log.info("client %d: %s; closing the connection", session.client_id, error)
            return _CLOSE
        kind = type(request)
        if kind is m.Ping:
            return _NOTHING
        if request.msg_id in m.CLOSES_CONNECTION:
            log.info("client %d: TANK msg_id 0x%02x is cluster-only; closing the connection",
                     session.client_id, request.msg_id)
            return _CLOSE
        try:
            if kind is m.ProduceRequest:
                response = await data.produce(core, session, self.settings, request)
            elif kind is m.ConsumeRequest:
                return self._consumed(data.consume(core, session, self.settings, request))
            else:
                response = dispatch.HANDLERS[kind](core, session, self.settings, request)
                if inspect.isawaitable(response):  # CreateTopic: its files are made off the loop
                    response = await response
            return Reply(m.encode_response_parts(response))
        except Exception:
            log.exception("client %d: TANK msg_id 0x%02x failed unexpectedly", session.client_id,
                          code)
            return _FAILED
