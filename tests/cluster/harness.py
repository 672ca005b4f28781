"""A local rill cluster of N "machines" for fault runs, and the nemesis that breaks it.

A machine is one etcd member plus one ``rill serve`` node (node id = machine index + 1). Two
modes:

``loopback``    everything on 127.0.0.1, ports picked free: fast, for CI. Processes can be
                killed, paused and restarted; a machine cannot be cut off the network.
``namespaces``  each machine in a network namespace of its own (``ip netns``, root needed),
                joined by a veth to a bridge that the harness adds in the host's namespace with
                an address on a private /24 (10.200-249.x.0/24, one not in use). The test
                process, as client, reaches every machine through that bridge; each process
                listens only on its machine's address. ``isolate(i)`` drops every packet in and
                out of machine i but its loopback (an nftables table in its namespace);
                ``heal(i)`` deletes that table.

Nemesis, by pid (only processes this harness started): ``kill9(i)`` (the node), ``kill9_etcd(i)``,
``kill9_machine(i)`` (node + its etcd member), ``pause(i)``/``resume(i)`` (SIGSTOP/SIGCONT of
the node), ``restart(i)`` (the node again, same data directory and addresses), ``isolate(i)`` /
``heal()``. ``close()`` kills every process it started and removes every namespace and link it
made; it runs also at interpreter exit, and the ``local_cluster`` fixture calls it however the
test ends.

Nodes run with ``cluster=True`` (default) as cluster members (``RILL_CLUSTER_*``), or
standalone (``cluster=False``: the harness's own tests, which need no cluster runtime).
"""

from __future__ import annotations

import atexit
import ctypes
import ipaddress
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self, TypeVar

sys.path.insert(0, str(Path(__file__).parents[1] / "server" / "cluster"))
from etcd_cluster import EtcdCluster, EtcdMember

from rill.bench.ports import free_ports

T = TypeVar("T")
STARTUP_TIMEOUT = 60.0
CLONE_NEWNET = 0x40000000
FAULT_TABLE = "rillfault"
_tags = iter(range(100))


def run(*command: str, stdin: str | None = None) -> str:
    """A short administrative command (ip, nft); its failure is one clear error."""
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def in_namespace(namespace: str | None, call: Callable[[], T]) -> T:
    """``call()`` in a thread that entered network namespace ``namespace`` (None: here).
    Sockets it opens, and processes it starts, belong to that namespace."""
    if namespace is None:
        return call()
    result: list[Any] = []

    def enter_and_call() -> None:
        try:
            descriptor = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
            try:
                if ctypes.CDLL(None, use_errno=True).setns(descriptor, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {namespace}")
            finally:
                os.close(descriptor)
            result.append((True, call()))
        except BaseException as error:  # noqa: BLE001 -- raised again in the caller's thread
            result.append((False, error))

    thread = threading.Thread(target=enter_and_call, name=f"netns-{namespace}")
    thread.start()
    thread.join()
    ok, value = result[0]
    if not ok:
        raise value
    return value


class Network:
    """The namespaces, veths and bridge of the ``namespaces`` mode."""

    def __init__(self, size: int) -> None:
        for tool in ("ip", "nft"):
            assert shutil.which(tool), (f"{tool} is not on PATH: the namespaces mode needs "
                                        "iproute2 and nftables (apt-get install nftables)")
        self.tag = f"{os.getpid() % 100000}{next(_tags)}"
        self.bridge = f"rfb{self.tag}"
        self.subnet = self._free_subnet()
        hosts = list(self.subnet.hosts())
        self.gateway = str(hosts[0])
        self.hosts = [str(hosts[10 + index]) for index in range(size)]
        self.namespaces = [f"rillf{self.tag}m{index}" for index in range(size)]
        self.made_namespaces: list[str] = []
        self.made_bridge = False
        self.isolated: set[int] = set()

    def _free_subnet(self) -> ipaddress.IPv4Network:
        used = [ipaddress.ip_interface(word).network for line in run("ip", "-4", "-o", "addr").splitlines()
                for word in line.split()[3:4]]
        seed = os.getpid()
        for attempt in range(2500):
            number = (seed + attempt) % 2500
            subnet = ipaddress.ip_network(f"10.{200 + number // 50}.{number % 50 + 1}.0/24")
            if not any(subnet.overlaps(other) for other in used):
                return subnet
        raise RuntimeError("no free private /24 for the harness's bridge")

    def create(self) -> None:
        run("ip", "link", "add", self.bridge, "type", "bridge")
        self.made_bridge = True
        run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        for index, (namespace, host) in enumerate(zip(self.namespaces, self.hosts)):
            run("ip", "netns", "add", namespace)
            self.made_namespaces.append(namespace)
            veth = f"rfv{self.tag}m{index}"
            run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace)
            run("ip", "link", "set", veth, "master", self.bridge, "up")
            run("ip", "-n", namespace, "addr", "add", f"{host}/24", "dev", "eth0")
            run("ip", "-n", namespace, "link", "set", "eth0", "up")
            run("ip", "-n", namespace, "link", "set", "lo", "up")
            # a killed process's socket resending to a vanished peer would keep the namespace
            # (and its veth) alive after ``ip netns del``: one retry, not eight
            run("ip", "netns", "exec", namespace, "sysctl", "-qw", "net.ipv4.tcp_orphan_retries=1")

    def isolate(self, index: int) -> None:
        """Every packet in or out of machine ``index`` dropped, its loopback excepted."""
        rules = (f"table inet {FAULT_TABLE} {{\n"
                 f" chain input {{ type filter hook input priority -10; policy drop; iif \"lo\" accept; }}\n"
                 f" chain output {{ type filter hook output priority -10; policy drop; oif \"lo\" accept; }}\n"
                 f"}}\n")
        run("ip", "netns", "exec", self.namespaces[index], "nft", "-f", "-", stdin=rules)
        self.isolated.add(index)

    def heal(self, index: int) -> None:
        if index in self.isolated:
            run("ip", "netns", "exec", self.namespaces[index], "nft", "delete", "table", "inet", FAULT_TABLE)
            self.isolated.discard(index)

    def remove(self) -> None:
        """Every namespace (with its veth) and the bridge, as far as they were made."""
        errors = []
        for namespace in self.made_namespaces:  # the sockets killed processes left behind
            subprocess.run(["ip", "netns", "exec", namespace, "ss", "-K", "-t", "-a"],
                           capture_output=True, check=False)
        while self.made_namespaces:
            namespace = self.made_namespaces.pop()
            try:
                run("ip", "netns", "del", namespace)
            except RuntimeError as error:
                errors.append(str(error))
        if self.made_bridge:
            self.made_bridge = False
            try:
                run("ip", "link", "del", self.bridge)
            except RuntimeError as error:
                errors.append(str(error))
        if errors:
            raise RuntimeError("; ".join(errors))


