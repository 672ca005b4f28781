"""Who is calling: the bearer-token gate of the HTTP API and the per-request session.

Owns: ``Authenticate``, the ASGI middleware that runs before any body is read or route is
chosen: on every path but the public ones (wire §8.2 -- ``/``, ``/ping``, the
metrics endpoint, the three login/refresh paths -- plus the API documentation) it requires
``Authorization: Bearer <jwt>``, verifies the token (signature, iss/aud, iat/nbf/exp with the
configured clock skew, not revoked) and that its user still exists and is active, and answers
401 with the §8.3 body otherwise -- unless the path is no route of the API at all, which goes on
to the router's 404 (a wrong URL is told as such, with or without a token). The verified token
is left in ``scope["state"]``.

``session_of(request)`` asks the core for the short-lived ``Session`` a route executes with:
client id 0, transport HTTP, the caller's address and the token's user id. It is never
registered with the Core, so HTTP callers do not appear in GET_CLIENTS and cannot be consumer-group members.
"""

from __future__ import annotations

from typing import Callable

from fastapi import Request
from fastapi.security import HTTPBearer
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from rill import errors
from rill.server.core.types import Session
from rill.server.transports.http.errors import error_response
from rill.server.auth.access_tokens import AccessToken, JwtManager

PUBLIC_PATHS = frozenset({
    "/", "/ping", "/health", "/ready", "/users/login", "/users/refresh-token", "/personal-access-tokens/login",
    "/openapi.json",
})  # and the pages of /docs (routes/docs.py), added by create_app

# documents the scheme in OpenAPI (the "Authorize" button of /docs); the middleware enforces it
bearer = HTTPBearer(auto_error=False, description="A JWT from /users/login")


def _routed(scope: Scope) -> bool:
    """Whether some route of the app takes this path (with any method)."""
    app = scope.get("app")  # set by Starlette before the middleware runs
    if app is None:
        return True
    return any(route.matches(scope)[0] is not Match.NONE for route in app.router.routes)


class Authenticate:
    def __init__(
        self,
        app: ASGIApp,
        jwt: JwtManager,
        user_is_active: Callable[[int], bool],
        public_paths: frozenset[str] = PUBLIC_PATHS,
    ) -> None:
        self.app = app
        self.jwt = jwt
        self.user_is_active = user_is_active
        self.public_paths = public_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] == "OPTIONS" or scope["path"] in self.public_paths:
            await self.app(scope, receive, send)
            return
        try:
            token = self._authenticate(scope)
        except errors.RillError as error:
            if _routed(scope):
                await error_response(error)(scope, receive, send)
            else:  # no such path: the router answers 404
                await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})["access_token"] = token
        await self.app(scope, receive, send)

    def _authenticate(self, scope: Scope) -> AccessToken:
        header = next((value for name, value in scope.get("headers", ()) if name == b"authorization"), None)
        if header is None:
            raise errors.Unauthenticated(reason="Unauthenticated: the Authorization header is missing")
        scheme, _, credentials = header.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            raise errors.Unauthenticated(reason="Unauthenticated: expected Authorization: Bearer <token>")
        try:
            token = self.jwt.verify(credentials.strip())
        except errors.InvalidAccessToken as error:
            raise errors.Unauthenticated(reason=f"Unauthenticated: {error.reason}") from None
        if not self.user_is_active(token.user_id):
            raise errors.Unauthenticated(reason="Unauthenticated: the user is unknown or inactive")
        return token


def access_token(request: Request) -> AccessToken | None:
    return getattr(request.state, "access_token", None)


def session_of(request: Request) -> Session:
    """The core's session for one request (``Core.request_session``)."""
    token = access_token(request)
    client = request.client
    address = f"{client.host}:{client.port}" if client else "unknown"
    return request.app.state.rill.core.request_session(address, "http",
                                                        token.user_id if token else 0)
