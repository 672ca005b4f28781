"""Space kept free for the metadata store, so that a full disk can still be freed through rill.

Owns ``metadata.reserve``: a file of a configured size on the data directory's file system.
When a metadata write finds the disk full, the store releases the reserve and retries: that is
what lets DELETE_TOPIC, DELETE_STREAM, PURGE and the like (which need a little room in the
SQLite write-ahead log before they free anything) work at 0 bytes free, also after a restart.
While the reserve is released, message data may not take the last ``size`` free bytes
(``room_for_data``), so the room it left stays with the metadata. The reserve is taken again
once there is room for it (``take``: at start, after deletions), never from the last free bytes.

Invariants: the reserve is either absent or whole (built under a temporary name, then renamed);
taking it never fails loudly (a disk without room has no reserve, and one warning says so);
releasing it is idempotent; when it is held, ``room_for_data`` costs nothing.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


class SpaceReserve:
    def __init__(self, path: Path, size: int) -> None:
        self.path = Path(path)
        self.size = size
        self._warned = False
        try:
            self.held = self.path.stat().st_size == size > 0
        except FileNotFoundError:
            self.held = False

    def _free_bytes(self) -> int:
        try:
            usage = os.statvfs(self.path.parent)
        except OSError:
            return 0
        return usage.f_bavail * usage.f_frsize

    def take(self) -> bool:
        """Make sure the reserve exists; False when it is off or there is no room for it."""
        if self.size <= 0 or self.held:
            return self.held
        free = self._free_bytes()
        if free < 2 * self.size:  # never take the last free bytes
            self._warn_once(f"only {free} bytes free")
            return False
        temporary = self.path.with_name(self.path.name + ".tmp")
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.posix_fallocate(descriptor, 0, self.size)
            finally:
                os.close(descriptor)
            os.replace(temporary, self.path)
        except OSError as error:
            temporary.unlink(missing_ok=True)
            self._warn_once(str(error))
            return False
        if self._warned:
            log.warning("metadata reserve of %d bytes taken again (%s)", self.size, self.path)
        self._warned = False
        self.held = True
        return True

    def release(self) -> bool:
        """Free the reserve's space; returns whether there was one to free."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            self.held = False
            return False
        self.held = False
        log.warning("disk full: released the %d-byte metadata reserve (%s) for a metadata write",
                    self.size, self.path)
        return True

    def room_for_data(self) -> bool:
        """Whether message data may be written: always while the reserve is held; otherwise only
        while more than its size is free (taking it again when there is room for it)."""
        if self.held or self.size <= 0:
            return True
        free = self._free_bytes()
        if free >= 2 * self.size:
            self.take()
        return free > self.size

    def _warn_once(self, reason: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("no metadata reserve (%d bytes) at %s: %s", self.size, self.path, reason)