class NamespacedEtcdMember(EtcdMember):
    """An etcd member on its machine's address, started inside its machine's namespace."""

    def __init__(self, name: str, directory: Path, host: str, namespace: str) -> None:
        super().__init__(name, directory, 2379, 2380)
        self.client_url = f"http://{host}:2379"
        self.peer_url = f"http://{host}:2380"
        self.namespace = namespace

    def start(self, initial_cluster: str, state: str) -> None:
        in_namespace(self.namespace, lambda: EtcdMember.start(self, initial_cluster, state))


def process_state(pid: int) -> str:
    """The state letter of /proc/PID/stat (T: stopped by a signal)."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()[0]


def node_env(node_id: int, host: str, ports: dict[str, int], etcd_endpoints: list[str] | None,
             cluster_name: str, lease_ttl: float | None = None) -> dict[str, str]:
    """The settings of a real node on ``host``: Iggy TCP, HTTP, Kafka (advertised as bound) and
    TANK on ``ports``, QUIC off; with ``etcd_endpoints``, a member of cluster ``cluster_name``
    whose peer link is on ``ports["peer"]`` (``lease_ttl``: its member lease, else the
    default)."""
    env = {"RILL_QUIC_ENABLED": "false",
           "RILL_TCP_ADDRESS": f"{host}:{ports['tcp']}", "RILL_HTTP_ADDRESS": f"{host}:{ports['http']}",
           "RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ADDRESS": f"{host}:{ports['kafka']}",
           "RILL_KAFKA_ADVERTISED_ADDRESS": f"{host}:{ports['kafka']}",
           "RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": f"{host}:{ports['tank']}"}
    if etcd_endpoints:
        env.update({"RILL_CLUSTER_ETCD_ENDPOINTS": ",".join(etcd_endpoints),
                    "RILL_CLUSTER_NODE_ID": str(node_id),
                    "RILL_CLUSTER_PEER_ADDRESS": f"{host}:{ports['peer']}",
                    "RILL_CLUSTER_NAME": cluster_name})
        if lease_ttl is not None:
            env["RILL_CLUSTER_MEMBER_LEASE_TTL"] = str(lease_ttl)
    return env


class RillNode:
    """One ``rill serve`` process of a machine, at fixed addresses (kept across restarts)."""

    def __init__(self, node_id: int, host: str, data_dir: Path, env: dict[str, str],
                 namespace: str | None, ports: dict[str, int]) -> None:
        self.node_id = node_id
        self.host = host
        self.data_dir = data_dir
        self.namespace = namespace
        self.ports = ports  # tcp, http, kafka, peer (, tank)
        self.env = env
        self.process: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self.listening: dict[str, tuple[str, int]] = {}
        self.paused = False

    def address(self, listener: str) -> str:
        return f"{self.host}:{self.ports[listener]}"

    @property
    def kafka(self) -> str:
        return self.address("kafka")

    @property
    def http_url(self) -> str:
        return f"http://{self.address('http')}"

    @property
    def pid(self) -> int:
        assert self.process is not None, "node not started"
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> RillNode:
        """Start and return once every listener printed its "rill listening on" line. A node
        id still held by the lease of its own killed predecessor is retried until it expires."""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if self._start_once(deadline):
                return self
            said = "".join(self.output[-20:])
            if "is live elsewhere" not in said or time.monotonic() > deadline:
                raise RuntimeError(f"rill node {self.node_id} did not start:\n{said}")
            time.sleep(0.25)  # the dead predecessor's member lease: etcd expires it by its TTL

    def _start_once(self, deadline: float) -> bool:
        environment = dict(os.environ)
        environment.update(self.env)
        expected = {name for name in ("tcp", "http", "kafka", "tank") if name in self.ports}
        command = [sys.executable, "-m", "rill", "serve", "--data-dir", str(self.data_dir)]
        self.output, self.listening, self.paused = [], {}, False
        self.process = in_namespace(self.namespace, lambda: subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment))
        ready = threading.Event()
        process = self.process

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                self.output.append(line)
                if line.startswith("rill listening on "):
                    words = line.split()
                    host, _, port = words[-1].rpartition(":")
                    self.listening[words[3]] = (host, int(port))
                    if expected <= self.listening.keys():
                        ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True, name=f"rill-{self.node_id}-output").start()
        ready.wait(max(0.0, deadline - time.monotonic()))
        if expected <= self.listening.keys() and self.running:
            return True
        self.kill9()
        return False

    def signal(self, signum: int) -> None:
        assert self.running, f"node {self.node_id} is not running"
        os.kill(self.pid, signum)

    def kill9(self) -> None:
        if self.running:
            assert self.process is not None
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP, returning once the kernel shows the process stopped (delivery is
        asynchronous: just after kill() the process may still be running)."""
        self.signal(signal.SIGSTOP)
        self.paused = True
        self._await_state(lambda letter: letter == "T", "stopped")

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False
        self._await_state(lambda letter: letter != "T", "running again")

    def _await_state(self, wanted: Callable[[str], bool], what: str) -> None:
        deadline = time.monotonic() + 10
        while not wanted(process_state(self.pid)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {self.node_id} is not {what} 10 s after the signal")
            time.sleep(0.01)

    def stop(self, timeout: float = 20.0) -> int | None:
        """A clean shutdown (SIGTERM); the exit code (None: it was not running)."""
        if not self.running:
            return None
        assert self.process is not None
        if self.paused:
            self.resume()
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)


