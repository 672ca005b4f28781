"""The ports benches and tests give their servers: never one the kernel may hand an outgoing
connection as its source port, never one already bound, never the same one twice in a row."""

from __future__ import annotations

import socket
from pathlib import Path

from rill.bench import ports


def _ephemeral() -> range:
    low, high = (int(bound) for bound in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(low, high + 1)


def test_ports_lie_outside_the_range_outgoing_connections_take_source_ports_from():
    handed = ports.free_ports(200)
    assert len(set(handed)) == 200
    assert not [port for port in handed if port in _ephemeral() or port < ports.LOWEST]


def test_a_port_bound_by_tcp_or_by_udp_is_never_handed_out(monkeypatch):
    upcoming = ports.free_ports(2)  # make them the next two the allocator tries, then bind them
    monkeypatch.setattr(ports, "_next", iter(upcoming + ports.free_ports(3)))
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", upcoming[0]))
        udp.bind(("127.0.0.1", upcoming[1]))
        handed = ports.free_ports(3)
    assert not set(handed) & set(upcoming)
    assert len(handed) == 3


def test_each_port_handed_out_binds_for_a_server():
    port = ports.free_port()
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        assert server.getsockname()[1] == port
