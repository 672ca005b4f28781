"""The Kafka request handler: frame -> ``decode_request`` -> ``dispatch`` -> ``encode_response``.

Owns: ``KafkaProtocol``, the ``WireProtocol`` of the Kafka listener, and the connection-level
rules of Kafka's dialect (kafka-notes §9):

* framing: ``KafkaRequestFrameDecoder`` (int32 big-endian size); a size below the request
  header or above the limit closes the connection unanswered, as a Kafka broker does
  (``error_reply`` has no parts and closes);
* ApiVersions at a version rill does not know: error 35 in the v0 layout, listing the table;
  the connection stays open. Any other unknown API key or version, or undecodable bytes: the
  connection closes unanswered (Kafka's behaviour);
* only the APIs of ``SERVED`` are advertised and accepted (the rest of the codec's table
  comes later; the data APIs' versions are ``data.RANGES``, SASL's ``sasl.RANGES``);
* Produce with acks=0 gets no response: the reply has no parts, so the connection loop writes
  nothing and the next request's answer follows in order;
* login: SASL (``sasl``: PLAIN, SCRAM-SHA-256/512 as rill's users; after SaslHandshake v0 the
  frames are raw SASL tokens, no Kafka header, until the login ends). Until a connection is
  logged in it may send only ApiVersions, SaslHandshake and SaslAuthenticate; anything else
  closes it unanswered (Kafka's behaviour on a SASL listener). With ``[kafka] anonymous_user``
  set (local development) a connection acts as that user from the start (``open_session``;
  nobody when the user does not exist or is inactive) and may still log in by SASL;
* a JoinGroup or SyncGroup answer may be held (an awaited future, ``groups``): the
  connection's next request waits, other connections go on;
* an unexpected failure answers nothing and closes the connection (logged);
* a refused request (the closes above) is logged at info once per client address and cause,
  then at most once a minute with the count of those not logged (``logs.Refusals``): a
  client's retry loop does not flood the log. A frame above the limit is logged by the
  transport (``transports.tcp``) with its size and the setting that bounds it;
* metrics: a request is counted under its API's name in snake_case (``request_kind``:
  ``produce``, ``api_versions``); its outcome is "ok" when it is answered (errors inside the
  answer are the client's to read), "refused" when the connection closes on it, "error" when it
  failed unexpectedly.
"""

from __future__ import annotations

import logging
import re

from rill.protocol.kafka import (
    KafkaProtocolError,
    KafkaRequestFrameDecoder,
    UnsupportedVersion,
    api_versions_unsupported_response,
    decode_request,
    encode_response_parts,
    response_expected,
)
from rill.protocol.kafka.framing import frame
from rill.protocol.kafka import apis
from rill.server.core.core import Core
from rill.server.core.types import Session
from rill.server.logs import Refusals
from rill.server.protocols import UNKNOWN_REQUEST, Reply
from rill import errors
from rill.server.protocols.kafka import data, dispatch, sasl
from rill.server.protocols.kafka.common import KafkaSettings

log = logging.getLogger(__name__)

SERVED = dispatch.SERVED

_CLOSE = Reply([], close=True, outcome="refused")
_FAILED = Reply([], close=True, outcome="error")
_NOTHING = Reply([])  # written as nothing: the connection loop writes a reply's parts only
# API key -> its name in the metrics: "ApiVersions" -> "api_versions"
REQUEST_KINDS: dict[int, str] = {
    api.key: re.sub(r"(?<!^)(?=[A-Z])", "_", api.name).lower() for api in apis.APIS}


def listener_protocol(server) -> KafkaProtocol:
    """The protocol of the ``[kafka]`` listener of ``server`` (its ``config`` and ``core``);
    the address it advertises is set once the listener is bound (``listening``)."""
    from rill.server.config import split_address
    from rill.server.protocols.kafka.group_apis import member_source

    config, core = server.config, server.core
    kafka = config.kafka
    address = split_address(kafka.address, "kafka.address")
    core.member_sources.append(member_source(core, kafka.stream))  # the console
    return KafkaProtocol(settings(config, core, address), kafka.anonymous_user)


def listening(protocol: KafkaProtocol, server, bound: tuple[str, int]) -> None:
    """The listener is bound at ``bound``: clients are told ``[kafka] advertised_address``,
    or that address (its port is known only now when the configured one is 0)."""
    from rill.server.config import split_address

    config, core = server.config, server.core
    kafka = config.kafka
    if kafka.advertised_address:
        bound = split_address(kafka.advertised_address, "kafka.advertised_address")
    protocol.settings = settings(config, core, bound)


