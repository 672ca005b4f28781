"""Builds the server: storage -> core -> transports; starts, runs until a signal, stops cleanly.

Owns: the process-level lifecycle. On start it prints one line per listener
(``rill listening on tcp 127.0.0.1:8090``, ``rill listening on quic 127.0.0.1:8080`` (UDP),
``rill listening on http 127.0.0.1:3000``, ``rill listening on kafka 127.0.0.1:9092``,
``rill listening on tank 127.0.0.1:11011``) so
scripts and tests can find a port chosen by the operating system (port 0).

Descriptors: ``run`` raises the soft open-file limit (RLIMIT_NOFILE) to the hard limit where
the system allows it, before the core sizes its descriptor cache from it (``[system]
max_open_files``), and logs what it did.

Refusals: a start that cannot be made safely ends with one line on stderr and exit code 1
(``StartupRefused``: a damaged or emptied metadata store, a listener on a non-loopback address
while the root user still has the default password (the Kafka listener counts: SASL PLAIN
takes that password too), a Kafka listener on a non-loopback address with ``[kafka]
anonymous_user`` set: connections there would act as that user without logging in, a TANK
listener on a non-loopback address without ``[tank] user``, or naming a user that does not
exist, ...). The process creates its files private to its user (umask 077).
"""

from __future__ import annotations

import asyncio
import dataclasses
import contextlib
import faulthandler
import ipaddress
import logging
import os
import signal
import socket
import sys
import time
from typing import Iterator

from rill.errors import RillError
from rill.server.config import ServerConfig, split_address
from rill.server.core.core import Core
from rill.server.core.reconciliation import StartupRefused
from rill.server.protocols.iggy import IGGY
from rill.server.protocols.iggy.groups import IggyGroupMembers
from rill.server.logs import configure_logging
from rill.server.storage import descriptors
from rill.server.storage.data_lock import DataDirectoryInUse
from rill.server.auth.certificates import server_ssl_context
from rill.server.transports.limits import ConnectionLimits, RequestMemory, Supervisor
from rill.server.transports.tcp import TcpListener

log = logging.getLogger("rill")


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address (unresolvable: no)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


@contextlib.contextmanager
def refused_on_os_error(what: str) -> Iterator[None]:
    """Turn an OSError of a start-up step into ``StartupRefused``: "<what>: <reason>"."""
    try:
        yield
    except OSError as error:
        reason = error.strerror or str(error)
        if error.filename is not None and str(error.filename) not in what:
            reason = f"{reason}: {error.filename}"
        raise StartupRefused(f"{what}: {reason}") from error


