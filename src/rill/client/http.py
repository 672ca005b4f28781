"""The HTTP transport of the SDK: the binary command API of ``AsyncClient`` over the JSON API.

Owns: ``HttpTransport`` (registered as ``"http"``, so ``AsyncClient(address, transport="http")``
and ``Client(..., transport="http")`` work unchanged). ``request(code, payload)`` decodes the
binary command with ``rill.protocol.iggy.codes``, maps it to an HTTP call with
``rill.protocol.iggy.http_json`` (the same table the server's routes use), and re-encodes the JSON
answer as the binary OK payload, so ``command.decode_response`` reads it exactly as it reads a
TCP answer. HTTP/1.1 is spoken with ``h11`` over asyncio streams (TLS for ``https://``
addresses or ``ssl=``), with a small pool of keep-alive connections so concurrent requests do
not wait for each other.

Sessions: a login (password or personal access token) keeps the returned JWT and sends it as
``Authorization: Bearer`` from then on; the token is refreshed shortly before it expires;
``logout_user`` revokes it on the server and forgets it. Errors come back as the same
``rill.errors`` classes (the JSON body's ``id`` is the wire code). Get-single commands read any
401/403/404 as "nothing" (None), as the binary dialect answers an empty OK. Commands without an
HTTP endpoint (GET_ME, JOIN/LEAVE group) and consumer-group polls and offsets raise
``errors.FeatureUnavailable`` saying why. ``get_json(target)`` GETs a JSON route no command maps
(``/cluster``: ``AsyncClient.get_cluster``).

Invariant: a connection goes back to the pool only after a complete exchange; a request that
fails or is cancelled mid-way closes its connection. A request sent on a reused connection that
the server had already closed (keep-alive timeout) is retried once on a new connection when no
byte of an answer arrived.
"""

from __future__ import annotations

import asyncio
import json
import ssl as ssl_module
import time
from typing import Any

import h11

from rill import errors
from rill.client.transport import (
    Payload,
    Transport,
    parse_address,
    payload_parts,
    register_transport,
    tls_context,
)
from rill.protocol.iggy import http_json
from rill.protocol.iggy.codes import decode_command
from rill.protocol.iggy.responses.base import encode_records
from rill.protocol.iggy.responses.messages import PolledMessages
from rill.protocol.iggy.responses.users import RawPersonalAccessToken

DEFAULT_HTTP_PORT = 3000
MAX_CONNECTIONS = 16
READ_SIZE = 256 * 1024
_LOGINS = frozenset({"login_user", "login_with_personal_access_token"})
_QUIET_FAILURES = frozenset({401, 403, 404})  # get-single commands read these as "nothing"


class _StaleConnection(Exception):
    """A reused connection was closed by the server before any answer arrived."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.state = h11.Connection(h11.CLIENT)
        self.reused = False

    async def exchange(self, method: str, target: str, headers: list[tuple[str, str]],
                       body: bytes | None) -> tuple[int, dict[str, str], bytes]:
        state = self.state
        data = state.send(h11.Request(method=method, target=target, headers=headers))
        if body:
            data += state.send(h11.Data(data=body))
        data += state.send(h11.EndOfMessage())
        answered = False
        try:
            self.writer.write(data)
            await self.writer.drain()
            status, response_headers, chunks = 0, {}, []
            while True:
                event = state.next_event()
                if event is h11.NEED_DATA:
                    state.receive_data(await self.reader.read(READ_SIZE))
                elif isinstance(event, h11.Response):
                    answered = True
                    status = event.status_code
                    response_headers = {k.decode().lower(): v.decode("latin-1") for k, v in event.headers}
                elif isinstance(event, h11.Data):
                    chunks.append(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    raise ConnectionResetError("the server closed the connection")
        except (OSError, h11.RemoteProtocolError) as error:
            if self.reused and not answered:
                raise _StaleConnection() from error
            raise
        return status, response_headers, b"".join(chunks)

    @property
    def reusable(self) -> bool:
        return self.state.our_state is h11.DONE and self.state.their_state is h11.DONE

    def recycle(self) -> None:
        self.state.start_next_cycle()
        self.reused = True

    def close(self) -> None:
        self.writer.close()


def _payload(result: Any) -> bytes:
    """A command result as the binary OK payload the command's decode_response reads."""
    if result is None:
        return b""
    if isinstance(result, PolledMessages):
        return result.prefix() + bytes(result.raw)
    if isinstance(result, str):  # the raw personal access token
        return RawPersonalAccessToken(result).to_bytes()
    if isinstance(result, list):
        return encode_records(result)
    return result.to_bytes()  # type: ignore[no-any-return]


