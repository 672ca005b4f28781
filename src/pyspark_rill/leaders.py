"""Reads of a rill cluster: every partition is read from its leader, and a failover is ridden out.

Owns: per process and connection options, a ``ClusterReads``: the cluster's map (``GET
/cluster`` of the HTTP APIs 'servers' names as ``http://host:port``, else of any member's
``http`` listener the last map named), one connection per node (its Iggy listener of option
'transport', logged in as the options say, with no reconnect of its own: a lost node is
dropped and the map read again), and ``Attempts``: the retry rule of one read.

The rule (README, "Reading a rill cluster"): a read of a partition goes to the leader the map
names. When the leader refuses it (``NotLeaderForPartition``, ``LeaderNotAvailable``: a
follower or a node that lost the leadership), cannot be connected to, or its link drops, the
connection is dropped, the map is read again after a wait (0.2 s doubling to 2 s) and the read
is asked again *from the same offset* of the new leader -- reads are by offset and only below
the high watermark, so nothing is lost or read twice. A read that makes no progress for option
``failoverTimeout`` seconds (60) fails with one line naming the partition and the option.

Standalone: when 'servers' names no HTTP API, or ``GET /cluster`` answers ``"standalone"`` (or
404: a server from before the route),
``cluster_of`` is None and reads go through ``connection`` exactly as on a single server.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from typing import Callable, TypeVar

from rill import errors
from rill.client import Client
from rill.client.cluster import LISTENERS, ClusterMap

from pyspark_rill.connection import _login, connection_failure
from pyspark_rill.options import ConnectionOptions, RillOptionError

log = logging.getLogger(__name__)

T = TypeVar("T")
# what makes a read of a cluster ask the map again and retry from the same offset
REFUSED = (errors.NotLeaderForPartition, errors.LeaderNotAvailable)
RETRIED = REFUSED + (errors.Disconnected, errors.CannotEstablishConnection, errors.NotConnected,
                     TimeoutError)
_FIRST_WAIT = 0.2
_MAX_WAIT = 2.0


def not_a_cluster_read(options: ConnectionOptions, error: errors.RillError) -> RillOptionError:
    """A node refused a read because rill is a cluster, and 'servers' names no HTTP API."""
    return RillOptionError(
        f"option 'servers': rill is a cluster and {options.servers} does not lead what the query "
        f"reads ({type(error).__name__}: {error}); add any node's HTTP API to 'servers' (e.g. "
        f"servers={options.servers.split(',')[0]},http://<node>:<http port>) so that each "
        "partition is read from its leader")


class ClusterReads:
    """The map and the node connections of one process for one set of connection options."""

    def __init__(self, options: ConnectionOptions) -> None:
        self.options = options
        self.listener = LISTENERS.get(options.transport, "iggy_tcp")
        self.map = ClusterMap()
        self.clients: dict[str, Client] = {}  # Iggy address -> its logged-in client
        self._lock = threading.Lock()

    # -- the map ---------------------------------------------------------------------------

    def _http_addresses(self) -> list[str]:
        addresses = [address for address in self.options.cluster_http.split(",") if address]
        for listeners in self.map.members.values():
            address = listeners.get("http")
            if address and address not in addresses and f"http://{address}" not in addresses:
                addresses.append(address)
        return addresses

    def refresh(self) -> ClusterMap:
        """Read ``GET /cluster`` again, from the first HTTP API that answers."""
        failures = []
        for address in self._http_addresses():
            try:
                status = self._status(address)
            except (errors.RillError, OSError) as error:
                failures.append(f"{address}: {error}")
                continue
            self.map = ClusterMap.from_status(status)
            return self.map
        raise errors.CannotEstablishConnection(
            reason="no HTTP API of the cluster answers GET /cluster: " + "; ".join(failures))

    def _status(self, address: str) -> dict:
        client = Client(address, transport="http", connect_attempts=1, reconnect=False,
                        connect_timeout=5.0, timeout=10.0, ca_file=self.options.ca_file,
                        verify_certificate=self.options.verify_certificate)
        try:
            client.connect()
            _login(client, self.options)
            try:
                return client.get_cluster()
            except (errors.ResourceNotFound, errors.HttpResponseError) as error:
                if isinstance(error, errors.HttpResponseError) and error.args_values[:1] != (404,):
                    raise
                return {"mode": "standalone"}  # a server from before GET /cluster
        finally:
            client.close()

    def leader_address(self, stream: str, topic: str, partition: int) -> str:
        """The Iggy address of the partition's leader, as the map says (LeaderNotAvailable
        when it names none)."""
        streams = [f"name:{stream}"] + ([str(int(stream))] if stream.isdigit() else [])
        topics = [f"name:{topic}"] + ([str(int(topic))] if topic.isdigit() else [])
        for stream_key in streams:
            for topic_key in topics:
                node = self.map.leader_of((stream_key, topic_key, partition))
                address = self.map.address(node, self.listener) if node is not None else None
                if address is not None:
                    return address
        raise errors.LeaderNotAvailable(partition, topic)

    # -- connections -----------------------------------------------------------------------

    def client(self, address: str) -> Client:
        """The logged-in connection to the node listening at ``address`` (opened on first use)."""
        with self._lock:
            client = self.clients.get(address)
        if client is not None:
            return client
        options = self.options
        client = Client(address, transport=options.transport, connect_attempts=1,
                        reconnect=False, connect_timeout=5.0, timeout=300.0,
                        ca_file=options.ca_file, verify_certificate=options.verify_certificate)
        try:
            client.connect()
        except BaseException:
            client.close()
            raise
        _login(client, options)
        with self._lock:
            kept = self.clients.setdefault(address, client)
        if kept is not client:
            client.close()
        return kept

    def leader(self, stream: str, topic: str, partition: int) -> tuple[str, Client]:
        address = self.leader_address(stream, topic, partition)
        return address, self.client(address)

    def any_node(self) -> tuple[str, Client]:
        """A connection to any live node (metadata: every node has the same): the Iggy
        addresses of 'servers' first, then the members' of the map."""
        addresses = [address for address in self.options.servers.split(",") if address]
        for listeners in self.map.members.values():
            address = listeners.get(self.listener)
            if address and address not in addresses:
                addresses.append(address)
        failure: errors.RillError | None = None
        for address in addresses:
            try:
                return address, self.client(address)
            except (errors.CannotEstablishConnection, errors.Disconnected,
                    errors.NotConnected) as error:
                failure = error
        raise failure or errors.CannotEstablishConnection(reason="no node is known")

    def drop(self, address: str | None) -> None:
        with self._lock:
            client = self.clients.pop(address, None) if address is not None else None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass

    def close(self) -> None:
        for address in list(self.clients):
            self.drop(address)

    # -- the retry rule --------------------------------------------------------------------

    def attempts(self, what: str) -> Attempts:
        return Attempts(self, what)

    def on_leader(self, stream: str, topic: str, partition: int, work: Callable[[Client], T]) -> T:
        """``work`` (a read, safe to ask again) on the partition's leader, retried by the rule."""
        attempts = self.attempts(f"{stream}/{topic} partition {partition}")
        while True:
            try:
                attempts.address, client = self.leader(stream, topic, partition)
                return work(client)
            except RETRIED as error:
                attempts.failed(error)

    def on_any(self, work: Callable[[Client], T]) -> T:
        """``work`` (a read of metadata) on any live node, retried by the rule."""
        attempts = self.attempts(f"the cluster at {self.options.servers}")
        while True:
            try:
                attempts.address, client = self.any_node()
                return work(client)
            except RETRIED as error:
                attempts.failed(error)