class Server:
    def __init__(self, config: ServerConfig, recover_metadata: bool = False) -> None:
        self.config = config
        with refused_on_os_error(f"cannot use the data directory {config.data_path}"):
            self.core = Core(config, recover_metadata, group_membership=IggyGroupMembers())
        self.tcp: TcpListener | None = None
        self.kafka: TcpListener | None = None
        self.tank: TcpListener | None = None
        self.quic = None  # QuicListener, imported only when QUIC is enabled (aioquic)
        self.http = None  # HttpListener, imported only when HTTP is enabled
        self.addresses: dict[str, tuple[str, int]] = {}
        connections = config.connections
        self.limits = ConnectionLimits(
            connections.max_request_size_unauthenticated, connections.unauthenticated_timeout,
            connections.idle_timeout, connections.request_timeout, connections.max_connections,
            connections.min_request_rate, connections.max_connections_per_address,
        )
        self.memory = RequestMemory(connections.request_memory)  # shared by TCP and QUIC
        self.supervisor = Supervisor(self.limits)

    def exposed_listeners(self) -> list[str]:
        """The enabled listeners whose address is not loopback, as "name HOST:PORT"."""
        config = self.config
        listeners = (("tcp", config.tcp), ("quic", config.quic), ("http", config.http),
                     ("kafka", config.kafka))
        return [
            f"{name} {section.address}" for name, section in listeners
            if section.enabled and not is_loopback(split_address(section.address)[0])
        ]

    def _check_descriptor_room(self) -> None:
        """Warn when connections and segment files together may need more descriptors than
        the process may open (a connection refused at accept, or a file open that fails)."""
        limit = descriptors.open_file_limit()
        files = descriptors.shared().budget
        connections = self.config.connections.max_connections
        if files + connections > limit:
            log.warning("max_connections (%d) and max_open_files (%d) need more descriptors "
                        "than the open-file limit (%d) allows: lower one of them, or raise the "
                        "limit (ulimit -n)", connections, files, limit)

    def _refuse_default_password(self) -> None:
        exposed = self.exposed_listeners()
        if (exposed and not self.config.root.allow_default_password
                and self.core.users.root_has_default_password()):
            raise StartupRefused(
                f"refusing to listen on {', '.join(exposed)}: the root user still has the "
                f"default password. Change it first (rill user change-password), or set "
                f"[root] allow_default_password = true (RILL_ROOT_ALLOW_DEFAULT_PASSWORD=true) "
                f"to start anyway"
            )

    def _refuse_exposed_kafka(self) -> None:
        kafka = self.config.kafka
        if (kafka.enabled and kafka.anonymous_user
                and not is_loopback(split_address(kafka.address)[0])):
            raise StartupRefused(
                f"refusing to listen on kafka {kafka.address}: [kafka] anonymous_user lets "
                f"connections act as {kafka.anonymous_user!r} without logging in, which is for "
                f"local development: use a loopback address, or unset it "
                f"(RILL_KAFKA_ANONYMOUS_USER) so that clients log in by SASL")

    def _tank_user_id(self) -> int:
        """The user TANK connections act as (``[tank] user``): the root user by default, only
        on loopback; TANK has no authentication of its own."""
        from rill.server.core.users import ROOT_USER_ID

        tank = self.config.tank
        name = tank.user.strip()
        exposed = not is_loopback(split_address(tank.address)[0])
        refusal = (f"refusing to listen on tank {tank.address}: TANK clients cannot log in and "
                   f"would act as ")
        if not name:
            if exposed:
                raise StartupRefused(
                    refusal + "the root user; set [tank] user (RILL_TANK_USER) to the rill "
                    "user whose permissions TANK clients get, or listen on a loopback address")
            return ROOT_USER_ID
        user = self.core.users.find_by_username(name)
        if user is None:
            raise StartupRefused(f"[tank] user {name!r}: no such user")
        rights = privileged_rights(user.permissions)
        if rights and exposed and not tank.allow_privileged_user:
            raise StartupRefused(
                refusal + f"{name!r}, who holds global {', '.join(rights)}; give TANK a user "
                "with per-stream rights, listen on a loopback address, or set [tank] "
                "allow_privileged_user (RILL_TANK_ALLOW_PRIVILEGED_USER) to accept it")
        return user.id

    async def start(self) -> None:
        await self.core.start()
        try:
            self._refuse_default_password()
            self._refuse_exposed_kafka()
            if self.config.tank.enabled:
                self._tank_user_id()
            await self._start_listeners()
        except BaseException:
            await self.stop()
            raise

    async def _start_listeners(self) -> None:
        self._check_descriptor_room()
        http = self.config.http
        if http.enabled and http.metrics.enabled:
            self.core.metrics.instrument(self.core)  # every transport's commands are measured
        if self.config.tcp.enabled:
            host, port = split_address(self.config.tcp.address, "tcp.address")
            tls = self.config.tcp.tls
            context = None
            if tls.enabled:
                with refused_on_os_error(f"cannot load [tcp.tls] certificate {tls.certificate} "
                                         f"and key {tls.key}"):
                    context = server_ssl_context(tls.certificate, tls.key)
            self.tcp = TcpListener(self.core, IGGY, host, port, self.config.tcp.max_frame_size,
                                   context, self.limits, self.memory, self.supervisor,
                                   sendfile=self.config.tcp.sendfile)
            with refused_on_os_error(f"cannot listen on tcp {self.config.tcp.address}"):
                self.addresses["tcp"] = await self.tcp.start()
        if self.config.kafka.enabled:
            await self._start_kafka()
        if self.config.tank.enabled:
            await self._start_tank()
        if self.config.quic.enabled:
            from rill.server.transports.quic import QuicListener

            with refused_on_os_error(f"cannot listen on quic {self.config.quic.address}"):
                self.quic = QuicListener.from_config(self.core, IGGY, self.config.quic, self.limits,
                                                     self.memory, self.supervisor)
                self.addresses["quic"] = await self.quic.start()
        if http.enabled:
            from rill.server.transports.http import HttpListener

            self.http = HttpListener(self.core, http,
                                     head_timeout=self.limits.unauthenticated_timeout,
                                     max_connections=self.config.connections.max_connections,
                                     limits=self.limits,
                                     listeners=self.addresses)
            if http.tls.enabled:  # uvicorn would say only "No such file or directory"
                with refused_on_os_error(f"cannot load [http.tls] certificate "
                                         f"{http.tls.certificate} and key {http.tls.key}"):
                    server_ssl_context(http.tls.certificate, http.tls.key)
            with refused_on_os_error(f"cannot listen on http {http.address}"):
                self.addresses["http"] = await self.http.start()

    async def _start_kafka(self) -> None:
        from rill.server.protocols.kafka import KafkaProtocol, KafkaSettings

        kafka = self.config.kafka
        host, port = split_address(kafka.address, "kafka.address")
        context = None
        if kafka.tls.enabled:
            with refused_on_os_error(f"cannot load [kafka.tls] certificate "
                                     f"{kafka.tls.certificate} and key {kafka.tls.key}"):
                context = server_ssl_context(kafka.tls.certificate, kafka.tls.key)
        from rill.server.protocols.kafka.group_apis import member_source

        protocol = KafkaProtocol(KafkaSettings(kafka.stream, host, port), kafka.anonymous_user)
        self.core.member_sources.append(member_source(self.core, kafka.stream))  # the console
        self.kafka = TcpListener(self.core, protocol, host, port, self.config.tcp.max_frame_size,
                                 context, self.limits, self.memory, self.supervisor,
                                 sendfile=kafka.sendfile)
        with refused_on_os_error(f"cannot listen on kafka {kafka.address}"):
            bound = await self.kafka.start()
        self.addresses["kafka"] = bound
        if kafka.advertised_address:
            advertised = split_address(kafka.advertised_address, "kafka.advertised_address")
        else:
            advertised = bound
        # the address clients are told is known once the port is bound (port 0)
        protocol.settings = KafkaSettings(
            kafka.stream, advertised[0], advertised[1], kafka.auto_create_topics,
            group_initial_rebalance_delay=kafka.group_initial_rebalance_delay,
            max_message_bytes=self.config.tcp.max_frame_size,
            segment_bytes=self.config.system.segment.size,
            default_message_expiry=self.core.topics.default_message_expiry(),
            default_max_topic_size=self.config.system.topic.max_size,
            session_lifetime=kafka.session_lifetime)

    async def _start_tank(self) -> None:
        from rill.server.protocols.tank import TankProtocol, TankSettings

        tank = self.config.tank
        host, port = split_address(tank.address, "tank.address")
        context = None
        if tank.tls.enabled:
            with refused_on_os_error(f"cannot load [tank.tls] certificate "
                                     f"{tank.tls.certificate} and key {tank.tls.key}"):
                context = server_ssl_context(tank.tls.certificate, tank.tls.key)
        protocol = TankProtocol(TankSettings(self.config.tank_stream, time.time()),
                                self._tank_user_id())
        limits = dataclasses.replace(self.limits, idle_timeout=tank.idle_timeout)  # TANK: 16 s
        self.tank = TcpListener(self.core, protocol, host, port, tank.max_frame_size,
                                context, limits, self.memory, self.supervisor)
        with refused_on_os_error(f"cannot listen on tank {tank.address}"):
            self.addresses["tank"] = await self.tank.start()

    async def stop(self) -> None:
        if self.tank is not None:
            await self.tank.stop()
        if self.kafka is not None:
            await self.kafka.stop()
        if self.http is not None:
            await self.http.stop()
        if self.quic is not None:
            await self.quic.stop()
        if self.tcp is not None:
            await self.tcp.stop()
        self.supervisor.stop()
        await self.core.stop()


