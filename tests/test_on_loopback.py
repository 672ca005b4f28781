"""Everything the project starts stays on loopback unless a user configures otherwise: the
server's embedded defaults, a running server's sockets, the benchmark's own server and its
peers (NATS, Redis). The Spark driver has its own check (tests/spark/test_loopback.py).

A process's sockets are read with psutil: every listening or bound socket must be on a
loopback address, and every connected one must talk to a loopback address."""

from __future__ import annotations

import ipaddress

import psutil
import pytest

from rill.bench.peers import Workload
from rill.bench.peers.nats import NatsPeer
from rill.bench.peers.redis import RedisPeer
from rill.bench.server import RillServer
from rill.server.config import ServerConfig, split_address
from server_process import RillProcess, session


def _is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%")[0])
    return (getattr(address, "ipv4_mapped", None) or address).is_loopback


def assert_on_loopback(pid: int) -> None:
    connections = psutil.Process(pid).net_connections(kind="inet")
    assert connections, f"process {pid} has no sockets to check"
    for connection in connections:
        assert _is_loopback(connection.laddr.ip), connection
        if connection.raddr:
            assert _is_loopback(connection.raddr.ip), connection


def test_the_embedded_defaults_listen_on_loopback():
    config = ServerConfig()
    for address in (config.tcp.address, config.quic.address, config.http.address):
        assert _is_loopback(split_address(address)[0]), address


def test_a_running_server_and_its_clients_use_loopback_only(tmp_path):
    server = RillProcess(tmp_path / "data").start()
    try:
        with session(server) as client:
            client.create_stream("s")
            assert_on_loopback(server.process.pid)
    finally:
        server.kill()


def test_the_benchmark_server_uses_loopback_only():
    server = RillServer(transports=("tcp", "quic", "http")).start()
    try:
        assert_on_loopback(server.process.pid)
    finally:
        server.stop()


@pytest.mark.parametrize("peer_class", [NatsPeer, RedisPeer], ids=["nats", "redis"])
def test_the_benchmark_peers_listen_on_loopback_only(tmp_path, peer_class):
    peer = peer_class(Workload(10, 100, 10, "interval"))
    peer.start(tmp_path)
    try:
        assert_on_loopback(peer.process.pid)
    finally:
        peer.stop()
