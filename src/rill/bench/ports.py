"""Ports for the servers a bench or a test starts on 127.0.0.1 (etcd, rill nodes, peers, Spark).

A port taken with ``bind(("127.0.0.1", 0))`` and released comes from the kernel's ephemeral range,
the same range every outgoing connection takes its source port from: between the moment it is
chosen and the moment its server binds it, any client on the machine may take it, and the server
then fails with "address already in use". The ports handed out here lie outside that range, where
nothing takes a port unasked. Each process walks the range from its own starting point and never
hands out one port twice until it has walked it all; a port is handed out only if TCP and UDP can
both bind it at that moment.
"""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

LOWEST = 10_000  # below this live the well-known services' ports
HIGHEST = 65_535
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _unclaimed_ranges() -> list[range]:
    """The ports at or above LOWEST that the kernel never picks as a source port."""
    try:
        low, high = (int(bound) for bound in EPHEMERAL.read_text().split())
    except (OSError, ValueError):
        low, high = 32_768, 60_999  # Linux's default
    ranges = [range(LOWEST, low), range(high + 1, HIGHEST + 1)]
    return [each for each in ranges if len(each)] or [range(LOWEST, HIGHEST + 1)]


_PORTS = [port for each in _unclaimed_ranges() for port in each]
_START = (os.getpid() * 7_919) % len(_PORTS)  # processes started side by side start far apart
_next = itertools.cycle(_PORTS[_START:] + _PORTS[:_START])


def _bindable(port: int) -> bool:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 for TCP and UDP, outside the ephemeral range."""
    ports: list[int] = []
    for port in itertools.islice(_next, len(_PORTS)):
        if _bindable(port):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise OSError(f"fewer than {count} ports are free on 127.0.0.1 outside the ephemeral range")


def free_port() -> int:
    """One port as ``free_ports`` hands them out (also a port nobody listens on, for a test)."""
    return free_ports(1)[0]
