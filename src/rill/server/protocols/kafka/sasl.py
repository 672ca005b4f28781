"""Kafka SASL: SaslHandshake (17) and SaslAuthenticate (36) as calls of the broker's logins.

Owns: the SASL state of each Kafka connection and its rules (kafka-notes §2.4, §9):

* mechanisms: PLAIN (token ``authzid \\0 user \\0 password``, checked as an Iggy login: bcrypt
  off the loop, throttled, the user's SCRAM credentials derived on its first login since they
  were added), SCRAM-SHA-256 and SCRAM-SHA-512 (``auth.scram``; client-first -> server-first,
  client-final -> server-final);
* SaslHandshake v1 names the mechanism; one it does not know is UNSUPPORTED_SASL_MECHANISM with
  the enabled list, and the connection closes;
* SaslHandshake v0 (Kafka 0.10's exchange, KIP-43; Sarama below its V1_0_0_0 setting, removed
  from Kafka 4.0 by KIP-896) names the mechanism the same way, then the SASL tokens travel as
  **raw frames**: int32 size and the token, no Kafka header, both ways (``serve_raw``; the
  handler hands the connection's next frames here until the login ends). Each client token
  gets the server's token in a raw frame (PLAIN: an empty one, the 4 bytes 0); a failed login
  gets no answer: the connection closes, which is how a v0 client learns of it (KIP-152 kept
  that for v0). A token shorter than a Kafka request header (8 bytes) is closed by the framing
  before it gets here: no PLAIN token of a rill user is (names and passwords have >= 3 bytes);
* SaslAuthenticate before a handshake, a second handshake, or SASL after a successful login:
  ILLEGAL_SASL_STATE, and the connection closes -- unless logins expire;
* logins expire (KIP-368) when ``[kafka] session_lifetime`` is set: the last SaslAuthenticate of
  a login tells a v1+ client ``session_lifetime_ms``, and the client logs in again on the same
  connection before then (SaslHandshake, then SaslAuthenticate, with the mechanism it used and
  as the same user: another mechanism is ILLEGAL_SASL_STATE, another user
  SASL_AUTHENTICATION_FAILED, and the connection closes; so does a wrong password, which is
  how a changed password or a deleted or deactivated user reaches a connection already logged
  in). A connection whose login ended gets no answer to any other request: it is closed
  (``expired``; a v0 client, which is not told, reconnects);
* a failed login: SASL_AUTHENTICATION_FAILED (58) with a message, then the connection closes;
  every refusal closes ``CLOSE_DELAY`` after its answer (Kafka's
  ``connection.failed.authentication.delay.ms``, 100 ms), not at once: a client that reads the
  answer and the close in one go may drop the answer (kafka-python 3 does) and retry blind.
  Anything the client sends meanwhile closes the connection at once, unanswered;
* before a successful login only ApiVersions, SaslHandshake and SaslAuthenticate are served
  (``handler``), unless the listener lets connections act as ``[kafka] anonymous_user``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rill import errors
from rill.protocol.kafka import ErrorCode, apis, response_class
from rill.server.auth import scram
from rill.server.core.core import Core
from rill.server.core.types import Session

if TYPE_CHECKING:
    from rill.server.protocols.kafka.common import KafkaSettings

log = logging.getLogger(__name__)

PLAIN = "PLAIN"
MECHANISMS: tuple[str, ...] = (PLAIN, scram.SHA256, scram.SHA512)
RANGES: dict[int, tuple[int, int]] = {apis.SASL_HANDSHAKE: (0, 1),
                                      apis.SASL_AUTHENTICATE: (0, 2)}
APIS = frozenset(RANGES)
CLOSE_DELAY = 0.1  # seconds between a refusal's answer and the close
# what a connection may send before it is logged in (Kafka's rule on a SASL listener)
BEFORE_LOGIN = frozenset({apis.API_VERSIONS, *RANGES})

_Handshake = response_class(apis.SASL_HANDSHAKE)
_Authenticate = response_class(apis.SASL_AUTHENTICATE)


@dataclass(slots=True)
class _State:
    mechanism: str | None = None
    exchange: scram.ScramExchange | None = None
    done: bool = False
    refused: bool = False  # answered with a refusal: closing
    raw: bool = False  # SaslHandshake v0: the tokens come as raw frames (``serve_raw``)
    user_id: int | None = None  # who the first login was (a later one must be the same)
    ends_at: float | None = None  # time.monotonic() when the login ends (None: never)


_STATES: weakref.WeakKeyDictionary[Session, _State] = weakref.WeakKeyDictionary()


def expired(session: Session) -> bool:
    """Whether the connection's SASL login has ended (``[kafka] session_lifetime``)."""
    state = _STATES.get(session)
    return (state is not None and state.ends_at is not None
            and time.monotonic() >= state.ends_at)


def _failed(message: str, code: ErrorCode = ErrorCode.SASL_AUTHENTICATION_FAILED
            ) -> tuple[Any, bool]:
    return _Authenticate(error_code=int(code), error_message=message, auth_bytes=b"",
                         session_lifetime_ms=0), True


