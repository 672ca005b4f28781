"""QUIC settings both ends of rill's QUIC transport share (server listener and SDK client).

Owns: the flow-control windows given to aioquic and the UDP socket buffer sizes. Why: aioquic's
defaults (1 MiB stream and connection windows, the kernel's ~208 KiB UDP receive buffer) make a
1 MB request overflow the receive buffer on loopback; the dropped datagrams then cost
retransmission timeouts and congestion-window collapse (measured: 3 MB/s for 1 MB batches).
Bigger windows let a batch travel in one flight, and a receive buffer of a few MiB holds it;
on loopback, bigger datagrams cut aioquic's per-packet Python work.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from aioquic.quic.configuration import QuicConfiguration

STREAM_WINDOW = 16 * 1024 * 1024  # per stream: one request or answer of up to this in one flight
CONNECTION_WINDOW = 64 * 1024 * 1024
# datagrams on loopback only: elsewhere aioquic's 1,200 bytes stay, since the path MTU is unknown
# (measured on loopback, 1 MB batches: 4 MB/s at 1,200 bytes, 27 MB/s at 8 KiB, 65 MB/s at
# 16 KiB; at 32 KiB aioquic's connections broke)
LOOPBACK_DATAGRAM_SIZE = 16384
SOCKET_BUFFER = 8 * 1024 * 1024  # asked for; the kernel caps it at net.core.[rw]mem_max


def widen_windows(configuration: QuicConfiguration, host: str) -> QuicConfiguration:
    """Bigger flow-control windows, and big datagrams when ``host`` (the listener's or the
    server's address) is a loopback address, where the path MTU is 64 KiB."""
    configuration.max_stream_data = STREAM_WINDOW
    configuration.max_data = CONNECTION_WINDOW
    if is_loopback(host):
        configuration.max_datagram_size = LOOPBACK_DATAGRAM_SIZE
    return configuration


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def widen_socket_buffers(transport: asyncio.BaseTransport) -> None:
    """Ask for big UDP send/receive buffers (root may exceed the sysctl cap with *BUFFORCE)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    for option, forced in ((socket.SO_RCVBUF, getattr(socket, "SO_RCVBUFFORCE", None)),
                           (socket.SO_SNDBUF, getattr(socket, "SO_SNDBUFFORCE", None))):
        try:
            if forced is not None:
                sock.setsockopt(socket.SOL_SOCKET, forced, SOCKET_BUFFER)
                continue
        except OSError:  # not privileged: fall back to the capped request
            pass
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
        except OSError:
            pass
