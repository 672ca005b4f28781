"""Running the HTTP app: uvicorn's server as one task in rill's own event loop.

Owns: ``HttpListener``: binds the socket itself (so port 0 works and the bound port is known
before the first request, and a bind failure is an ordinary OSError rather than uvicorn's
``sys.exit``), loads the token secret, builds the app, runs ``uvicorn.Server.serve`` as a task
with uvicorn's signal handling switched off (the process's signals belong to
``rill.server.app``), and stops it gracefully. TLS when ``[http.tls] enabled``: uvicorn's
``ssl_certfile``/``ssl_keyfile`` from the configured PEM paths. A connection must deliver a
whole request head within ``head_timeout`` (``[connections] unauthenticated_timeout``) of
opening or of its last response, else it is closed: uvicorn alone keeps a connection that
never completes a request for ever (its keep-alive timer restarts at every byte).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
from typing import Iterator, Mapping

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from rill.server.config import HttpConfig, split_address
from rill.server.core.core import Core
from rill.server.metrics import Metrics
from rill.server.transports.http.app import create_app

log = logging.getLogger(__name__)

GRACEFUL_SHUTDOWN_SECONDS = 5


class _EmbeddedServer(uvicorn.Server):
    """uvicorn's server without its own signal handlers."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # uvicorn >= 0.29
        yield

    def install_signal_handlers(self) -> None:  # older uvicorn
        return None


class _HeadTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing connections whose next request head is overdue."""

    head_timeout = 10.0  # a subclass per listener sets its own

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._arm_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
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


def bind(address: str) -> socket.socket:
    host, port = split_address(address, "http.address")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=1024)
    sock.setblocking(False)
    return sock


class HttpListener:
    def __init__(self, core: Core, config: HttpConfig, metrics: Metrics | None = None,
                 head_timeout: float = 10.0, max_connections: int | None = None,
                 listeners: Mapping[str, tuple[str, int]] | None = None) -> None:
        self.core = core
        self.listeners = listeners  # the server's bound addresses by protocol (GET /server)
        self.config = config
        self.head_timeout = head_timeout
        self.max_connections = max_connections  # connections and requests at once (503 beyond)
        self.metrics = metrics if metrics is not None else core.metrics
        self._server: _EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> tuple[str, int]:
        """Start serving; returns the bound (host, port)."""
        config = self.config
        assert self.core.access_tokens is not None, "the core makes them at start when HTTP is on"
        app = create_app(self.core, config, self.core.access_tokens, self.metrics, self.listeners)
        sock = bind(config.address)
        tls = config.tls
        server_config = uvicorn.Config(
            app, log_config=None, access_log=False, lifespan="off", ws="none",
            http=type("HttpProtocol", (_HeadTimeoutProtocol,), {"head_timeout": self.head_timeout}),
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