class HttpTransport(Transport):
    """``address``: ``host:port``, ``http://host:port`` or ``https://host:port`` (port 3000)."""

    name = "http"

    def __init__(
        self,
        address: str = f"127.0.0.1:{DEFAULT_HTTP_PORT}",
        *,
        ssl: ssl_module.SSLContext | bool | None = None,
        ca_file: str | None = None,
        verify: bool = True,
        connect_timeout: float | None = 10.0,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.address = address
        self.host, self.port = parse_address(address, DEFAULT_HTTP_PORT)
        if ssl is None and address.strip().lower().startswith("https://"):
            ssl = True
        self._ssl = tls_context(ssl, ca_file, verify)
        self.connect_timeout = connect_timeout
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(max_connections)
        self._open = False
        self._broken = False
        self._token: str | None = None
        self._token_expiry = 0.0  # unix seconds
        self._token_lifetime = 0.0

    # -- the Transport contract ------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self._open and not self._broken

    async def connect(self) -> None:
        connection = await self._new_connection()
        self._idle.append(connection)
        self._open, self._broken = True, False

    async def close(self) -> None:
        self._open = False
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    async def request(self, code: int, payload: Payload = b"") -> bytes:
        if not self._open:
            raise errors.NotConnected()
        command = decode_command(code, b"".join(bytes(part) for part in payload_parts(payload)))
        name = command.NAME
        if name == "logout_user" and self._token is None:
            return b""  # like the binary LOGOUT_USER: OK even when not logged in
        call = http_json.encode_request(command)  # FeatureUnavailable for what HTTP cannot do
        if name not in _LOGINS:
            await self._refresh_if_due()
        status, headers, body = await self._call(call.method, call.target, call.body)
        spec = http_json.ENDPOINTS[name]
        if status >= 400:
            if spec.get_single and status in _QUIET_FAILURES:
                return b""
            raise self._error(status, body)
        if name == "get_snapshot":
            return body
        data = self._json(body) if http_json.has_json_result(name) else None
        if name in _LOGINS:
            self._remember(data["access_token"])
        elif name == "logout_user":
            self._token = None
        try:
            return _payload(http_json.decode_result(name, data))
        except (KeyError, TypeError, ValueError, errors.RillError) as error:
            raise errors.InvalidJsonResponse(reason=f"Invalid JSON response: {error!r}") from None

    async def get_json(self, target: str) -> Any:
        """GET one of rill's JSON routes that no command maps (``/cluster``), with this
        transport's login; an error answer raises its ``rill.errors`` class."""
        if not self._open:
            raise errors.NotConnected()
        await self._refresh_if_due()
        status, _, body = await self._call("GET", target, None)
        if status >= 400:
            raise self._error(status, body)
        return self._json(body)

    # -- tokens ----------------------------------------------------------------------------

    def _remember(self, access_token: dict[str, Any]) -> None:
        self._token = access_token["token"]
        self._token_expiry = float(access_token["expiry"])
        self._token_lifetime = max(self._token_expiry - time.time(), 0.0)

    async def _refresh_if_due(self) -> None:
        """Swap the token for a new one in the last tenth of its life (at most a minute)."""
        if self._token is None:
            return
        now = time.time()
        margin = min(self._token_lifetime / 10, 60.0)
        if not self._token_expiry - margin <= now < self._token_expiry:
            return
        status, _, body = await self._call("POST", "/users/refresh-token", {"token": self._token})
        if status == 200:
            self._remember(self._json(body)["access_token"])

    # -- HTTP ------------------------------------------------------------------------------

    def _error(self, status: int, body: bytes) -> errors.RillError:
        try:
            data = json.loads(body)
            code, reason = int(data["id"]), str(data["reason"])
        except (ValueError, KeyError, TypeError):
            return errors.HttpResponseError(status, body[:200].decode("utf-8", "replace"))
        if code == 404:  # a get-single miss outside the get-single commands: not a wire code
            return errors.ResourceNotFound(reason=reason, field=data.get("field"))
        error = errors.from_status(code, reason)
        error.field = data.get("field")
        return error

    @staticmethod
    def _json(body: bytes) -> Any:
        try:
            return json.loads(body)
        except ValueError:
            raise errors.InvalidJsonResponse() from None

    async def _new_connection(self) -> _Connection:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, ssl=self._ssl,
                                    server_hostname=self.host if self._ssl else None),
            self.connect_timeout,
        )
        return _Connection(reader, writer)

    async def _call(self, method: str, target: str, data: Any) -> tuple[int, dict[str, str], bytes]:
        body = None if data is None else json.dumps(data, separators=(",", ":")).encode()
        headers = [("Host", f"{self.host}:{self.port}"), ("User-Agent", "rill-py"),
                   ("Accept", "application/json")]
        if body is not None:
            headers += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        if self._token is not None:
            headers.append(("Authorization", f"Bearer {self._token}"))
        async with self._slots:
            for _ in range(2):
                connection = self._idle.pop() if self._idle else None
                try:
                    if connection is None:
                        connection = await self._new_connection()
                    answer = await connection.exchange(method, target, headers, body)
                except _StaleConnection:
                    connection.close()  # type: ignore[union-attr]
                    continue
                except (OSError, asyncio.TimeoutError, h11.ProtocolError) as error:
                    if connection is not None:
                        connection.close()
                    self._broken = True
                    raise errors.Disconnected(reason=f"Disconnected: {error}") from error
                except BaseException:  # cancelled mid-exchange: the connection's state is unknown
                    if connection is not None:
                        connection.close()
                    raise
                if connection.reusable and self._open:
                    connection.recycle()
                    self._idle.append(connection)
                else:
                    connection.close()
                return answer
        self._broken = True
        raise errors.Disconnected(reason="Disconnected: the server keeps closing connections")

    def __repr__(self) -> str:
        scheme = "https" if self._ssl else "http"
        state = "connected" if self.is_connected else "disconnected"
        return f"<HttpTransport {scheme}://{self.host}:{self.port} {state}>"


register_transport("http", HttpTransport)
