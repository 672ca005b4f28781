"""The HTTP application: routes, middleware, error handlers and the OpenAPI document.

Owns: ``create_app(core, config, jwt, metrics, listeners, limits)``: the app, with the server's
connection limits and a ``ReplyMemory`` of ``[http] reply_memory`` for its message replies.
Middleware, outermost first:

1. CORS (``[http.cors]``, Starlette's CORSMiddleware): answers preflights before anything
   else and adds its headers to every answer, errors included;
2. request counting for the metrics (method and status);
3. ``Authenticate``: the bearer-token gate (401 before any body is read);
4. ``BodyLimit``: 413 past ``max_request_size`` while the body streams in.

The OpenAPI document (``/openapi.json``, browsable at ``/docs``: routes/docs.py) lists every
route with its request body model, its reply schema and its error replies; FastAPI's own 422
entries are replaced by the 400 this API really answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi
from fastapi.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rill.server.config import HttpConfig
from rill.server.core.core import Core
from rill.server.metrics import Metrics
from rill.server.transports.http.auth import PUBLIC_PATHS, Authenticate
from rill.server.transports.http.errors import BodyLimit, install_error_handlers
from rill.server.transports.http.replies import ReplyMemory
from rill.server.transports.limits import UNLIMITED, ConnectionLimits
from rill.server.auth.access_tokens import JwtManager
from rill.server.transports.http.routes import ROUTERS, console, docs, system
from rill.server.transports.http.routes.common import HttpContext

DESCRIPTION = """The rill HTTP JSON API (the Iggy 0.4 HTTP dialect).

Log in with `POST /users/login` and send the returned token as `Authorization: Bearer <token>`.
Binary data is standard Base64, timestamps are µs, byte sizes are strings such as `"1234 B"`.
Errors answer `{"id", "code", "reason", "field"}`."""


class CountRequests:
    """ASGI middleware: one metrics count per HTTP request, by method and status."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            self.metrics.record_http(scope["method"], status)


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def create_app(core: Core, config: HttpConfig, jwt: JwtManager, metrics: Metrics,
               listeners: Mapping[str, tuple[str, int]] | None = None,
               limits: ConnectionLimits = UNLIMITED) -> FastAPI:
    app = FastAPI(title="rill", version=_version(), description=DESCRIPTION,
                  openapi_url="/openapi.json", docs_url=None, redoc_url=None)
    app.state.rill = HttpContext(core, jwt, config, metrics, listeners if listeners is not None else {},
                                 limits, ReplyMemory(config.reply_memory, config.max_poll_size))
    install_error_handlers(app)
    public_paths = PUBLIC_PATHS | docs.PATHS | console.PATHS
    if config.metrics.enabled:
        app.add_api_route(config.metrics.endpoint, system.metrics, methods=["GET"], tags=["system"],
                          response_class=PlainTextResponse, summary="Prometheus metrics")
        public_paths = public_paths | {config.metrics.endpoint}
    app.include_router(docs.router)
    app.include_router(console.router)
    for router in ROUTERS:
        app.include_router(router)

    app.add_middleware(BodyLimit, limit=config.max_request_size)
    app.add_middleware(Authenticate, jwt=jwt, user_is_active=core.user_is_active, public_paths=public_paths)
    app.add_middleware(CountRequests, metrics=metrics)
    cors = config.cors
    if cors.enabled:
        app.add_middleware(
            CORSMiddleware, allow_origins=_split(cors.allowed_origins),
            allow_methods=_split(cors.allowed_methods), allow_headers=_split(cors.allowed_headers),
            allow_credentials=cors.allow_credentials,
        )
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description,
                             routes=app.routes)
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.get("responses", {})
                responses.pop("422", None)
        components = schema.get("components", {}).get("schemas", {})
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        app.openapi_schema = schema
    return app.openapi_schema


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("rill")
    except metadata.PackageNotFoundError:  # running from a source tree
        return "0"
