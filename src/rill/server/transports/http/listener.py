"""Running the HTTP app: uvicorn's server as one task in rill's own event loop.

Owns: ``HttpListener``: binds the socket itself (so port 0 works and the bound port is known
before the first request, and a bind failure is an ordinary OSError rather than uvicorn's
``sys.exit``), loads the token secret, builds the app, runs ``uvicorn.Server.serve`` as a task
with uvicorn's signal handling switched off (the process's signals belong to
``rill.server.app``), and stops it gracefully. TLS when ``[http.tls] enabled``: uvicorn's
``ssl_certfile``/``ssl_keyfile`` from the configured PEM paths.

The protocol adds rill's limits to uvicorn's (which alone keeps a connection that never
completes a request for ever: its keep-alive timer restarts at every byte):

* a connection must deliver a whole request head within ``head_timeout`` (``[connections]
  unauthenticated_timeout``) of opening or of its last response;
* a request body must arrive whole within ``[connections] request_timeout`` of its head, and,
  once it has been arriving for ``RATE_GRACE`` (5 s), at ``min_request_rate`` on average (time
  the app held reading back does not count): 249 bodies trickled in cannot hold every
  connection;
* at most ``[connections] max_connections_per_address`` connections from one client address
  (counted for this listener alone); more are closed at accept;
* it is the ``ReplyLink`` (``replies.py``) its replies write through: back-pressure and
  dropping a connection that does not read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import struct
from typing import Iterator, Mapping

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from rill.server.config import HttpConfig, split_address
from rill.server.core.core import Core
from rill.server.metrics import Metrics
from rill.server.transports.http.app import create_app
from rill.server.transports.http.replies import LINK
from rill.server.transports.limits import RATE_GRACE, UNLIMITED, AddressCounts, ConnectionLimits

log = logging.getLogger(__name__)

GRACEFUL_SHUTDOWN_SECONDS = 5
LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() resets the connection
BODY_CHECK_PERIOD = 0.5  # s between two looks at a request body still arriving


class _EmbeddedServer(uvicorn.Server):
    """uvicorn's server without its own signal handlers."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # uvicorn >= 0.29
        yield

    def install_signal_handlers(self) -> None:  # older uvicorn
        return None


class _LimitedProtocol(H11Protocol):
    """uvicorn's h11 protocol, with rill's limits: connections per client address, request
    heads and bodies in time, and the ``ReplyLink`` its replies write through."""

    head_timeout = 10.0  # a subclass per listener sets these four
    limits = UNLIMITED
    addresses = AddressCounts()  # the listener's own

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_cycle: object = None  # the request whose body is arriving
        self._body_since = 0.0  # ... its bytes since this moment
        self._body_bytes = 0
        peer = transport.get_extra_info("peername")
        self._address: str | None = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        if not self.addresses.admit(self._address):
            self._address = None
            transport.abort()  # nothing was made for it
            return
        super().connection_made(transport)
        self.app_state = {**self.app_state, LINK: self}  # scope["state"] of its requests
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        cycle = self.cycle
        if cycle is None or not cycle.more_body or cycle.response_complete:
            return
        if cycle is not self._body_cycle:  # a request head came, its body did not (all)
            self._body_cycle = cycle
            self._body_since = self.loop.time()
            self._body_bytes = 0
            self._arm_body_timer()
        else:
            self._body_bytes += len(data)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._address is None:  # refused
            return
        self.addresses.release(self._address)
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        if math.isfinite(self.head_timeout):
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_overdue, self.cycle)

    def _head_overdue(self, cycle_when_armed: object) -> None:
        # a new request began since: its own response re-arms the timer
        if self.cycle is cycle_when_armed and not self.transport.is_closing():
            log.debug("HTTP connection %s closed: no request head within %.0f s",
                      self.client, self.head_timeout)
            self.transport.close()

    # -- request bodies: within request_timeout, at min_request_rate after RATE_GRACE -------

    def _arm_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        limits = self.limits
        if math.isfinite(limits.request_timeout) or limits.min_request_rate:
            self._body_timer = self.loop.call_later(BODY_CHECK_PERIOD, self._check_body)

    def _check_body(self) -> None:
        self._body_timer = None
        cycle = self._body_cycle
        if (cycle is not self.cycle or cycle is None or not cycle.more_body
                or cycle.response_complete or self.transport.is_closing()):
            self._body_cycle = None
            return
        now = self.loop.time()
        if self.flow.read_paused:  # the app has not taken what came: the client is not late
            self._body_since, self._body_bytes = now, 0
        else:
            limits = self.limits
            elapsed = now - self._body_since
            rate = limits.min_request_rate
            reason = None
            if elapsed > limits.request_timeout:
                reason = f"its request body did not arrive within request_timeout " \
                         f"({limits.request_timeout:.0f} s)"
            elif rate and elapsed > RATE_GRACE and self._body_bytes < rate * elapsed:
                reason = f"its request body arrived slower than min_request_rate ({rate:.0f} B/s)"
            if reason is not None:
                self.drop(reason)
                return
        self._arm_body_timer()

    # -- the ReplyLink of its replies (replies.py) ------------------------------------------

    @property
    def gone(self) -> bool:
        return self.transport.is_closing() or (self.cycle is not None and self.cycle.disconnected)

    @property
    def writing_paused(self) -> bool:
        return self.flow.write_paused

    async def writable(self) -> None:
        await self.flow.drain()

    def drop(self, reason: str) -> None:
        log.info("HTTP connection %s closed: %s", self._address, reason)
        if self.cycle is not None:
            self.cycle.disconnected = True  # (as connection_lost will say): the app may stop
        sock = self.transport.get_extra_info("socket")
        if sock is not None:  # a reset: the kernel drops what the client left unread, too
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
        self.transport.abort()


