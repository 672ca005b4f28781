"""A raw binary link for transport and protocol tests: frames written and answers read as
bytes over a real TCP socket, with no SDK in between."""

from __future__ import annotations

import socket
import struct

from rill.protocol.iggy.commands.users import LoginUser


class RawLink:
    def __init__(self, address: tuple[str, int]):
        self.sock = socket.create_connection(address, timeout=10)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_exact(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return bytes(data)

    def response(self) -> tuple[int, bytes]:
        status, length = struct.unpack("<II", self.read_exact(8))
        return status, self.read_exact(length)

    def ask(self, frame: bytes) -> tuple[int, bytes]:
        """Send one request frame and read its answer: (status, payload)."""
        self.send(frame)
        return self.response()

    def is_closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, socket.timeout):
            return True

    def login(self) -> None:
        self.send(LoginUser("iggy", "iggy").to_frame())
        assert self.response() == (0, struct.pack("<I", 1))

    def close(self) -> None:
        self.sock.close()
