"""The **bare** row of ``rill bench compare``: a bare Python server, the I/O without the work.

Owns: a minimal server (run as ``python -m rill.bench.peers.bare``) and its driver
``BarePeer``, and what it shares with ``kafka_bare``'s broker: ``FileServer`` (the file, the
listener, a thread per connection, the fsync policy), ``run_server`` (their ``main``),
``start_server`` (a driver starting one) and ``recv_exactly``. The server reads Iggy-framed
requests (``[length u32][code u32][payload]``) and

* for any code but POLL appends the payload to one file with a single ``os.write`` and answers
  8 zero bytes (status 0, length 0) — after an ``fsync`` for ``--fsync always``, while a
  background thread fsyncs the file once a second for ``--fsync interval``;
* for POLL (code 100, payload ``u32 nbytes``) streams the next ``nbytes`` of that file back to
  this connection with ``sendfile`` (status 0, length, bytes).

It does no per-message work at all (it never looks inside a payload), so the figures are the
cost of framing, syscalls, the disk and the client as this simple design pays it. It is a
reference point, not a limit: rill, which does the same I/O plus the real work with batching,
group commit and append threads, has beaten it (1.79× in one run). What the
machine itself can do is measured by ``rill.bench.machine``. Blocking sockets, one thread per
connection, ``recv_into`` one preallocated buffer with ``MSG_WAITALL``: the GIL is released for
every syscall.

The driver sends exactly the SEND frames rill gets (the same pre-encoded message region,
stream/topic identifiers and partitioning) through rill's own SDK transport
(``rill.client.tcp.TcpTransport``), so rill's fraction of this row isolates the server.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from rill.bench.peers import Peer, PeerUnavailable, Workload, stop_process
from rill.bench.results import ActorResult
from rill.protocol.iggy.framing import REQUEST_HEADER, RESPONSE_HEADER

POLL_CODE = 100
SEND_CODE = 101
_U32 = struct.Struct("<I")
_OK_EMPTY = bytes(8)
_INITIAL_BUFFER = 2 * 1024 * 1024
SYNC_INTERVAL_SECONDS = 1.0
READY_LINE = "BARE LISTENING"


# --- the server ---------------------------------------------------------------------------------


def recv_exactly(connection: socket.socket, view: memoryview, size: int) -> bool:
    """Fill ``view[:size]``; False on a clean end of stream before the first byte."""
    got = 0
    while got < size:
        count = connection.recv_into(view[got:size], size - got, socket.MSG_WAITALL)
        if count == 0:
            if got:
                raise ConnectionError("connection closed inside a frame")
            return False
        got += count
    return True


class FileServer(ABC):
    """What the bare servers share (this one and ``kafka_bare``'s): one file, emptied at start,
    appended to (``fd``) and read back (``read_fd``); a listener on 127.0.0.1, port 0; a thread
    per connection (``_serve``); with ``--fsync interval`` a thread fsyncs the file once a second
    when it was written (``dirty``), with ``always`` the server fsyncs before each answer."""

    def __init__(self, path: Path, fsync: str):
        self.path = path
        self.always = fsync == "always"
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
        self.read_fd = os.open(path, os.O_RDONLY)
        self.dirty = False
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]

    def serve_forever(self) -> None:
        if not self.always:
            threading.Thread(target=self._sync_every_second, daemon=True).start()
        while True:
            connection, _ = self.listener.accept()
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _sync_every_second(self) -> None:
        while True:
            time.sleep(SYNC_INTERVAL_SECONDS)
            if self.dirty:
                self.dirty = False
                os.fsync(self.fd)

    @abstractmethod
    def _serve(self, connection: socket.socket) -> None:
        """Answer one connection's requests until it ends (its own thread)."""


def run_server(server_class: type[FileServer], ready_line: str, description: str,
               argv: list[str] | None = None) -> None:
    """A bare server's ``main``: ``--file F --fsync interval|always``, then ``ready_line`` and
    the port on stdout once it listens, then serve until interrupted."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--file", type=Path, required=True, help="the file to append to")
    parser.add_argument("--fsync", choices=("interval", "always"), default="interval")
    args = parser.parse_args(argv)
    server = server_class(args.file, args.fsync)
    print(f"{ready_line} {server.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


def start_server(peer: Peer, command: list[str], log: Path, ready_line: str) -> None:
    """Run a bare server's ``command`` for ``peer`` and take its port from its ready line;
    PeerUnavailable (with its first line, or the last lines of ``log``) when it does not start."""
    try:
        with log.open("wb") as errors:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors,
                                       stdin=subprocess.DEVNULL)
    except OSError as error:
        raise PeerUnavailable(f"cannot run {command[0]}: {error}") from error
    peer.process = process
    line = process.stdout.readline().decode(errors="replace").strip() if process.stdout else ""
    if not line.startswith(ready_line):
        stop_process(process)
        peer.process = None
        detail = line or " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        raise PeerUnavailable(f"{peer.name} server did not start: {detail}")
    peer.port = int(line.split()[-1])


class BareServer(FileServer):
    """The minimal append/stream-back server over one file (see the module docstring)."""

    def _serve(self, connection: socket.socket) -> None:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        header = bytearray(8)
        header_view = memoryview(header)
        buffer = bytearray(_INITIAL_BUFFER)
        view = memoryview(buffer)
        fd, read_fd, always = self.fd, self.read_fd, self.always
        read_position = 0
        try:
            while recv_exactly(connection, header_view, 8):
                length, code = REQUEST_HEADER.unpack_from(header)
                size = length - 4
                if size > len(buffer):
                    buffer = bytearray(size)
                    view = memoryview(buffer)
                if size and not recv_exactly(connection, view, size):
                    raise ConnectionError("connection closed inside a frame")
                if code == POLL_CODE:
                    wanted = _U32.unpack_from(buffer)[0]
                    available = max(0, min(wanted, os.fstat(read_fd).st_size - read_position))
                    connection.send(RESPONSE_HEADER.pack(0, available), socket.MSG_MORE)
                    sent = 0
                    while sent < available:
                        sent += os.sendfile(
                            connection.fileno(), read_fd, read_position + sent, available - sent
                        )
                    read_position += available
                    continue
                written = 0
                while written < size:
                    written += os.write(fd, view[written:size])
                if always:
                    os.fsync(fd)
                else:
                    self.dirty = True
                connection.sendall(_OK_EMPTY)
        except OSError:
            pass
        finally:
            connection.close()


def main(argv: list[str] | None = None) -> None:
    run_server(BareServer, READY_LINE, "rill bench compare: the bare server", argv)


# --- the driver -------------------------------------------------------------------------------


def send_frame_payload(payloads: list[bytes]) -> bytes:
    """The SEND payload rill gets for these payloads: stream 1, topic 1, partition 1, region."""
    from rill.protocol.iggy.commands.messages import SendMessages
    from rill.protocol.iggy.primitives import Identifier, Partitioning

    return SendMessages.of(
        Identifier.of(1), Identifier.of(1), Partitioning.partition_id(1), payloads
    ).encode()


class BarePeer(Peer):
    name = "bare"
    client = "rill SDK TcpTransport (raw frames)"

    def __init__(self, workload: Workload, python: str | None = None):
        super().__init__(workload)
        self.python = python or sys.executable  # the interpreter that runs the bare server
        self.file: Path | None = None
        self._sent: list[tuple[int, int]] = []  # (messages, payload bytes) per acknowledged frame

    def start(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.file = workdir / "bare.log"
        self.file.unlink(missing_ok=True)
        command = [
            self.python, "-m", "rill.bench.peers.bare",
            "--file", str(self.file), "--fsync", self.workload.fsync,
        ]
        start_server(self, command, workdir / "bare-server.log", READY_LINE)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "fsync": self.workload.fsync, "file": str(self.file)}

    async def _connect(self) -> Any:
        from rill.client.tcp import TcpTransport

        transport = TcpTransport(f"127.0.0.1:{self.port}")
        await transport.connect()
        return transport

    async def publish(self) -> ActorResult:
        workload = self.workload
        payloads = workload.payloads()
        frames: dict[int, bytes] = {}
        for count in set(workload.batch_sizes()):
            frames[count] = send_frame_payload(payloads[:count])
        transport = await self._connect()
        recorder = self.recorder("producer")
        perf_counter = time.perf_counter
        size = workload.message_size
        self._sent = []
        try:
            recorder.start()
            for count in workload.batch_sizes():
                frame = frames[count]
                started = perf_counter()
                await transport.request(SEND_CODE, frame)
                recorder.record(perf_counter() - started, count, count * size)
                self._sent.append((count, len(frame)))
            return recorder.finish()
        finally:
            await transport.close()

    async def consume(self) -> ActorResult:
        if not self._sent:
            raise RuntimeError("bare: consume() needs a publish() first")
        transport = await self._connect()
        recorder = self.recorder("consumer")
        perf_counter = time.perf_counter
        size = self.workload.message_size
        try:
            recorder.start()
            for count, nbytes in self._sent:
                started = perf_counter()
                region = await transport.request(POLL_CODE, _U32.pack(nbytes))
                if len(region) != nbytes:
                    raise RuntimeError(f"bare: streamed back {len(region)} of {nbytes} bytes")
                recorder.record(perf_counter() - started, count, count * size)
            return recorder.finish()
        finally:
            await transport.close()


if __name__ == "__main__":
    main()
