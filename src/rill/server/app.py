"""Builds the server: storage -> core -> transports; starts, runs until a signal, stops cleanly.

Owns: the process-level lifecycle. On start it prints one line per listener
(``rill listening on tcp 127.0.0.1:8090``, ``rill listening on quic 127.0.0.1:8080`` (UDP),
``rill listening on http 127.0.0.1:3000``) so
scripts and tests can find a port chosen by the operating system (port 0).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from rill.server.config import ServerConfig, split_address
from rill.server.core.core import Core
from rill.server.transports.certificates import server_ssl_context
from rill.server.transports.tcp import TcpListener

log = logging.getLogger("rill")


class Server:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.core = Core(config)
        self.tcp: TcpListener | None = None
        self.quic = None  # QuicListener, imported only when QUIC is enabled (aioquic)
        self.http = None  # HttpListener, imported only when HTTP is enabled
        self.addresses: dict[str, tuple[str, int]] = {}

    async def start(self) -> None:
        await self.core.start()
        http = self.config.http
        if http.enabled and http.metrics.enabled:
            from rill.server.metrics import METRICS

            METRICS.instrument(self.core)  # every transport's commands are measured
        if self.config.tcp.enabled:
            host, port = split_address(self.config.tcp.address, "tcp.address")
            tls = self.config.tcp.tls
            context = server_ssl_context(tls.certificate, tls.key) if tls.enabled else None
            self.tcp = TcpListener(self.core, host, port, self.config.tcp.max_frame_size, context)
            self.addresses["tcp"] = await self.tcp.start()
        if self.config.quic.enabled:
            from rill.server.transports.quic import QuicListener

            self.quic = QuicListener.from_config(self.core, self.config.quic)
            self.addresses["quic"] = await self.quic.start()
        if http.enabled:
            from rill.server.transports.http import HttpListener

            self.http = HttpListener(self.core, http)
            self.addresses["http"] = await self.http.start()

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.stop()
        if self.quic is not None:
            await self.quic.stop()
        if self.tcp is not None:
            await self.tcp.stop()
        await self.core.stop()


def install_event_loop_policy() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def serve(config: ServerConfig) -> None:
    server = Server(config)
    await server.start()
    for name, (host, port) in server.addresses.items():
        print(f"rill listening on {name} {host}:{port}", flush=True)
    log.info("data directory %s, fsync %s", config.data_path.resolve(), config.system.fsync)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()
        print("rill stopped", flush=True)


def run(config: ServerConfig) -> None:
    logging.basicConfig(
        level=config.logging.level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    install_event_loop_policy()
    asyncio.run(serve(config))
