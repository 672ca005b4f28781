"""The Iggy request handler: request (code, payload) -> response frame, for TCP and QUIC alike.

Owns: ``IGGY`` (the ``WireProtocol`` of the binary listeners): decoding with the Iggy codec
(``rill.protocol.iggy``), the command's dispatch (``dispatch``: its calls of the broker),
encoding the result, and the wire dialect's status rules (wire §1.3, §4.12): any
decode failure is status 3; get-single commands answer an empty OK on any failure; unexpected
exceptions are status 1 and are logged, and the connection keeps serving; a request on a session
the heartbeat verifier removed is status 30 and closes the link. No permission checks, journal
writes or retries live here. In a cluster it also runs the requests another node proxied
here (``run_forwarded``, registered as ``Broker.forwarded["iggy"]``) and sends a proxied
request's answer as the leader gave it (``forwarding.Relayed``).

Metrics: a request's outcome is "ok" or the name of the error it failed with (also when the
dialect answers an empty OK); the connection loop counts and times it under the command's name
(``request_kind``). While metrics are on, the bytes of SEND's messages and the messages and
bytes of POLL's answers are counted by transport (``record_traffic``, also HTTP's).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import struct

from rill import errors
from rill.protocol.iggy.codes import COMMANDS, decode_command
from rill.protocol.iggy.commands.messages import SendMessages
from rill.protocol.iggy.framing import (
    LENGTH_PREFIX_SIZE,
    REQUEST_HEADER,
    RESPONSE_HEADER,
    RequestFrameDecoder,
)
from rill.protocol.buffer import Writer
from rill.protocol.iggy.responses.base import Record, encode_records
from rill.protocol.iggy.responses.columnar import ColumnarMessages, StoredBatches
from rill.protocol.iggy.responses.messages import PolledMessages
from rill.server.core.core import Core
from rill.server.core.types import Session
from rill.server.metrics import Metrics
from rill.server.protocols import UNKNOWN_REQUEST, Reply
from rill.server.protocols.iggy.dispatch import RECORDS_PER_TURN, execute
from rill.server.protocols.iggy.forwarding import PEER_TRANSPORT, PROTOCOL, Relayed
from rill.server.protocols.iggy.views import PolledParts

log = logging.getLogger(__name__)

# GET_USER, GET_CLIENT, GET_CONSUMER_OFFSET, GET_STREAM, GET_TOPIC, GET_CONSUMER_GROUP
EMPTY_OK_ON_ERROR = frozenset({31, 21, 120, 200, 300, 600})
# statuses after which the server drops the connection
CLOSING_STATUSES = frozenset({errors.ClientNotFound.code, errors.StaleClient.code})

OK_EMPTY = RESPONSE_HEADER.pack(0, 0)
WRITE_CODES = frozenset({101, 1010})  # SEND_MESSAGES, STAGE_MESSAGES


def error_reply(status: int, outcome: str = "error") -> Reply:
    return Reply([RESPONSE_HEADER.pack(status, 0)], close=status in CLOSING_STATUSES,
                 outcome=outcome)


def record_traffic(metrics: Metrics, transport: str, command: object, result: object) -> None:
    """Count what one command moved: the messages region of a SEND, the messages and bytes of
    a POLL's answer (by ``transport``: "tcp", "quic", "http")."""
    if isinstance(result, PolledMessages):
        metrics.record_polled(transport, result.count, len(result.raw))
    elif type(result) is PolledParts:
        metrics.record_polled(transport, result.head.count, result.size)
    elif isinstance(command, SendMessages):
        metrics.record_sent(transport, len(command.messages))


def request_kind(code: int) -> str:
    """The command's name (``send_messages``), or ``UNKNOWN_REQUEST``."""
    command = COMMANDS.get(code)
    return command.NAME if command is not None else UNKNOWN_REQUEST


def encode_result(result: object) -> list[bytes | bytearray | memoryview]:
    """Response frame parts for a core result, with no copy of large payloads."""
    if result is None:
        return [OK_EMPTY]
    if isinstance(result, PolledMessages):
        prefix = result.prefix()
        return [RESPONSE_HEADER.pack(0, len(prefix) + len(result.raw)) + prefix, result.raw]
    if type(result) is PolledParts:  # the records include file regions (sendfile on TCP)
        prefix = result.head.prefix()
        return [RESPONSE_HEADER.pack(0, len(prefix) + result.size) + prefix, *result.parts]
    if isinstance(result, (bytes, bytearray, memoryview)):
        return [RESPONSE_HEADER.pack(0, len(result)), result]
    if type(result) is StoredBatches:  # rill extension: the stored records as they are
        prefix = result.prefix()
        return [RESPONSE_HEADER.pack(0, len(prefix) + len(result.records)) + prefix,
                result.records]
    if isinstance(result, ColumnarMessages):  # rill extension: the records region as is
        *columns, records = result.parts()
        head = b"".join(columns)
        return [RESPONSE_HEADER.pack(0, len(head) + len(records)) + head, records]
    if isinstance(result, Record):
        payload = result.to_bytes()
    elif isinstance(result, (list, tuple)):
        payload = encode_records(result)
    else:
        raise TypeError(f"cannot encode a {type(result).__name__} result")
    return [RESPONSE_HEADER.pack(0, len(payload)) + payload]


