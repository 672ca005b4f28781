"""The data directory's lock: one server per data directory.

Owns ``DataDirectoryLock``: an exclusive ``flock`` on ``<data>/rill.lock``, taken before anything
else in the directory is read or written and held for the life of the server. The kernel drops
it when the process ends, however it ends, so a kill -9 leaves no stale lock behind. The holder
writes its pid, host and start time into the file, so that a refused second server can name it.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path


class DataDirectoryInUse(Exception):
    """Another process holds the data directory's lock; the message names it."""


class DataDirectoryLock:
    def __init__(self, path: Path, descriptor: int) -> None:
        self.path = path
        self._descriptor: int | None = descriptor

    @classmethod
    def acquire(cls, path: Path) -> DataDirectoryLock:
        """Take the lock at ``path`` or raise ``DataDirectoryInUse`` naming its holder."""
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(os.pread(descriptor, 4096, 0))
            os.close(descriptor)
            raise DataDirectoryInUse(
                f"the data directory {path.parent} is in use by another rill server ({holder}): "
                f"stop that one first, or give this one another --data-dir"
            ) from None
        except BaseException:
            os.close(descriptor)
            raise
        holder = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                             "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}).encode()
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, holder + b"\n", 0)
        return cls(path, descriptor)

    def release(self) -> None:
        """Let the directory go (closing the descriptor drops the lock). Idempotent."""
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None


def _describe(content: bytes) -> str:
    try:
        holder = json.loads(content)
        return f"pid {holder['pid']} on {holder['host']}, started {holder['started']}"
    except (ValueError, KeyError, TypeError):
        return "its pid is not recorded"
