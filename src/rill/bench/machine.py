"""What this machine itself can do, measured beside ``rill bench compare``'s targets.

Owns: ``measure_machine`` and its two measurements, each a ``Capability`` row labelled for
exactly what it measured:

* ``loopback_tcp``: one TCP stream over 127.0.0.1 measured by iperf3 (a C tool: ``iperf3 -s
  -B 127.0.0.1 -p PORT -1`` and ``iperf3 -c 127.0.0.1 -p PORT -t N -J``), the received bytes
  per second of its JSON summary (``parse_iperf3``). Without iperf3 the row says "not measured
  (iperf3 not installed)" and carries no number: a Python loop is not a stand-in for it.
* ``disk_write``: a sequential write of 1 MiB blocks to a fresh file in the directory the
  servers keep their data in, with ``fdatasync`` at the end (``fsync interval``'s kind of
  work) or after every block (``fsync always``: one sync per acknowledged batch). Python only
  issues the ``write`` and ``fdatasync`` calls; the kernel and the disk do the work.

Invariants: every figure is MB/s with MB = 10**6 bytes, like the rest of the report; a
measurement that could not run is a row with ``mb_per_s`` None and the reason, never a
guessed or substituted number; the child iperf3 server listens on 127.0.0.1 only and is
always reaped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from rill.bench.peers import stop_process
from rill.bench.ports import free_port

BLOCK = 1024 * 1024
DISK_MIB = 128
IPERF3_SECONDS = 2
IPERF3 = "iperf3"
DISK_SYNC_EVERY = {"interval": None, "always": 1}  # fsync mode -> fdatasync every N blocks (None: at the end)


@dataclass(frozen=True, slots=True)
class Capability:
    """One measured capability of the machine: ``mb_per_s`` None when it was not measured."""

    name: str  # "loopback_tcp" | "disk_write"
    label: str  # what the row is, for people
    how: str  # the exact method
    mb_per_s: float | None
    fsync: str | None = None  # the fsync mode it stands beside (disk rows)
    reason: str | None = None  # why it was not measured

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- loopback TCP, iperf3 ---------------------------------------------------------------------


def parse_iperf3(output: str) -> float:
    """MB/s received in an ``iperf3 -J`` client report (ValueError when it holds none)."""
    try:
        report = json.loads(output)
    except json.JSONDecodeError as error:
        raise ValueError(f"iperf3 printed no JSON ({error})") from None
    if not isinstance(report, dict):
        raise ValueError("iperf3's JSON is not an object")
    if report.get("error"):
        raise ValueError(f"iperf3: {report['error']}")
    end = report.get("end") or {}
    summary = end.get("sum_received") or end.get("sum") or {}
    bits = summary.get("bits_per_second")
    if not isinstance(bits, (int, float)) or bits <= 0:
        raise ValueError("iperf3's JSON has no end.sum_received.bits_per_second")
    return round(bits / 8 / 1e6, 1)


def loopback_tcp(seconds: int = IPERF3_SECONDS, binary: str = IPERF3) -> Capability:
    """One TCP stream over 127.0.0.1 for ``seconds`` (iperf3's own server and client; whole
    seconds: iperf3 reads ``-t 0.5`` as ``-t 0``, which runs for ever)."""
    seconds = max(1, int(seconds))
    label = "machine: loopback TCP (iperf3)"
    how = f"iperf3, 1 TCP stream over 127.0.0.1 for {seconds:g} s, bytes received per second"
    path = shutil.which(binary)
    if path is None:
        return Capability("loopback_tcp", label, how, None, reason="not measured (iperf3 not installed)")
    try:
        output = ""
        for _ in range(3):  # a port taken between free_port() and iperf3's bind: another port
            port = free_port()
            server = subprocess.Popen([path, "-s", "-B", "127.0.0.1", "-p", str(port), "-1"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                if not _listening(server, port, timeout=10.0):
                    continue  # it could not bind: try another port
                client = subprocess.run(  # the one client of this one-off (-1) server
                    [path, "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"],
                    capture_output=True, text=True, timeout=seconds + 30)
                output = client.stdout
                break
            finally:
                stop_process(server)
        mb_per_s = parse_iperf3(output)
    except (ValueError, OSError, subprocess.TimeoutExpired) as error:
        return Capability("loopback_tcp", label, how, None, reason=f"not measured ({error})")
    return Capability("loopback_tcp", label, how, mb_per_s)


def _listening(server: subprocess.Popen[str], port: int, timeout: float) -> bool:
    """Whether ``server`` listens on ``port`` within ``timeout`` (read from its sockets, so
    that the one connection a ``-1`` server takes is the measurement's)."""
    deadline = time.monotonic() + timeout
    while server.poll() is None and time.monotonic() < deadline:
        try:
            sockets = psutil.Process(server.pid).net_connections(kind="tcp")
        except psutil.Error:
            return False
        if any(s.status == psutil.CONN_LISTEN and s.laddr.port == port for s in sockets):
            return True
        time.sleep(0.02)
    return False


# --- sequential disk write + fdatasync --------------------------------------------------------


def disk_write(directory: str | Path | None = None, mib: int = DISK_MIB, sync_every: int | None = None,
               fsync: str | None = None) -> Capability:
    """Write ``mib`` blocks of 1 MiB to a new file in ``directory`` (the system's temporary
    directory by default), ``fdatasync`` every ``sync_every`` blocks and at the end; the file
    is removed after. MB/s over the whole time, the final sync included."""
    label = "machine: disk sequential write + fdatasync"
    every = "at the end" if sync_every is None else (
        "after every block" if sync_every == 1 else f"every {sync_every} blocks and at the end")
    how = f"sequential write of {mib} × 1 MiB blocks to a new file, fdatasync {every}"
    block = os.urandom(BLOCK)
    try:
        with tempfile.TemporaryDirectory(prefix="rill-machine-disk-", dir=directory) as workdir:
            descriptor = os.open(Path(workdir) / "sequential.bin", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                started = time.perf_counter()
                for index in range(1, mib + 1):
                    view = memoryview(block)
                    while view:
                        view = view[os.write(descriptor, view):]
                    if sync_every is not None and index % sync_every == 0:
                        os.fdatasync(descriptor)
                os.fdatasync(descriptor)
                seconds = time.perf_counter() - started
            finally:
                os.close(descriptor)
    except OSError as error:
        return Capability("disk_write", label, how, None, fsync, reason=f"not measured ({error})")
    return Capability("disk_write", label, how, round(mib * BLOCK / seconds / 1e6, 1), fsync)


def measure_machine(fsync_modes: tuple[str, ...] | list[str], directory: str | Path | None = None,
                    mib: int = DISK_MIB, seconds: int = IPERF3_SECONDS,
                    iperf3: str = IPERF3) -> list[Capability]:
    """Loopback TCP once, then the disk once per fsync mode (synced as that mode syncs)."""
    rows = [loopback_tcp(seconds, iperf3)]
    for mode in fsync_modes:
        rows.append(disk_write(directory, mib, DISK_SYNC_EVERY[mode], mode))
    return rows
