"""Errors of the HTTP API: one JSON body for every failure, and the request-size limit.

Owns: the §8.3 body ``{"id", "code", "reason", "field"}`` and its status (each ``rill.errors``
class carries ``http_status``: 404 for the not-found family, 401, 403, 429 with Retry-After
for a throttled login, else 400); the
get-single 404 (``{"id": 404, "code": "not_found", ...}``); the exception handlers that give
*every* failure that body -- a malformed JSON body, a wrong type, an unknown field or a bad
query value is 400 ``invalid_format`` (FastAPI would say 422), an unknown path 404, a wrong
method 405, an unexpected exception 500 ``error``; and ``BodyLimit``, the ASGI middleware that
answers 413 when a body is larger than ``[http] max_request_size``: at once when the
Content-Length says so, otherwise as soon as the bytes received while streaming pass the
limit (the body is never read whole first).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rill import errors
from rill.server.transports.http.redirects import leader_redirect

log = logging.getLogger(__name__)

NOT_FOUND_BODY = {"id": 404, "code": "not_found", "reason": "Resource not found", "field": None}


def error_body(error: errors.RillError) -> dict[str, Any]:
    return {"id": error.code, "code": error.name, "reason": error.reason, "field": error.field}


def error_response(error: errors.RillError, status: int | None = None) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if error.http_status == 401 else None
    if isinstance(error, errors.LoginThrottled) and error.args_values:
        headers = {"Retry-After": str(error.args_values[0])}
    return JSONResponse(error_body(error), status_code=status or error.http_status, headers=headers)


def not_found() -> JSONResponse:
    return JSONResponse(NOT_FOUND_BODY, status_code=404)


class BodyTooLarge(HTTPException):
    """Raised while the body streams in; an HTTPException so FastAPI's body parsing lets it
    through unchanged to the handler below."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=f"the request body is larger than {limit} bytes")


def _field_of(location: tuple[Any, ...] | list[Any]) -> str | None:
    parts = [str(part) for part in location if part not in ("body", "query", "path", "header")]
    return ".".join(parts) or None


async def _rill_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, errors.RillError)
    # in a cluster, a partition another node leads: 307 there (``redirects``)
    return leader_redirect(request, error) or error_response(error)


async def _validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    problems = error.errors()
    first = problems[0] if problems else {}
    if first.get("type") == "json_invalid":  # the location is a character position
        error_text = (first.get("ctx") or {}).get("error", "")
        reason = f"Invalid format: malformed JSON body{': ' + error_text if error_text else ''}"
        return error_response(errors.InvalidFormat(reason=reason))
    field = _field_of(first.get("loc", ()))
    message = first.get("msg", "malformed request")
    reason = f"Invalid format: {field}: {message}" if field else f"Invalid format: {message}"
    return error_response(errors.InvalidFormat(reason=reason, field=field))


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    if error.status_code == 404:
        return not_found()
    if error.status_code == 413:
        too_large = errors.CommandLengthError(reason=f"Command length error: {error.detail}")
        return error_response(too_large, 413)
    code = "method_not_allowed" if error.status_code == 405 else "http_error"
    body = {"id": error.status_code, "code": code, "reason": str(error.detail), "field": None}
    return JSONResponse(body, status_code=error.status_code, headers=error.headers)


async def _unexpected(request: Request, error: Exception) -> JSONResponse:
    log.error("HTTP %s %s failed unexpectedly", request.method, request.url.path, exc_info=error)
    return JSONResponse({"id": 1, "code": "error", "reason": "Error", "field": None}, status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(errors.RillError, _rill_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


class BodyLimit:
    """ASGI middleware: 413 for bodies over ``limit`` bytes, counted as they stream in."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                if not value.isdigit() or int(value) > limit:
                    await _refuse(send, limit)
                    return
        received = 0

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, counted_receive, send)


async def _refuse(send: Send, limit: int) -> None:
    error = errors.CommandLengthError(
        reason=f"Command length error: the request body is larger than {limit} bytes"
    )
    response = JSONResponse(error_body(error), status_code=413, headers={"Connection": "close"})
    await response({"type": "http"}, _no_receive, send)


async def _no_receive() -> Message:  # pragma: no cover - a JSONResponse never reads
    return {"type": "http.disconnect"}
