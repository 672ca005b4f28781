"""Builds the server: storage -> core -> protocols -> listeners; starts, runs until a signal,
stops cleanly.

Owns: the process-level lifecycle, and the listener list: one ``ListenerEntry`` (protocol,
transport, address, TLS) per enabled listener, read from the config sections the protocol
registry names (``server.protocols.PROTOCOLS``: Iggy's ``[tcp]``, ``[quic]``, ``[http]``,
``[kafka]``, ``[tank]``), started in one loop (binary TCP listeners first, then QUIC, then
HTTP) and stopped in the reverse order. A section's optional ``max_frame_size`` (else
``[tcp]``'s), ``sendfile`` and ``idle_timeout`` (else ``[connections]``'s) apply to its
listener. On start it prints one line per listener
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
exist, a cluster node (``[cluster] etcd_endpoints``) whose etcd does not answer or whose node
id is live elsewhere, ...). The process creates its files private to its user (umask 077).
"""

from __future__ import annotations

import asyncio
import dataclasses
import contextlib
import ctypes
import faulthandler
import ipaddress
import logging
import os
import platform
import signal
import socket
import ssl
import sys
from dataclasses import dataclass
from typing import Any, Iterator

from rill.errors import RillError
from rill.server.config import ServerConfig, TlsConfig, split_address
from rill.server.core.core import Core
from rill.server.core.reconciliation import StartupRefused
from rill.server.protocols import PROTOCOLS, WireProtocol
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


@dataclass(frozen=True, slots=True)
class ListenerEntry:
    """One listener the server starts."""

    name: str  # its config section: what the start line and ``Server.addresses`` call it
    protocol: str  # a row of ``PROTOCOLS``
    transport: str  # "tcp", "quic" or "http"
    address: str  # HOST:PORT as configured (port 0: the system chooses)
    tls: TlsConfig | None  # the section's TLS when enabled (QUIC has its certificate instead)


TRANSPORT_ORDER = {"tcp": 0, "quic": 1, "http": 2}  # HTTP last: GET /server lists the others


def listener_entries(config: ServerConfig) -> list[ListenerEntry]:
    """The enabled listeners of ``config``, in the registry's order (protocols, then each
    protocol's sections)."""
    entries = []
    for row in PROTOCOLS.values():
        for section_name, transport in row.listeners:
            section = getattr(config, section_name)
            if section.enabled:
                tls = getattr(section, "tls", None)
                entries.append(ListenerEntry(section_name, row.name, transport, section.address,
                                             tls if tls is not None and tls.enabled else None))
    return entries


def tls_context(entry: ListenerEntry) -> ssl.SSLContext | None:
    """The TLS context of ``entry`` (None: plain); files that cannot be loaded refuse the start
    in one line."""
    tls = entry.tls
    if tls is None:
        return None
    with refused_on_os_error(f"cannot load [{entry.name}.tls] certificate {tls.certificate} "
                             f"and key {tls.key}"):
        return server_ssl_context(tls.certificate, tls.key)