def bind(address: str) -> socket.socket:
    host, port = split_address(address, "http.address")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=1024)
    sock.setblocking(False)
    return sock


class HttpListener:
    def __init__(self, core: Core, config: HttpConfig, metrics: Metrics | None = None,
                 head_timeout: float = 10.0, max_connections: int | None = None,
                 listeners: Mapping[str, tuple[str, int]] | None = None,
                 limits: ConnectionLimits = UNLIMITED) -> None:
        self.core = core
        self.listeners = listeners  # the server's bound addresses by protocol (GET /server)
        self.config = config
        self.head_timeout = head_timeout
        self.max_connections = max_connections  # connections and requests at once (503 beyond)
        self.limits = limits  # request_timeout, min_request_rate, max_connections_per_address
        self.metrics = metrics if metrics is not None else core.metrics
        self._server: _EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> tuple[str, int]:
        """Start serving; returns the bound (host, port)."""
        config = self.config
        assert self.core.access_tokens is not None, "the core makes them at start when HTTP is on"
        app = create_app(self.core, config, self.core.access_tokens, self.metrics, self.listeners,
                         self.limits)
        sock = bind(config.address)
        tls = config.tls
        server_config = uvicorn.Config(
            app, log_config=None, access_log=False, lifespan="off", ws="none",
            http=type("HttpProtocol", (_LimitedProtocol,), {
                "head_timeout": self.head_timeout, "limits": self.limits,
                "addresses": AddressCounts(self.limits.max_connections_per_address)}),
            # uvicorn's own start/stop lines are noise next to rill's "listening on" line
            log_level=max(logging.WARNING, logging.getLogger("rill").getEffectiveLevel()),
            server_header=False, proxy_headers=False,
            limit_concurrency=self.max_connections,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
            ssl_certfile=tls.certificate if tls.enabled else None,
            ssl_keyfile=tls.key if tls.enabled else None,
        )
        self._server = _EmbeddedServer(server_config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="rill-http")
        while not self._server.started:
            if self._task.done():
                sock.close()
                task, self._server, self._task = self._task, None, None
                task.result()  # raises what went wrong
                raise RuntimeError("the HTTP server stopped during start-up")
            await asyncio.sleep(0.005)
        host, port = sock.getsockname()[:2]
        return host, port

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            try:
                await self._task
            except Exception:  # noqa: BLE001 - stopping must not fail the shutdown
                log.exception("the HTTP server did not stop cleanly")
            self._server = self._task = None
