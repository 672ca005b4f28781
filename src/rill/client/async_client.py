"""The asynchronous rill client: connection lifecycle, the one ``execute`` path, reconnects.

Owns: ``AsyncClient``. Its command methods (one per command, named as the command's ``NAME``)
come from ``rill.client.methods.CommandMethods``; this module owns what they all go through:

* ``execute(command)`` -- the single path of every request: encode, send through the transport,
  decode the OK payload with ``command.decode_response``; an error answered with its bare code
  gets its message filled from the command (``rill.client.subjects``);
* connecting: ``connect()`` makes ``connect_attempts`` tries (1 by default, so a wrong address
  or a server that is down fails at once) and then raises ``errors.CannotEstablishConnection``
  naming the address and the OS's reason; a TLS failure is final at the first try;
* reconnecting: when the link is lost, the requests in flight fail with ``errors.Disconnected``
  (they are never re-sent: a command may not be idempotent); the next call reconnects, making up
  to ``max_reconnect_attempts`` tries (6 by default; ``None`` = for ever) with a back-off that
  starts at ``reconnect_interval`` and doubles up to 8 times it (1, 2, 4, 8, 8 s: about 23 s by
  default), then raises ``errors.CannotEstablishConnection``; once reconnected it re-sends the
  last successful login (LOGIN_USER or LOGIN_WITH_PERSONAL_ACCESS_TOKEN, remembered as the
  command itself) before anything else; ``logout_user`` forgets it;
* the optional heartbeat: a PING every ``heartbeat_interval`` seconds while the link is idle;
* the optional leader routing of a cluster (``cluster=ClusterRouting(http_address)``,
  ``rill.client.cluster``): SEND and POLL of one partition go to its leader's own connection,
  everything else to ``address``; ``get_cluster()`` reads ``GET /cluster``.

Invariant: while a (re)connection and its re-login are under way no other request is written,
so the server always sees LOGIN before the command that triggered the reconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl as ssl_module
from typing import Any, TypeVar

from rill import errors
from rill.client import tcp as _tcp  # noqa: F401  (registers the "tcp" transport)
from rill.client.cluster import ClusterRouting, LeaderRouter, route_key
from rill.client.link import os_reason as _os_reason
from rill.client.methods import CommandMethods
from rill.client.subjects import subject
from rill.client.transport import Payload, Transport, TransportFactory, transport_factory
from rill.protocol.buffer import Writer
from rill.protocol.iggy.commands.base import Command
from rill.protocol.iggy.commands.messages import SendMessages
from rill.protocol.iggy.commands.system import Ping

log = logging.getLogger(__name__)

T = TypeVar("T")

_LOGIN_NAMES = frozenset({"login_user", "login_with_personal_access_token"})
_LOGOUT_NAME = "logout_user"
_SPLIT_SEND_ABOVE = 64 * 1024  # send regions at least this big are written without copying
_MAX_BACKOFF = 8  # the wait between connection tries grows up to this many reconnect_intervals


def reconnect_delay(interval: float, attempt: int) -> float:
    """The wait after failed try number ``attempt`` (1-based): ``interval`` doubling up to 8
    times it (1, 2, 4, 8, 8, ... for 1 s)."""
    return interval * min(2 ** (attempt - 1), _MAX_BACKOFF)


def command_payload(command: Command) -> Payload:
    """The request payload of ``command``; a big SEND region travels as its own buffer."""
    encode_parts = getattr(command, "encode_parts", None)
    if encode_parts is not None:
        return encode_parts()  # type: ignore[no-any-return]
    if isinstance(command, SendMessages) and len(command.messages) >= _SPLIT_SEND_ABOVE:
        writer = Writer()
        command.stream_id.encode(writer)
        command.topic_id.encode(writer)
        command.partitioning.encode(writer)
        return (bytes(writer.buffer), command.messages)
    return command.encode()


class AsyncClient(CommandMethods):
    """An asyncio client for a rill (or Iggy 0.4.x) server.

    ``transport`` is a registered name (``"tcp"``), a ``Transport`` instance, or a factory
    called as ``factory(address, ssl=..., connect_timeout=...)`` (plus ``ca_file=``/``verify=``
    when given). ``timeout`` bounds each request (``None`` = no bound); ``connect_timeout``
    each connection try. ``connect_attempts`` is the number of tries of ``connect()``;
    ``max_reconnect_attempts`` the number of tries after an established link dropped (``None``
    = for ever); between tries the client waits ``reconnect_interval``, doubling up to 8 times
    it. ``reconnect=False`` makes a lost link final (``errors.NotConnected``). Certificates (QUIC always, TCP and HTTP with TLS) are verified against the
    system's CAs or ``ca_file``; ``verify_certificate=False`` is the explicit opt-out for a
    self-signed local server. Use ``async with AsyncClient(...) as client:``.
    """

    def __init__(
        self,
        address: str = "127.0.0.1:8090",
        *,
        transport: str | Transport | TransportFactory = "tcp",
        reconnect: bool = True,
        reconnect_interval: float = 1.0,
        max_reconnect_attempts: int | None = 6,
        connect_attempts: int = 1,
        heartbeat_interval: float | None = None,
        ssl: ssl_module.SSLContext | bool | None = None,
        ca_file: str | None = None,
        verify_certificate: bool = True,
        timeout: float | None = 30.0,
        connect_timeout: float | None = 10.0,
        cluster: ClusterRouting | None = None,
    ) -> None:
        self.address = address
        if isinstance(transport, Transport):
            self._transport = transport
        else:
            factory = transport_factory(transport) if isinstance(transport, str) else transport
            certificates: dict[str, Any] = {}
            if ca_file is not None:
                certificates["ca_file"] = str(ca_file)
            if not verify_certificate:
                certificates["verify"] = False
            self._transport = factory(address, ssl=ssl, connect_timeout=connect_timeout,
                                      **certificates)
        self.reconnect = reconnect
        self.reconnect_interval = reconnect_interval
        self.max_reconnect_attempts = max_reconnect_attempts
        self.connect_attempts = connect_attempts
        self.heartbeat_interval = heartbeat_interval
        self.timeout = timeout
        self._opened = False  # connect() called and close() not yet
        self._ready = False  # connected and re-logged-in: requests may be written
        self._lock = asyncio.Lock()
        self._login: Command | None = None  # the last successful login, re-sent on reconnect
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._last_activity = 0.0
        self._router: LeaderRouter | None = None
        if cluster is not None:
            options: dict[str, Any] = {"ca_file": ca_file, "verify_certificate": verify_certificate,
                                       "timeout": timeout, "connect_timeout": connect_timeout}

            def make_client(node_address: str, name: str) -> AsyncClient:
                tls = ssl if name != "http" else None  # HTTP: TLS when the address says https
                return AsyncClient(node_address, transport=name, reconnect=False, ssl=tls,
                                   **options)

            transport_name = transport if isinstance(transport, str) else (
                self._transport.name or "tcp")
            self._router = LeaderRouter(cluster, self, transport_name, make_client)

    # --- lifecycle -----------------------------------------------------------------------------

    @property
    def transport(self) -> Transport:
        return self._transport

    @property
    def is_connected(self) -> bool:
        return self._ready and self._transport.is_connected

    async def connect(self) -> None:
        """Open the connection (retrying as configured); start the heartbeat if one is set."""
        self._opened = True
        async with self._lock:
            if not self.is_connected:
                await self._establish(self.connect_attempts)
        if self.heartbeat_interval and self._heartbeat_task is None:
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat())

    async def close(self) -> None:
        """Close the connection and stop the heartbeat; later calls raise NotConnected."""
        self._opened = False
        self._ready = False
        task, self._heartbeat_task = self._heartbeat_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._router is not None:
            await self._router.close()
        await self._transport.close()

    @property
    def login_command(self) -> Command | None:
        """The last successful login command (re-sent on reconnects and to other nodes)."""
        return self._login

    @property
    def cluster_router(self) -> LeaderRouter | None:
        """The leader routing of ``cluster=`` (None without it)."""
        return self._router

    async def get_cluster(self) -> dict[str, Any]:
        """The cluster as the server sees it (``GET /cluster``: members, controller, every
        partition's leader, epoch, ISR and follower lag; ``{"mode": "standalone", ...}`` on a
        standalone server). An HTTP route: over the "http" transport, or with ``cluster=``
        (read from its HTTP address); other transports raise ``errors.FeatureUnavailable``."""
        get_json = getattr(self._transport, "get_json", None)
        if get_json is None:
            if self._router is not None:
                return await self._router.status_from(self._router.routing.http_address)
            raise errors.FeatureUnavailable(reason=(
                "GET /cluster is an HTTP route: use the http transport, or cluster=ClusterRouting"))
        if not (self._ready and self._transport.is_connected):
            await self._reconnect()
        async with asyncio.timeout(self.timeout):
            return await get_json("/cluster")  # type: ignore[no-any-return]

    async def __aenter__(self) -> AsyncClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- the request path ----------------------------------------------------------------------

    async def execute(self, command: Command) -> Any:
        """Send any command and return its decoded OK response (the path of every method)."""
        router = self._router
        if router is not None and self._login is not None:
            key = route_key(command)
            if key is not None:
                return await router.execute(command, key)
        return await self._execute_here(command)

    async def _execute_here(self, command: Command) -> Any:
        """``execute`` on this client's own connection."""
        try:
            payload = await self.request(command.CODE, command_payload(command))
        except errors.RillError as error:
            error.about(subject(command))  # the wire gave the code only: name what was asked
            raise
        result = command.decode_response(payload)
        if command.NAME in _LOGIN_NAMES:
            self._login = command
        elif command.NAME == _LOGOUT_NAME:
            self._login = None
        return result

    async def request(self, code: int, payload: Payload = b"") -> bytes | memoryview:
        """Send a raw request (reconnecting first if needed); return the raw OK payload."""
        if not (self._ready and self._transport.is_connected):
            await self._reconnect()
        self._last_activity = asyncio.get_running_loop().time()
        async with asyncio.timeout(self.timeout):
            return await self._transport.request(code, payload)

    # --- reconnecting --------------------------------------------------------------------------

    async def _reconnect(self) -> None:
        if not self._opened:
            raise errors.NotConnected(reason="Not connected: call connect() first")
        async with self._lock:
            if self._ready and self._transport.is_connected:
                return  # another caller reconnected while we waited
            if not self.reconnect:
                raise errors.NotConnected(reason="Not connected: the link was lost")
            log.info("rill client: connection to %s lost, reconnecting", self.address)
            await self._transport.close()
            await self._establish(self.max_reconnect_attempts)

    async def _establish(self, limit: int | None) -> None:
        """Connect (up to ``limit`` tries, ``None`` = for ever) and replay the remembered login.
        Caller holds the lock."""
        self._ready = False
        attempts = 0
        while True:
            attempts += 1
            try:
                await self._transport.connect()
                break
            except ssl_module.SSLError as error:  # retrying cannot help: say why at once
                if isinstance(error, ssl_module.SSLCertVerificationError):
                    raise errors.InvalidTlsCertificate(reason=(
                        f"Invalid TLS certificate: the server's certificate is not trusted "
                        f"({error.verify_message}); give its certificate or CA as ca_file, or "
                        "opt out with verify_certificate=False")) from error
                raise errors.CannotEstablishConnection(reason=(
                    f"Cannot establish connection to {self.address}: the TLS handshake failed "
                    f"({error.reason or error}); does the server speak TLS there?")) from error
            except (OSError, asyncio.TimeoutError) as error:
                if limit is not None and attempts >= max(limit, 1):
                    tries = f"{attempts} attempts" if attempts > 1 else "1 attempt"
                    raise errors.CannotEstablishConnection(reason=(
                        f"Cannot establish connection to {self.address}: {_os_reason(error)} "
                        f"({tries})")) from error
                delay = reconnect_delay(self.reconnect_interval, attempts)
                log.warning("rill client: connect attempt %d%s to %s failed: %s; next in %.1f s",
                            attempts, f" of {limit}" if limit else "", self.address,
                            _os_reason(error), delay)
                await asyncio.sleep(delay)
        login = self._login
        if login is not None:
            try:
                async with asyncio.timeout(self.timeout):
                    await self._transport.request(login.CODE, login.encode())
            except errors.Disconnected:
                raise
            except errors.RillError:
                # Rejected (password changed, token expired...): forget it, keep the link so
                # the caller can log in again, and tell the caller why.
                self._login = None
                self._ready = True
                raise
        self._ready = True

    # --- heartbeat -----------------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        interval = self.heartbeat_interval or 0.0
        loop = asyncio.get_running_loop()
        while self._opened:
            delay = self._last_activity + interval - loop.time()
            if delay > 0:  # something was sent recently: the link is not idle
                await asyncio.sleep(delay)
                continue
            if not self.is_connected:  # never reconnect from here; the next call will
                await asyncio.sleep(interval)
                continue
            try:
                await self.execute(Ping())
            except (errors.RillError, asyncio.TimeoutError) as error:
                log.debug("rill client: heartbeat failed: %s", error)
                self._last_activity = loop.time()

    def __repr__(self) -> str:
        state = "connected" if self.is_connected else "disconnected"
        return f"<AsyncClient {self.address} via {self._transport.name or 'custom'} ({state})>"
