"""A local rill cluster the benchmark starts itself: etcd (1 or 3 members) and 3 rill nodes.

Owns: ``LocalEtcd`` (Debian's ``etcd`` binary found on PATH, ``--pre-vote=true``, ports chosen
free on 127.0.0.1, ready once every member's ``/health`` reports a leader) and ``LocalCluster``
(a context manager: the etcd, then nodes 1..N, each a ``RillServer`` -- ``rill serve`` with
``RILL_CLUSTER_ETCD_ENDPOINTS``, ``RILL_CLUSTER_NODE_ID``, ``RILL_CLUSTER_PEER_ADDRESS
127.0.0.1:0`` and ``RILL_CLUSTER_NAME``, its Iggy TCP, HTTP and Kafka listeners on port 0 --
ready once it printed its "rill listening on" lines, which a node does after it joined).

Invariants: everything lives in one temporary directory and listens on 127.0.0.1 only; every
process is started and stopped by its own pid (``pids`` lists every one ever started, restarts
included, so a caller can check they are all gone); leaving the ``with`` block -- normally,
on an error or on Ctrl-C -- kills the nodes, then etcd, and removes the directory.
``kill(node)`` is a crash (SIGKILL); ``restart(node)`` starts it again on its data.

Like ``RillServer``, this never imports the server: the bench stays on the client side.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from rill.bench.ports import free_ports
from rill.bench.server import RillServer, ServerStartError

ETCD_STARTUP_TIMEOUT = 60.0
NODES = 3


class LocalEtcd:
    """``members`` etcd processes forming one cluster on 127.0.0.1."""

    def __init__(self, directory: Path, members: int = 3) -> None:
        if members not in (1, 3):
            raise ValueError(f"etcd members must be 1 or 3 (got {members})")
        self.directory = directory
        ports = free_ports(2 * members)
        self.names = [f"etcd{index + 1}" for index in range(members)]
        self.client_urls = [f"http://127.0.0.1:{ports[2 * index]}" for index in range(members)]
        self.peer_urls = [f"http://127.0.0.1:{ports[2 * index + 1]}" for index in range(members)]
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def endpoints(self) -> str:
        return ",".join(self.client_urls)

    def start(self) -> LocalEtcd:
        binary = shutil.which("etcd")
        if binary is None:
            raise ServerStartError("etcd is not on PATH (Debian: apt-get install etcd-server)")
        initial = ",".join(f"{name}={url}" for name, url in zip(self.names, self.peer_urls))
        for name, client_url, peer_url in zip(self.names, self.client_urls, self.peer_urls):
            with open(self.directory / f"{name}.log", "ab") as log:
                self.processes.append(subprocess.Popen(
                    [binary, "--name", name, "--data-dir", str(self.directory / name),
                     "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                     "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                     "--initial-cluster", initial, "--initial-cluster-state", "new",
                     "--initial-cluster-token", "rill-bench", "--pre-vote=true",
                     "--logger", "zap", "--log-level", "error"],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + ETCD_STARTUP_TIMEOUT
        waiting = list(self.client_urls)
        while waiting:
            for process, name in zip(self.processes, self.names):
                if process.poll() is not None:
                    tail = (self.directory / f"{name}.log").read_text(errors="replace")[-2000:]
                    raise ServerStartError(f"etcd member {name} exited ({process.returncode}):\n{tail}")
            waiting = [url for url in waiting if not _healthy(url)]
            if waiting and time.monotonic() > deadline:
                raise ServerStartError(f"etcd did not become healthy in {ETCD_STARTUP_TIMEOUT:g} s")
            if waiting:
                time.sleep(0.05)  # another process: polled, there is nothing to await
        return self

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(10)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=1) as answer:
            return json.load(answer).get("health") == "true"
    except (OSError, urllib.error.URLError, ValueError):
        return False


class LocalCluster:
    """``with LocalCluster(etcd_members=3, fsync="interval") as cluster: cluster.nodes[1].addresses``"""

    def __init__(self, etcd_members: int = 3, fsync: str = "interval", nodes: int = NODES,
                 name: str = "rill-bench") -> None:
        self.etcd_members = etcd_members
        self.fsync = fsync
        self.node_count = nodes
        self.name = name
        self.directory: Path | None = None
        self.root: Path | None = None  # the temporary directory, still named after stop()
        self.etcd: LocalEtcd | None = None
        self.nodes: dict[int, RillServer] = {}
        self.pids: list[int] = []  # every process ever started (etcd, nodes, restarts)

    def start(self) -> LocalCluster:
        self.directory = self.root = Path(tempfile.mkdtemp(prefix="rill-bench-cluster-"))
        try:
            self.etcd = LocalEtcd(self.directory, self.etcd_members)
            try:
                self.etcd.start()
            finally:
                self.pids += [process.pid for process in self.etcd.processes]
            for node_id in range(1, self.node_count + 1):
                env = {"RILL_CLUSTER_ETCD_ENDPOINTS": self.etcd.endpoints,
                       "RILL_CLUSTER_NODE_ID": str(node_id),
                       "RILL_CLUSTER_PEER_ADDRESS": "127.0.0.1:0",
                       "RILL_CLUSTER_NAME": self.name}
                self.nodes[node_id] = RillServer(self.directory / f"node{node_id}", fsync=self.fsync,
                                                 transports=("tcp", "http"), env=env, kafka=True)
                self._start_node(node_id)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_node(self, node_id: int) -> None:
        node = self.nodes[node_id]
        try:
            node.start()
        finally:
            if node.pid is not None:
                self.pids.append(node.pid)
        # RillServer.start stops a node that did not announce itself; name which one
        if not node.running:
            raise ServerStartError(f"rill node {node_id} did not start:\n{''.join(node.output)[-2000:]}")

    def kill(self, node_id: int) -> None:
        """kill -9 the node (its data directory stays)."""
        self.nodes[node_id].kill()

    def restart(self, node_id: int) -> None:
        self._start_node(node_id)

    def describe(self) -> str:
        return (f"{self.node_count} rill nodes and {self.etcd_members} etcd member"
                f"{'s' if self.etcd_members > 1 else ''} started by the benchmark "
                f"(fsync {self.fsync})")

    def stop(self) -> None:
        for node in self.nodes.values():
            node.kill()
        if self.etcd is not None:
            self.etcd.stop()
        directory, self.directory = self.directory, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()
