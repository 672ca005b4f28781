"""The bare server of ``rill bench compare``: bytes appended equal bytes sent, and the file
streams back unchanged; the driver sends rill's own SEND frames."""

from __future__ import annotations

import socket
import struct

import pytest

from rill.bench.peers import PeerUnavailable, Workload, run_async
from rill.bench.peers.bare import POLL_CODE, SEND_CODE, BarePeer, send_frame_payload
from rill.protocol.iggy.commands.messages import SendMessages

MESSAGES = 2000
SIZE = 1000


def _request(connection: socket.socket, code: int, payload: bytes) -> tuple[int, bytes]:
    connection.sendall(struct.pack("<II", len(payload) + 4, code) + payload)
    header = _read(connection, 8)
    status, length = struct.unpack("<II", header)
    return status, _read(connection, length)


def _read(connection: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        assert chunk, "server closed the connection"
        data += chunk
    return bytes(data)


@pytest.mark.parametrize("fsync", ["interval", "always"])
def test_bare_appends_what_was_sent_and_streams_it_back(tmp_path, fsync):
    peer = BarePeer(Workload(MESSAGES, SIZE, 1000, fsync))
    peer.start(tmp_path)
    try:
        assert peer.describe()["fsync"] == fsync
        produced = run_async(peer.publish)
        consumed = run_async(peer.consume)
    finally:
        peer.stop()
    assert (produced.messages, produced.bytes, len(produced.latencies_us)) == (MESSAGES, MESSAGES * SIZE, 2)
    assert (consumed.messages, consumed.bytes, len(consumed.latencies_us)) == (MESSAGES, MESSAGES * SIZE, 2)
    stored = peer.file.read_bytes()
    frame_sizes = [size for _, size in peer._sent]
    assert len(stored) == sum(frame_sizes)
    # what was appended is exactly the SEND payloads, i.e. what rill would have received
    first = SendMessages.decode(stored[: frame_sizes[0]])
    assert first.stream_id.value == 1 and first.topic_id.value == 1
    assert len(first.messages) == 1000 * (16 + 4 + 4 + SIZE)
    assert stored[: frame_sizes[0]] == stored[frame_sizes[0]:]  # the same batch, twice


def test_bare_server_over_a_plain_socket(tmp_path):
    peer = BarePeer(Workload(10, 100, 10, "always"))
    peer.start(tmp_path)
    try:
        frames = [send_frame_payload([bytes([index]) * 100 for _ in range(10)]) for index in range(3)]
        with socket.create_connection(("127.0.0.1", peer.port)) as connection:
            for frame in frames:
                assert _request(connection, SEND_CODE, frame) == (0, b"")
            assert peer.file.read_bytes() == b"".join(frames)
            # stream back in pieces of any size, then nothing once the end is reached
            with socket.create_connection(("127.0.0.1", peer.port)) as reader:
                got = b""
                while True:
                    status, chunk = _request(reader, POLL_CODE, struct.pack("<I", 1000))
                    assert status == 0
                    if not chunk:
                        break
                    got += chunk
            assert got == b"".join(frames)
    finally:
        peer.stop()
    assert peer.process is None


def test_bare_unavailable_when_its_python_cannot_start(tmp_path):
    with pytest.raises(PeerUnavailable, match="cannot run"):
        BarePeer(Workload(10, 10, 10), python=str(tmp_path / "no-python")).start(tmp_path)
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'no module named rill' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(PeerUnavailable, match="bare server did not start.*no module named rill"):
        BarePeer(Workload(10, 10, 10), python=str(broken)).start(tmp_path / "work")