def settings(config, core: Core, address: tuple[str, int]) -> KafkaSettings:
    """``KafkaSettings`` from the server's config, advertising ``address``."""
    kafka = config.kafka
    return KafkaSettings(
        kafka.stream, address[0], address[1], kafka.auto_create_topics,
        group_initial_rebalance_delay=kafka.group_initial_rebalance_delay,
        max_message_bytes=config.tcp.max_frame_size,
        segment_bytes=config.system.segment.size,
        default_message_expiry=core.broker.catalog.default_message_expiry(),
        default_max_topic_size=config.system.topic.max_size,
        session_lifetime=kafka.session_lifetime)


class KafkaProtocol:
    """Kafka's protocol as the connection loop sees it; one per listener."""

    name = "kafka"
    greeting = b""  # a client speaks first

    def __init__(self, settings: KafkaSettings, anonymous_user: str = "") -> None:
        self.settings = settings
        self.anonymous_user = anonymous_user  # who a connection acts as before SASL ("": nobody)
        self.refusals = Refusals()  # a refused request: one line per client and cause

    @staticmethod
    def frame_decoder(max_payload_size: int, **buffer_sizes: int) -> KafkaRequestFrameDecoder:
        return KafkaRequestFrameDecoder(max_payload_size, **buffer_sizes)

    @staticmethod
    def request_kind(code: int) -> str:
        return REQUEST_KINDS.get(code, UNKNOWN_REQUEST)

    def open_session(self, core: Core, session: Session) -> None:
        if self.anonymous_user:
            try:
                core.broker.authenticate_as(session, self.anonymous_user)
            except (errors.InvalidCredentials, errors.UserInactive):
                log.info("client %d: [kafka] anonymous_user %r is not an active user; the "
                         "connection must log in by SASL", session.client_id, self.anonymous_user)

    def _refused(self, session: Session, cause: str, message: str, *args) -> None:
        """Log a refused request (the connection closes): once per client address and cause,
        then at most once a minute with a count (``logs.Refusals``)."""
        self.refusals.log(log, session.address, cause,
                          "client %d (%s): " + message + "; closing the connection",
                          session.client_id, session.address, *args)

    @staticmethod
    def error_reply(status: int) -> Reply:
        """Kafka answers a bad frame size by closing the connection."""
        return _CLOSE

    async def handle_request(self, core: Core, session: Session, code: int,
                             payload: memoryview) -> Reply:
        if not core.heartbeat(session):
            return _CLOSE
        if sasl.raw_expected(session):  # after SaslHandshake v0: a raw SASL token, no header
            answer = await sasl.serve_raw(core, session, self.settings, bytes(payload))
            return _CLOSE if answer is None else Reply([frame(answer)])
        served = dispatch.served(core)  # (a cluster's node serves OffsetForLeaderEpoch too)
        try:
            request = decode_request(payload, supported=served)
        except UnsupportedVersion as error:
            if error.api_key == apis.API_VERSIONS:
                return Reply([api_versions_unsupported_response(error.correlation_id, served)])
            self._refused(session, f"unsupported {error.api_key} v{error.api_version}",
                          "%s", error)
            return _CLOSE
        except KafkaProtocolError as error:
            self._refused(session, type(error).__name__, "%s", error)
            return _CLOSE
        key = request.api_key
        close = False
        if sasl.refused(session):
            return _CLOSE
        if key not in sasl.APIS and sasl.expired(session):
            self._refused(session, "login ended", "its SASL login ended ([kafka] "
                          "session_lifetime) and it did not log in again")
            return _CLOSE
        if key not in sasl.BEFORE_LOGIN and not session.is_authenticated:
            self._refused(session, f"API {key} before login", "Kafka API %d before a SASL login",
                          key)
            return _CLOSE
        try:
            if key in sasl.APIS:
                body, close = await sasl.serve(core, session, self.settings, request)
            else:
                body = await dispatch.HANDLERS[key](core, session, self.settings, request)
        except Exception:
            log.exception("client %d: Kafka API %d v%d failed unexpectedly", session.client_id,
                          key, request.api_version)
            return _FAILED
        if not response_expected(key, request.body):
            # Produce acks=0: no response at all; a failed partition closes the connection
            # (Kafka's way of telling a client that reads no answers)
            if key == apis.PRODUCE and data.produce_failed(body):
                self._refused(session, "acks=0 produce failed", "acks=0 produce failed")
                return _CLOSE
            return _NOTHING
        if close:  # a refused SASL exchange: the answer now, the close a moment later
            close = not sasl.close_soon(session)
        return Reply(encode_response_parts(key, request.api_version, request.correlation_id,
                                           body), close=close)