def raise_open_file_limit() -> None:
    """Raise the soft RLIMIT_NOFILE to the hard limit (where allowed), and log the outcome."""
    try:
        import resource
    except ImportError:  # not a Unix
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        log.info("open-file limit %s (the hard limit: cannot be raised)", soft)
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as error:
        log.warning("open-file limit %s: cannot raise it to the hard limit %s: %s",
                    soft, hard, error)
        return
    log.info("open-file limit raised from %s to %s (the hard limit)", soft,
             "unlimited" if hard == resource.RLIM_INFINITY else hard)


def privileged_rights(permissions) -> list[str]:
    """The global manage and send rights of ``permissions`` (a ``Permissions`` or None): what a
    client acting as that user without a password must not get from the network."""
    if permissions is None:
        return []
    granted = permissions.global_permissions
    return [name for name in _PRIVILEGED_RIGHTS if getattr(granted, name)]


_PRIVILEGED_RIGHTS = ("manage_servers", "manage_users", "manage_streams", "manage_topics",
                      "send_messages")


def tank_exposure(config: ServerConfig, server: Server) -> str:
    """A warning when the TANK listener is reachable off loopback ("" when it is not): its
    clients act as ``[tank] user`` without a password."""
    address = server.addresses.get("tank")
    if address is None or is_loopback(address[0]):
        return ""
    user = config.tank.user.strip() or "the root user"
    return (f"TANK is exposed on {address[0]}:{address[1]}: every client that reaches it acts as "
            f"{user!r} without a password")