class Server:
    def __init__(self, config: ServerConfig, recover_metadata: bool = False,
                 coordinator: Any = None) -> None:
        self.config = config
        # a cluster node's coordination service: etcd at ``[cluster] etcd_endpoints`` unless
        # given (a ``cluster.coordinator.Coordinator``: the memory twin in tests)
        self._coordinator = coordinator
        with refused_on_os_error(f"cannot use the data directory {config.data_path}"):
            self.core = Core(config, recover_metadata, group_membership=IggyGroupMembers())
        self.protocols: dict[str, WireProtocol] = {}  # made at the start of its first listener
        self.listeners: list[Any] = []  # TcpListener, QuicListener, HttpListener, in start order
        self.addresses: dict[str, tuple[str, int]] = {}  # entry name -> bound (host, port)
        connections = config.connections
        self.limits = ConnectionLimits(
            connections.max_request_size_unauthenticated, connections.unauthenticated_timeout,
            connections.idle_timeout, connections.request_timeout, connections.max_connections,
            connections.min_request_rate, connections.max_connections_per_address,
        )
        self.memory = RequestMemory(connections.request_memory)  # shared by TCP and QUIC
        self.supervisor = Supervisor(self.limits)

    @property
    def entries(self) -> list[ListenerEntry]:
        """The listeners the config enables (read at each call: the config decides until the
        start)."""
        return listener_entries(self.config)

    def exposed_listeners(self) -> list[str]:
        """The enabled listeners whose address is not loopback, as "name HOST:PORT"."""
        return [
            f"{entry.name} {entry.address}" for entry in self.entries
            if PROTOCOLS[entry.protocol].password_login
            and not is_loopback(split_address(entry.address)[0])
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

    def tank_user_id(self) -> int:
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
                self.tank_user_id()
            if self.config.cluster.enabled:
                self._attach_cluster()
            await self._start_listeners()
            if self.cluster is not None:
                await self.cluster.start(self.advertised_listeners())
        except BaseException:
            await self.stop()
            raise

    cluster: Any = None  # the ``cluster.node.ClusterNode`` of a cluster node

    def _attach_cluster(self) -> None:
        """A cluster node: the cluster layer takes the catalog and leaves every partition
        offline until etcd's state is applied (``ClusterNode.attach``)."""
        from rill.server.cluster.etcd_gateway import EtcdGateway
        from rill.server.cluster.node import ClusterNode

        settings = self.config.cluster
        coordinator = self._coordinator or EtcdGateway(settings.endpoints)
        self.cluster = ClusterNode(settings, self.core, coordinator)
        self.cluster.attach()

    def advertised_listeners(self) -> dict[str, tuple[str, int]]:
        """What other nodes and clients are told of this node's listeners (``NodeInfo``):
        a section's ``advertised_address`` when it has one, else the bound address."""
        names = {"tcp": "iggy_tcp", "quic": "iggy_quic", "http": "http", "kafka": "kafka",
                 "tank": "tank", "cluster": "peer"}
        advertised = {}
        for section, (host, port) in self.addresses.items():
            configured = getattr(getattr(self.config, section), "advertised_address", "")
            if configured:
                host, port = split_address(configured, f"{section}.advertised_address")
            advertised[names.get(section, section)] = (host, port)
        return advertised

    _tank_user_id = tank_user_id

    async def _start_listeners(self) -> None:
        self._check_descriptor_room()
        http = self.config.http
        if http.enabled and http.metrics.enabled:
            self.core.metrics.instrument(self.core)  # every transport's commands are measured
        for entry in sorted(self.entries, key=lambda entry: TRANSPORT_ORDER[entry.transport]):
            await self._start_listener(entry)

    async def _start_listener(self, entry: ListenerEntry) -> None:
        row = PROTOCOLS[entry.protocol]
        protocol = self.protocols.get(row.name)
        if protocol is None:
            protocol = self.protocols[row.name] = row.make(self)
        section = getattr(self.config, entry.name)
        start = getattr(self, f"_start_{entry.transport}")
        bound = await start(entry, section, protocol)
        self.addresses[entry.name] = bound
        row.listening(protocol, self, bound)

    async def _start_tcp(self, entry: ListenerEntry, section: Any,
                         protocol: WireProtocol) -> tuple[str, int]:
        host, port = split_address(entry.address, f"{entry.name}.address")
        context = tls_context(entry)
        limits = self.limits
        idle_timeout = getattr(section, "idle_timeout", None)  # TANK's own: 16 s
        if idle_timeout is not None:
            limits = dataclasses.replace(limits, idle_timeout=idle_timeout)
        max_frame_size = getattr(section, "max_frame_size", self.config.tcp.max_frame_size)
        listener = TcpListener(self.core, protocol, host, port, max_frame_size, context, limits,
                               self.memory, self.supervisor,
                               sendfile=getattr(section, "sendfile", False))
        self.listeners.append(listener)
        with refused_on_os_error(f"cannot listen on {entry.name} {entry.address}"):
            return await listener.start()

    async def _start_quic(self, entry: ListenerEntry, section: Any,
                          protocol: WireProtocol) -> tuple[str, int]:
        from rill.server.transports.quic import QuicListener

        with refused_on_os_error(f"cannot listen on {entry.name} {entry.address}"):
            listener = QuicListener.from_config(self.core, protocol, section, self.limits,
                                                self.memory, self.supervisor)
            self.listeners.append(listener)
            return await listener.start()

    async def _start_http(self, entry: ListenerEntry, section: Any,
                          protocol: WireProtocol) -> tuple[str, int]:
        """Iggy's JSON API (``transports.http``: its routes run the Iggy dispatch)."""
        from rill.server.transports.http import HttpListener

        listener = HttpListener(self.core, section,
                                head_timeout=self.limits.unauthenticated_timeout,
                                max_connections=self.config.connections.max_connections,
                                limits=self.limits,
                                listeners=self.addresses)
        self.listeners.append(listener)
        tls_context(entry)  # uvicorn loads the files itself, and would say only "No such file"
        with refused_on_os_error(f"cannot listen on {entry.name} {entry.address}"):
            return await listener.start()

    async def stop(self) -> None:
        if self.cluster is not None:
            cluster, self.cluster = self.cluster, None
            await cluster.stop()
        while self.listeners:
            await self.listeners.pop().stop()
        self.supervisor.stop()
        await self.core.stop()


M_TOP_PAD = -2  # glibc's mallopt parameter number (malloc.h)


def keep_freed_memory(top_pad: int) -> None:
    """Set glibc's M_TOP_PAD to ``top_pad`` bytes (``[system] heap_top_pad``): the heap grows,
    and is trimmed, keeping that much spare, so the buffers one request frees are the next
    one's instead of pages handed back to the kernel and faulted in again (costly on a VM
    that returns freed memory to its host). 0, or a C library other than glibc: nothing."""
    if top_pad <= 0 or platform.libc_ver()[0] != "glibc":
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if mallopt(M_TOP_PAD, top_pad) != 1:
        log.warning("heap_top_pad: glibc refused M_TOP_PAD = %d", top_pad)


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
    cluster = ""
    if server.cluster is not None:
        node = server.cluster
        controller = node.controller_id
        cluster = (f"; cluster {node.name!r} node {node.node_id} (member epoch "
                   f"{node.member_epoch}, {len(node.members)} members), controller "
                   f"{'node %d' % controller if controller is not None else 'being elected'}")
    return (f"rill {__version__} serving {config.data_path.resolve()} on {listeners or 'nothing'}; "
            f"fsync {fsync}; {server.core.summary()}{cluster}"
            + (f"; WARNING: {exposure}" if exposure else ""))


def install_event_loop_policy() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def check_cluster(config: ServerConfig) -> None:
    """A node given ``[cluster] etcd_endpoints`` starts only when etcd answers and its node id
    is not live elsewhere (``cluster.startup``); checked before the data directory is touched."""
    from rill.server.cluster.startup import ClusterStartRefused, check_node_can_join

    cluster = config.cluster
    try:
        await check_node_can_join(cluster.endpoints, cluster.name, cluster.node_id)
    except ClusterStartRefused as refusal:
        raise StartupRefused(str(refusal)) from None
    log.info("etcd at %s answers; node id %d is free in cluster %r", cluster.etcd_endpoints,
             cluster.node_id, cluster.name)


async def serve(config: ServerConfig, recover_metadata: bool = False) -> None:
    if config.cluster.enabled:
        await check_cluster(config)
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
    keep_freed_memory(config.system.heap_top_pad)
    install_event_loop_policy()
    try:
        asyncio.run(serve(config, recover_metadata))
    except (StartupRefused, DataDirectoryInUse, RillError) as error:
        print(f"rill: cannot start: {error}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