class Machine:
    def __init__(self, index: int, host: str, namespace: str | None, etcd: EtcdMember) -> None:
        self.index = index
        self.node_id = index + 1
        self.host = host
        self.namespace = namespace
        self.etcd = etcd
        self.node: RillNode | None = None

    def inside(self, call: Callable[[], T]) -> T:
        """``call()`` from inside this machine's network (namespaces mode; loopback: here)."""
        return in_namespace(self.namespace, call)


class LocalCluster:
    """N machines (etcd member + rill node each) and the nemesis; see the module docstring."""

    def __init__(self, directory: Path, size: int = 3, mode: str = "loopback", cluster: bool = True,
                 rill: bool = True, env: dict[str, str] | None = None, name: str | None = None,
                 lease_ttl: int = 2) -> None:
        if mode not in ("loopback", "namespaces"):
            raise ValueError(f"mode {mode!r}: loopback or namespaces")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.size, self.mode, self.cluster, self.rill = size, mode, cluster, rill
        self.extra_env = dict(env or {})
        self.name = name or f"faults-{os.getpid()}-{self.directory.name}"
        self.lease_ttl = lease_ttl
        self.network = Network(size) if mode == "namespaces" else None
        self.etcd = EtcdCluster(self.directory, size)
        if self.network is not None:
            self.etcd.members = [NamespacedEtcdMember(f"e{index}", self.directory, host, namespace)
                                 for index, (host, namespace)
                                 in enumerate(zip(self.network.hosts, self.network.namespaces))]
            self.etcd.initial_cluster = ",".join(f"{m.name}={m.peer_url}" for m in self.etcd.members)
        hosts = self.network.hosts if self.network else ["127.0.0.1"] * size
        namespaces: list[str | None] = list(self.network.namespaces) if self.network else [None] * size
        self.machines = [Machine(index, hosts[index], namespaces[index], self.etcd.members[index])
                         for index in range(size)]
        self.closed = False
        atexit.register(self.close)

    # -- start and stop ---------------------------------------------------------------------

    def start(self) -> LocalCluster:
        try:
            if self.network is not None:
                self.network.create()
            self.etcd.start()
            if self.rill:
                for machine in self.machines:
                    machine.node = self._node(machine)
                for machine in self.machines:
                    assert machine.node is not None
                    machine.node.start()
        except BaseException:
            self.close()
            raise
        return self

    def _node(self, machine: Machine) -> RillNode:
        if self.network is not None:  # a namespace of its own: the default ports are free
            ports = {"tcp": 8090, "http": 3000, "kafka": 9092, "peer": 8093, "tank": 11011}
        else:
            ports = dict(zip(("tcp", "http", "kafka", "peer", "tank"), free_ports(5)))
        host = machine.host
        endpoints = None
        if self.cluster:
            own = machine.etcd.client_url  # its own member first, as a machine's local etcd
            endpoints = [own] + [url for url in self.etcd.endpoints if url != own]
        env = node_env(machine.node_id, host, ports, endpoints, self.name, self.lease_ttl)
        env["RILL_LOGGING_LEVEL"] = "warning"
        if self.network is not None:  # a private network of the harness's own: root's default
            # password, and TANK clients (no authentication) acting as root off loopback
            env.update({"RILL_ROOT_ALLOW_DEFAULT_PASSWORD": "true", "RILL_TANK_USER": "iggy",
                        "RILL_TANK_ALLOW_PRIVILEGED_USER": "true"})
        env.update(self.extra_env)
        return RillNode(machine.node_id, host, self.directory / f"node{machine.node_id}", env,
                        machine.namespace, ports)

    def close(self) -> None:
        """Kill every process started here (by pid), remove every namespace and link."""
        if self.closed:
            return
        self.closed = True
        atexit.unregister(self.close)
        if self.network is not None:
            # healed first: a socket its killed process left behind, resending into a drop
            # rule, would hold the namespace (and its veth) alive for minutes
            for index in sorted(self.network.isolated):
                self.network.heal(index)
        for machine in self.machines:
            if machine.node is not None and machine.node.running:
                if machine.node.paused:
                    machine.node.resume()
                machine.node.kill9()
        self.etcd.stop()
        if self.network is not None:
            self.network.remove()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- what clients use -------------------------------------------------------------------

    def node(self, index: int) -> RillNode:
        node = self.machines[index].node
        assert node is not None, "rill nodes not started (rill=False)"
        return node

    @property
    def nodes(self) -> list[RillNode]:
        return [self.node(index) for index in range(self.size)]

    @property
    def kafka_bootstrap(self) -> str:
        return ",".join(node.kafka for node in self.nodes)

    # -- nemesis ----------------------------------------------------------------------------

    def kill9(self, index: int) -> None:
        self.node(index).kill9()

    def kill9_etcd(self, index: int) -> None:
        self.etcd.kill(index)

    def kill9_machine(self, index: int) -> None:
        """The node and its etcd member at once (a machine's power cut)."""
        node = self.node(index)
        os.kill(node.pid, signal.SIGKILL)
        self.etcd.kill(index)
        node.kill9()  # reaps it

    def pause(self, index: int) -> None:
        self.node(index).pause()

    def resume(self, index: int) -> None:
        self.node(index).resume()

    def restart(self, index: int) -> RillNode:
        """The node again on its data directory and addresses (killed first if running); its
        machine's etcd member too if that was killed."""
        node = self.node(index)
        node.kill9()
        member = self.etcd.members[index]
        if not member.running:
            self.etcd.restart(index)
        return node.start()

    def isolate(self, index: int) -> None:
        if self.network is None:
            raise RuntimeError("isolate needs the namespaces mode (loopback has one network)")
        self.network.isolate(index)

    def heal(self, index: int | None = None) -> None:
        """Undo isolations (one machine's, or all), resume paused nodes, restart killed etcd
        members; killed nodes stay down (``restart``)."""
        if self.network is not None:
            for machine in ([index] if index is not None else sorted(self.network.isolated)):
                self.network.heal(machine)
        for machine in self.machines if index is None else [self.machines[index]]:
            if machine.node is not None and machine.node.paused:
                machine.node.resume()
        self.etcd.heal()