def start_summary(config: ServerConfig, server: Server) -> str:
    """The one line that says what started: version, data, listeners, fsync, what was loaded,
    and the warning of an exposed TANK listener."""
    from rill import __version__

    fsync = config.system.fsync
    if fsync == "interval":
        fsync = f"interval ({config.system.fsync_interval:g} s)"
    listeners = ", ".join(f"{name} {host}:{port}" for name, (host, port) in server.addresses.items())
    exposure = tank_exposure(config, server)
    return (f"rill {__version__} serving {config.data_path.resolve()} on {listeners or 'nothing'}; "
            f"fsync {fsync}; {server.core.summary()}" + (f"; WARNING: {exposure}" if exposure else ""))


def install_event_loop_policy() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def serve(config: ServerConfig, recover_metadata: bool = False) -> None:
    server = Server(config, recover_metadata)
    await server.start()
    for name, (host, port) in server.addresses.items():
        print(f"rill listening on {name} {host}:{port}", flush=True)
    log.info("%s", start_summary(config, server))
    if exposure := tank_exposure(config, server):
        log.warning("%s", exposure)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()
        print("rill stopped", flush=True)


def run(config: ServerConfig, recover_metadata: bool = False) -> None:
    """Run the server until SIGINT/SIGTERM; a refused start is one line on stderr, exit 1."""
    configure_logging(config.logging)
    faulthandler.enable()  # a crash in native code prints every thread's stack on stderr
    os.umask(0o077)  # data files, logs and secrets readable by the server's user only
    raise_open_file_limit()  # before the core sizes its descriptor cache from it
    install_event_loop_policy()
    try:
        asyncio.run(serve(config, recover_metadata))
    except (StartupRefused, DataDirectoryInUse, RillError) as error:
        print(f"rill: cannot start: {error}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