def _handshake(code: ErrorCode, close: bool) -> tuple[Any, bool]:
    return _Handshake(error_code=int(code), mechanisms=MECHANISMS), close


async def serve(core: Core, session: Session, settings: KafkaSettings, request
                ) -> tuple[Any, bool]:
    """The response body to a SASL request, and whether the connection closes after it."""
    state = _STATES.get(session)
    if state is None:
        state = _STATES[session] = _State()
    if request.api_key == apis.SASL_HANDSHAKE:
        again = state.done and settings.session_lifetime > 0  # logging in again (KIP-368)
        if (state.done and not again) or (state.mechanism is not None and not state.done):
            return _handshake(ErrorCode.ILLEGAL_SASL_STATE, True)
        if request.body.mechanism not in MECHANISMS:
            return _handshake(ErrorCode.UNSUPPORTED_SASL_MECHANISM, True)
        if again and request.body.mechanism != state.mechanism:
            return _handshake(ErrorCode.ILLEGAL_SASL_STATE, True)
        state.mechanism = request.body.mechanism
        state.done = False
        state.raw = request.api_version == 0
        return _handshake(ErrorCode.NONE, False)
    if state.mechanism is None or state.done or state.raw:
        return _failed("SaslAuthenticate is only served after SaslHandshake v1, once",
                       ErrorCode.ILLEGAL_SASL_STATE)
    return await _exchange(core, session, settings, state,
                           bytes(request.body.auth_bytes or b""))


def raw_expected(session: Session) -> bool:
    """Whether the connection's next frame is a raw SASL token (after SaslHandshake v0)."""
    state = _STATES.get(session)
    return state is not None and state.raw and not state.done


async def serve_raw(core: Core, session: Session, settings: KafkaSettings, token: bytes
                    ) -> bytes | None:
    """The server's token for a raw client token (SaslHandshake v0's exchange), or None: the
    login failed and the connection closes unanswered."""
    state = _STATES[session]
    answer, close = await _exchange(core, session, settings, state, token)
    if close or answer.error_code:
        log.info("client %d: SASL %s login (SaslHandshake v0) failed: %s; closing the "
                 "connection", session.client_id, state.mechanism, answer.error_message)
        return None
    return bytes(answer.auth_bytes)


async def _exchange(core: Core, session: Session, settings: KafkaSettings, state: _State,
                    token: bytes) -> tuple[Any, bool]:
    """One client token of the login: the SaslAuthenticate answer, and whether to close."""
    try:
        if state.mechanism == PLAIN:
            await _plain(core, session, token)
            answer = b""
        elif state.exchange is None:
            state.exchange = core.broker.begin_scram(session, state.mechanism, token)
            return _Authenticate(error_code=0, error_message=None,
                                 auth_bytes=state.exchange.server_first_message(),
                                 session_lifetime_ms=0), False
        else:
            _, answer = core.broker.finish_scram(session, state.exchange, token)
    except (scram.ScramError, _Refused) as error:
        return _failed(str(error))
    except errors.LoginThrottled as error:
        return _failed(error.reason)
    except (errors.InvalidCredentials, errors.UserInactive, errors.ResourceNotFound):
        return _failed(f"Authentication failed: invalid credentials with SASL mechanism "
                       f"{state.mechanism}")
    state.exchange = None
    if state.user_id is not None and session.user_id != state.user_id:
        session.user_id = state.user_id  # nothing is served as the other user: it closes
        return _failed("Authentication failed: a connection cannot log in again as another user")
    if state.user_id is not None:
        log.info("client %d: logged in again by SASL %s", session.client_id, state.mechanism)
    state.done = True
    state.user_id = session.user_id
    lifetime = settings.session_lifetime
    state.ends_at = time.monotonic() + lifetime if lifetime > 0 else None
    return _Authenticate(error_code=0, error_message=None, auth_bytes=answer,
                         session_lifetime_ms=int(lifetime * 1000)), False


class _Refused(Exception):
    """A malformed or refused PLAIN token; the message is what the client is told."""


def refused(session: Session) -> bool:
    """Whether the connection's SASL exchange was refused (it is closing)."""
    state = _STATES.get(session)
    return state is not None and state.refused


def close_soon(session: Session) -> bool:
    """After a refusal's answer: close the connection ``CLOSE_DELAY`` later (False when the
    link cannot be closed later: then close it now)."""
    state = _STATES.get(session)
    if state is None or session.close_link is None:
        return False
    state.refused = True
    asyncio.get_running_loop().call_later(CLOSE_DELAY, session.close_link)
    return True


async def _plain(core: Core, session: Session, token: bytes) -> None:
    parts = token.split(b"\0")
    if len(parts) != 3:
        raise _Refused("Invalid SASL/PLAIN response: expected 3 tokens")
    try:
        authzid, username, password = (part.decode("utf-8") for part in parts)
    except UnicodeDecodeError:
        raise _Refused("Invalid SASL/PLAIN response: not UTF-8") from None
    if not username or not password:
        raise _Refused("Authentication failed: username or password is empty")
    if authzid and authzid != username:
        raise _Refused("Authentication failed: Client requested an authorization id "
                               "that is different from username")
    await core.broker.authenticate(session, username, password)
