"""What every route shares: the server context, the one execute path, and documented replies.

Owns: ``HttpContext`` (the Core, the token manager, the HTTP config, the metrics, the server's
listeners, the connection limits and the reply memory; kept on
``app.state.rill``) and ``run``, the whole life of a routed request: the path params, query and
validated body go through ``rill.protocol.iggy.http_json`` into the command dataclass, the command
goes to the Iggy dispatch (``execute_command``: ``protocols.iggy.dispatch.execute``, the login
gate, then the core, which does permissions, validation and journaling; counted in the metrics
as the binary listeners' requests are),
and the result comes back as JSON with the endpoint's success status. Get-single endpoints
answer any failure -- and a missing result -- with the 404 ``not_found`` body (wire §8.3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
import time
from typing import Any

from fastapi import Request, Security
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from rill import errors
from rill.protocol.iggy import http_json
from rill.server.config import HttpConfig
from rill.server.core.core import Core
from rill.server.metrics import Metrics
from rill.server.protocols.iggy.dispatch import execute as execute_iggy
from rill.server.protocols.iggy.handler import record_traffic
from rill.server.transports.http import schemas
from rill.server.transports.http.auth import bearer, session_of
from rill.server.transports.http.errors import not_found
from rill.server.auth.access_tokens import JwtManager
from rill.server.transports.http.models import to_json
from rill.server.transports.http.replies import Grant, ReplyMemory, TextReply
from rill.server.transports.limits import NEVER, UNLIMITED, ConnectionLimits


@dataclass
class HttpContext:
    core: Core
    jwt: JwtManager
    config: HttpConfig
    metrics: Metrics
    # protocol -> bound (host, port) of every listener of the server (GET /server)
    listeners: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    limits: ConnectionLimits = UNLIMITED  # min_request_rate, request_timeout: replies too
    replies: ReplyMemory = field(default_factory=lambda: ReplyMemory(NEVER, 1 << 20))

    def reply(self, text: Iterable[str | bytes], grant: Grant) -> TextReply:
        """A JSON reply of ``text`` holding ``grant`` until written."""
        return TextReply(text, "application/json", self.limits.min_request_rate,
                         self.limits.request_timeout, release=grant.release)


def context(request: Request) -> HttpContext:
    return request.app.state.rill  # type: ignore[no-any-return]


# every protected route lists the bearer scheme, so /docs can send the token
SECURED = [Security(bearer)]

_ERROR = {"model": schemas.Error}
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {**_ERROR, "description": "Invalid request (malformed body, bad value, rule broken)"},
    401: {**_ERROR, "description": "Missing, invalid, expired or revoked access token"},
    403: {**_ERROR, "description": "The user lacks the permission"},
    404: {**_ERROR, "description": "Not found"},
}
BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS, 413: {**_ERROR, "description": "The body is larger than max_request_size"},
}
LOGIN_ERRORS: dict[int | str, dict[str, Any]] = {
    **BODY_ERRORS,
    429: {**_ERROR, "description": "Too many failed logins from this address or for this user: "
                                   "retry after the Retry-After header's seconds"},
}


def replies(model: Any = None, status: int = 200, body: bool = True,
            login: bool = False) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route: its success reply and the error replies."""
    success: dict[str, Any] = {"description": "Success"}
    if model is not None:
        success["model"] = model
    return {status: success, **(LOGIN_ERRORS if login else BODY_ERRORS if body else ERRORS)}


async def execute_command(core: Core, session: Any, command: Any) -> Any:
    """Run one Iggy command (``protocols.iggy.dispatch.execute``); while metrics are on it is
    counted and timed as the binary listeners' requests are (protocol "iggy", transport
    "http"), with the bytes it moved."""
    metrics = core.metrics
    if not metrics.enabled:
        return await execute_iggy(core, session, command)
    transport = session.transport
    started = time.perf_counter()
    outcome = "ok"
    try:
        result = await execute_iggy(core, session, command)
    except Exception as error:
        outcome = getattr(error, "name", "error")
        raise
    finally:
        metrics.record_request("iggy", command.NAME, transport, outcome,
                               time.perf_counter() - started)
    record_traffic(metrics, transport, command, result)
    return result


async def execute(request: Request, name: str, body: BaseModel | None = None,
                  poll_limit: int = 0) -> Any:
    """Decode the request into ``name``'s command and run it; returns the result.
    ``poll_limit``: the most bytes of messages a poll returns (0: the server's)."""
    command = http_json.decode_request(name, request.path_params, request.query_params, to_json(body))
    session = session_of(request)
    session.poll_limit = poll_limit
    return await execute_command(context(request).core, session, command)


async def run(request: Request, name: str, body: BaseModel | None = None) -> Response:
    spec = http_json.ENDPOINTS[name]
    try:
        result = await execute(request, name, body)
    except errors.NotLeaderForPartition:
        raise  # a cluster's redirect to the leader (``redirects``), get-single or not
    except errors.RillError:
        if spec.get_single:
            return not_found()
        raise
    if spec.get_single and result is None:
        return not_found()
    if not http_json.has_json_result(name):
        return Response(status_code=spec.status)
    return JSONResponse(http_json.encode_result(name, result), status_code=spec.status)