async def handle_request(core: Core, session: Session, code: int, payload: memoryview) -> Reply:
    if not core.heartbeat(session):
        # the session (from core.connect) was removed by the heartbeat verifier: status 30,
        # and CLOSING_STATUSES makes the transport close the link
        return error_reply(errors.StaleClient.code, errors.StaleClient.name)
    try:
        command = decode_command(code, payload)
    except errors.RillError as error:  # DecodeError: status 3 whatever went wrong inside
        log.debug("client %d: undecodable request %d: %s", session.client_id, code, error)
        return error_reply(errors.InvalidCommand.code, errors.InvalidCommand.name)
    try:
        result = await execute(core, session, command)
    except errors.RillError as error:
        if code in EMPTY_OK_ON_ERROR:
            return Reply([OK_EMPTY], outcome=error.name)
        return error_reply(error.code, error.name)
    except Exception:
        log.exception("client %d: %s failed unexpectedly", session.client_id, command.NAME)
        return error_reply(errors.Error.code, errors.Error.name)
    if core.metrics.enabled:
        record_traffic(core.metrics, session.transport, command, result)
    if isinstance(result, list) and len(result) > RECORDS_PER_TURN:
        result = await _encode_in_turns(result)  # e.g. GET_STREAMS of 100,000 streams
    if type(result) is Relayed:  # the leader's answer to a proxied request, as it came
        return Reply([result.frame])
    return Reply(encode_result(result))


async def run_forwarded(core: Core, user_id: int, frame: bytes) -> bytes:
    """Run one Iggy request another node proxied here (``forwarding``; ``Broker.forwarded``)
    in a session acting as ``user_id`` (no login: the other node logged the client in), and
    the whole answer frame, errors included, with the dialect's status rules."""
    session = core.request_session(f"peer:{user_id}", PEER_TRANSPORT, user_id)
    view = memoryview(frame)
    try:
        length, code = REQUEST_HEADER.unpack_from(view)
        command = decode_command(code, view[REQUEST_HEADER.size:LENGTH_PREFIX_SIZE + length])
    except (errors.RillError, struct.error):
        return RESPONSE_HEADER.pack(errors.InvalidCommand.code, 0)
    try:
        result = await execute(core, session, command)
    except errors.RillError as error:
        return OK_EMPTY if code in EMPTY_OK_ON_ERROR else RESPONSE_HEADER.pack(error.code, 0)
    except Exception:
        log.exception("forwarded %s as user %d failed unexpectedly", command.NAME, user_id)
        return RESPONSE_HEADER.pack(errors.Error.code, 0)
    if type(result) is Relayed:  # (never: a forwarded request is not proxied again)
        return result.frame
    if isinstance(result, list) and len(result) > RECORDS_PER_TURN:
        result = await _encode_in_turns(result)
    return b"".join(bytes(part) for part in encode_result(result))


async def _encode_in_turns(records: list[Record]) -> bytes:
    """``encode_records``, yielding to the event loop every ``RECORDS_PER_TURN`` records."""
    writer = Writer()
    for start in range(0, len(records), RECORDS_PER_TURN):
        if start:
            await asyncio.sleep(0)
        for record in records[start:start + RECORDS_PER_TURN]:
            record.encode(writer)
    return writer.getvalue()


class IggyProtocol:
    """The Iggy binary protocol as the connection loop sees it."""

    name = "iggy"
    greeting = b""  # a client speaks first

    frame_decoder = RequestFrameDecoder  # (max_payload_size, **buffer_sizes)
    handle_request = staticmethod(handle_request)
    error_reply = staticmethod(error_reply)
    request_kind = staticmethod(request_kind)

    @staticmethod
    def open_session(core: Core, session: Session) -> None:
        """Iggy sessions log in with a command."""

    @staticmethod
    def refuse_before_body(core: Core, session: Session, code: int) -> int | None:
        """A large SEND_MESSAGES or STAGE_MESSAGES of a user who may write nowhere is refused
        (Unauthorized) from its header: its body is never read."""
        if code in WRITE_CODES and not core.broker.may_write_somewhere(session):
            return errors.Unauthorized.code
        return None


IGGY = IggyProtocol()


def listener_protocol(server: object) -> IggyProtocol:
    """The protocol of Iggy's binary listeners (one for every server); it also runs the Iggy
    requests other nodes of a cluster proxy to this one (``Broker.forwarded``)."""
    core = getattr(server, "core", None)
    if core is not None:
        core.broker.forwarded[PROTOCOL] = functools.partial(run_forwarded, core)
    return IGGY
