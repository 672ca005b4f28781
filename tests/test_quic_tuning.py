"""QUIC settings shared by the server listener and the SDK: windows, loopback datagrams, socket
buffers (src/rill/quic_tuning.py)."""

from __future__ import annotations

import asyncio
import socket

from aioquic.quic.configuration import QuicConfiguration

from rill.quic_tuning import (CONNECTION_WINDOW, LOOPBACK_DATAGRAM_SIZE, STREAM_WINDOW,
                              is_loopback, widen_socket_buffers, widen_windows)


def test_loopback_hosts_are_recognised():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("[::1]")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    assert not is_loopback("example.org")


def test_windows_grow_and_big_datagrams_only_on_loopback():
    default_size = QuicConfiguration().max_datagram_size
    local = widen_windows(QuicConfiguration(is_client=True), "127.0.0.1")
    assert local.max_stream_data == STREAM_WINDOW and local.max_data == CONNECTION_WINDOW
    assert local.max_datagram_size == LOOPBACK_DATAGRAM_SIZE
    remote = widen_windows(QuicConfiguration(is_client=True), "192.0.2.7")
    assert remote.max_stream_data == STREAM_WINDOW
    assert remote.max_datagram_size == default_size  # path MTU unknown: keep QUIC's safe size


def test_socket_buffers_grow_beyond_the_default():
    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(asyncio.DatagramProtocol,
                                                           local_addr=("127.0.0.1", 0))
        sock = transport.get_extra_info("socket")
        before = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        widen_socket_buffers(transport)
        after = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        transport.close()
        return before, after

    before, after = asyncio.run(main())
    assert after > before