class Attempts:
    """The retries of one read: ``failed`` drops the connection that failed, waits, reads
    the map again, and returns (ask again), or raises once ``failoverTimeout`` seconds went by
    since the read last made progress (``progressed``)."""

    def __init__(self, cluster: ClusterReads, what: str) -> None:
        self.cluster = cluster
        self.what = what
        self.address: str | None = None  # the node the current attempt went to
        self.progressed()

    def progressed(self) -> None:
        self.started = time.monotonic()
        self.wait = _FIRST_WAIT
        self.failures = 0

    def failed(self, error: BaseException) -> None:
        cluster = self.cluster
        if not isinstance(error, REFUSED):
            cluster.drop(self.address)
        self.address = None
        self.failures += 1
        timeout = cluster.options.failover_timeout
        if time.monotonic() - self.started + self.wait > timeout:
            raise connection_failure(errors.LeaderNotAvailable, (
                f"{self.what}: no leader answered within option failoverTimeout={timeout:g} s "
                f"({self.failures} attempts; the last: {error})"))
        log.warning("rill: %s: %s; asking the cluster map again in %.1f s", self.what, error,
                    self.wait)
        time.sleep(self.wait)
        self.wait = min(self.wait * 2, _MAX_WAIT)
        try:
            cluster.refresh()
        except errors.RillError as failure:  # (no HTTP API answers now: the next try says)
            log.warning("rill: %s", failure)


_clusters: dict[ConnectionOptions, ClusterReads | None] = {}
_clusters_pid = os.getpid()
_clusters_lock = threading.Lock()


def cluster_of(options: ConnectionOptions) -> ClusterReads | None:
    """The process's ``ClusterReads`` for ``options``; None on a standalone server (no HTTP
    API in 'servers', or ``GET /cluster`` says standalone)."""
    global _clusters_pid
    if not options.cluster_http:
        return None
    with _clusters_lock:
        if _clusters_pid != os.getpid():  # forked: the parent's clients are unusable here
            _clusters.clear()
            _clusters_pid = os.getpid()
        if options in _clusters:
            return _clusters[options]
    if options.transport != "tcp":
        importlib.import_module(f"rill.client.{options.transport}")  # registers the transport
    importlib.import_module("rill.client.http")
    cluster = ClusterReads(options)
    try:
        found = cluster.refresh()
    except errors.CannotEstablishConnection as error:
        raise connection_failure(errors.CannotEstablishConnection, (
            f"option 'servers': cannot read the cluster's map: {error.reason}")) from None
    chosen = cluster if found.mode == "cluster" else None
    with _clusters_lock:
        return _clusters.setdefault(options, chosen)


def close_all() -> None:
    """Close every node connection of this process (tests, notebooks)."""
    with _clusters_lock:
        clusters = list(_clusters.values()) if _clusters_pid == os.getpid() else []
        _clusters.clear()
    for cluster in clusters:
        if cluster is not None:
            cluster.close()

