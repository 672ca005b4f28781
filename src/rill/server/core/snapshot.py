"""GET_SNAPSHOT_FILE: a diagnostic ZIP archive built in memory (wire §3.1, §4.13).

Owns: gathering each snapshot type as text, in Python (no shell, no external programs), and
packing one ``<type>.txt`` per gathered type with the requested compression. The archive is
built in a worker thread so the event loop keeps serving; the gatherers read only the file
system and the operating system, never the in-memory model, so they are safe off the loop.

Types:
  * filesystem_overview -- the data directory tree: kind, size, mtime (UTC) and path per entry;
  * process_list -- every process: pid, user, %CPU (CPU time over lifetime, as ``ps aux``),
    %MEM, RSS, and the command line of the server's own process only (the others show their
    name: another process's command line can carry secrets, e.g. a password);
  * resource_usage -- this process (CPU times, memory, I/O counters, open files, threads) and
    the machine (load average, CPU count, memory, swap);
  * test -- the text ``test``;
  * server_logs -- the files under ``<data dir>/logs`` concatenated oldest first (by mtime),
    at most ``MAX_LOG_BYTES`` (the newest bytes are kept); skipped when there are none.

A type that cannot be gathered is skipped and logged; the others are still returned. Failing
to finish the ZIP is 9000 ``snapshot_file_completion_failed``.

Compression byte -> zipfile method: stored, deflated, bzip2 and lzma as named; xz is written
as lzma (zipfile has no xz method); zstd is written as Zstandard where the Python zipfile
supports it (3.14+) and as deflated otherwise.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import time
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

import psutil

from rill import errors
from rill.protocol.primitives import SnapshotCompression, SnapshotType
from rill.server.auth.permissioner import Action
from rill.server.core.model import Session
from rill.server.core.state import CoreState

log = logging.getLogger(__name__)

MAX_LOG_BYTES = 64 * 1024 * 1024

COMPRESSION_METHODS: dict[SnapshotCompression, int] = {
    SnapshotCompression.STORED: zipfile.ZIP_STORED,
    SnapshotCompression.DEFLATED: zipfile.ZIP_DEFLATED,
    SnapshotCompression.BZIP2: zipfile.ZIP_BZIP2,
    SnapshotCompression.ZSTD: getattr(zipfile, "ZIP_ZSTANDARD", zipfile.ZIP_DEFLATED),
    SnapshotCompression.LZMA: zipfile.ZIP_LZMA,
    SnapshotCompression.XZ: zipfile.ZIP_LZMA,
}


class Skipped(Exception):
    """A snapshot type with nothing to report (e.g. no log files)."""


def _utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def filesystem_overview(root: Path) -> str:
    lines = [f"data directory: {root.resolve()}", f"{'kind':<5} {'bytes':>14}  {'modified (UTC)':<19}  path"]
    total = 0

    def describe(path: Path) -> None:
        nonlocal total
        try:
            info = path.lstat()
        except OSError:
            return  # removed while walking (retention, deletion): not worth reporting
        kind = "dir" if path.is_dir() and not path.is_symlink() else "file"
        if kind == "file":
            total += info.st_size
        relative = path.relative_to(root).as_posix() or "."
        lines.append(f"{kind:<5} {info.st_size:>14}  {_utc(info.st_mtime)}  {relative}")

    if not root.exists():
        raise Skipped(f"data directory {root} does not exist")
    describe(root)
    for directory, subdirectories, files in os.walk(root, onerror=lambda error: None):
        subdirectories.sort()
        base = Path(directory)
        for name in subdirectories + sorted(files):
            describe(base / name)
    lines.append(f"total file bytes: {total}")
    return "\n".join(lines) + "\n"


def process_list() -> str:
    now = time.time()
    total_memory = psutil.virtual_memory().total or 1
    header = f"{'USER':<16} {'PID':>8} {'%CPU':>6} {'%MEM':>6} {'RSS':>12}  COMMAND"
    lines = [header]
    attributes = ["pid", "username", "cpu_times", "create_time", "memory_info", "cmdline", "name"]
    own_pid = os.getpid()
    for process in psutil.process_iter(attributes):
        info = process.info
        cpu_times, created = info.get("cpu_times"), info.get("create_time")
        cpu = 0.0
        if cpu_times is not None and created and now > created:
            cpu = 100.0 * (cpu_times.user + cpu_times.system) / (now - created)
        rss = info["memory_info"].rss if info.get("memory_info") is not None else 0
        if info["pid"] == own_pid:
            command = " ".join(info.get("cmdline") or []) or f"[{info.get('name') or '?'}]"
        else:
            command = f"[{info.get('name') or '?'}]"
        user = info.get("username") or "?"
        lines.append(
            f"{user:<16} {info['pid']:>8} {cpu:>6.1f} {100.0 * rss / total_memory:>6.1f} "
            f"{rss:>12}  {command}"
        )
    return "\n".join(lines) + "\n"


def resource_usage() -> str:
    process = psutil.Process()
    lines = [f"process {process.pid}: {' '.join(process.cmdline())}"]

    def add(label: str, read: Callable[[], object]) -> None:
        try:
            lines.append(f"{label}: {read()}")
        except (psutil.Error, OSError, AttributeError, NotImplementedError) as error:
            lines.append(f"{label}: unavailable ({type(error).__name__})")

    with process.oneshot():
        add("cpu times", process.cpu_times)
        add("memory", process.memory_info)
        add("io counters", process.io_counters)
        add("open file descriptors", process.num_fds)
        add("context switches", process.num_ctx_switches)
        add("threads count", process.num_threads)
    add("load average (1, 5, 15 min)", os.getloadavg)
    add("cpu count", psutil.cpu_count)
    add("system memory", psutil.virtual_memory)
    add("swap", psutil.swap_memory)
    lines.append("threads (id, user s, system s):")
    try:
        for thread in process.threads():
            lines.append(f"  {thread.id} {thread.user_time:.2f} {thread.system_time:.2f}")
    except psutil.Error as error:
        lines.append(f"  unavailable ({type(error).__name__})")
    lines.append("open files (fd, position, path):")
    try:
        for handle in process.open_files():
            lines.append(f"  {handle.fd} {getattr(handle, 'position', '?')} {handle.path}")
    except psutil.Error as error:
        lines.append(f"  unavailable ({type(error).__name__})")
    return "\n".join(lines) + "\n"


def server_logs(logs_dir: Path) -> bytes:
    try:
        files = [path for path in logs_dir.iterdir() if path.is_file()]
    except OSError:
        raise Skipped(f"no log directory {logs_dir}") from None
    if not files:
        raise Skipped(f"no log files in {logs_dir}")
    files.sort(key=lambda path: path.stat().st_mtime)
    chunks: list[bytes] = []
    for path in files:
        chunks.append(path.read_bytes())
    data = b"".join(chunks)
    return data[-MAX_LOG_BYTES:]


def gather(snapshot_type: SnapshotType, data_root: Path, logs_dir: Path) -> bytes:
    """The text of one snapshot type; raises Skipped (or any error) when it cannot be had."""
    if snapshot_type == SnapshotType.FILESYSTEM_OVERVIEW:
        return filesystem_overview(data_root).encode("utf-8", "replace")
    if snapshot_type == SnapshotType.PROCESS_LIST:
        return process_list().encode("utf-8", "replace")
    if snapshot_type == SnapshotType.RESOURCE_USAGE:
        return resource_usage().encode("utf-8", "replace")
    if snapshot_type == SnapshotType.TEST:
        return b"test"
    if snapshot_type == SnapshotType.SERVER_LOGS:
        return server_logs(logs_dir)
    raise Skipped(f"unknown snapshot type {snapshot_type}")


def build_snapshot(
    compression: SnapshotCompression,
    types: tuple[SnapshotType, ...],
    data_root: Path,
    logs_dir: Path,
) -> bytes:
    """The ZIP archive, one ``<type>.txt`` per gathered type (each type at most once)."""
    method = COMPRESSION_METHODS[compression]
    buffer = io.BytesIO()
    now = time.localtime()[:6]
    try:
        with zipfile.ZipFile(buffer, "w", compression=method) as archive:
            for snapshot_type in dict.fromkeys(types):  # a repeated type is written once
                name = f"{snapshot_type.name.lower()}.txt"
                try:
                    content = gather(snapshot_type, data_root, logs_dir)
                except Skipped as reason:
                    log.info("snapshot: %s skipped: %s", name, reason)
                    continue
                except Exception:
                    log.warning("snapshot: %s could not be gathered, skipped", name, exc_info=True)
                    continue
                entry = zipfile.ZipInfo(name, date_time=now)
                entry.compress_type = method
                entry.external_attr = 0o644 << 16
                archive.writestr(entry, content)
    except Exception as error:
        log.exception("snapshot: the ZIP archive could not be completed")
        raise errors.SnapshotFileCompletionFailed() from error
    return buffer.getvalue()


class SnapshotService:
    def __init__(self, state: CoreState) -> None:
        self.state = state

    async def get_snapshot(self, session: Session, compression: SnapshotCompression,
                           types: Sequence[SnapshotType]) -> bytes:
        self.state.authorize(session, Action.READ_SERVER)  # read_servers or manage_servers
        paths = self.state.paths
        return await asyncio.to_thread(
            build_snapshot, compression, types, paths.root, paths.logs_dir
        )
