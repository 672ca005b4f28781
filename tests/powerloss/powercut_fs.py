"""A FUSE file system for power-loss tests: unsynced file data is kept apart and a simulated
power cut drops it (in the spirit of LazyFS).

Run as a process: ``python powercut_fs.py BACKING MOUNTPOINT``. Everything under MOUNTPOINT is
BACKING, with one difference: data written to a file (``write``, ``truncate``, ``fallocate``)
is not written to BACKING but kept in memory, per file (by the backing inode, so it follows
renames and open descriptors), in 4 KiB pages plus the file's current size. Reads see it, as
they would see the page cache. ``fsync``/``fdatasync`` of a file writes its pages and size to
BACKING and syncs them there: only then does the data survive a cut.

A power cut: creating the file ``/.powercut`` in the mount (``open(mount / ".powercut", "w")``)
drops every file's unsynced data at once and answers EIO. The test then kills whatever used the
mount, unmounts it and mounts BACKING again: what a machine sees after a power loss, provided
its file system keeps synced data.

Metadata operations (create, mkdir, unlink, rmdir, rename, chmod) are applied to BACKING at
once: they are durable without an fsync of the directory. That is what ext4 and XFS give in
practice (their journals commit metadata in order) and what LazyFS models; the strict POSIX
model (a new directory entry is durable only after an fsync of its directory) is not simulated.
A file created and renamed into place without an fsync of its data is therefore caught (it
comes back empty), a missing directory fsync is not.

Single-threaded (``nothreads``): FUSE requests are served one at a time, so no locks.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from dataclasses import dataclass, field

from mfusepy import FUSE, FuseOSError, Operations

PAGE = 4096
CUT_FILE = "/.powercut"


@dataclass
class Unsynced:
    """A file's data that is not durable: whole pages and the current size. Bytes of the backing
    file at or after ``backing_limit`` are stale (cut by an unsynced truncation) and read as 0."""

    size: int
    backing_limit: int
    pages: dict[int, bytearray] = field(default_factory=dict)


class PowerCutFS(Operations):
    use_ns = True

    def __init__(self, backing: str) -> None:
        self.backing = os.path.realpath(backing)
        self.unsynced: dict[tuple[int, int], Unsynced] = {}  # (st_dev, st_ino) -> data
        self.descriptors: dict[int, int] = {}  # fh -> backing descriptor
        self.open_count: dict[tuple[int, int], int] = {}
        self.unlinked: set[tuple[int, int]] = set()  # removed while open: forget at last close
        self.cuts = 0

    # -- helpers ---------------------------------------------------------------------------

    def _path(self, path: str) -> str:
        return os.path.join(self.backing, path.lstrip("/"))

    @staticmethod
    def _key(info: os.stat_result) -> tuple[int, int]:
        return (info.st_dev, info.st_ino)

    def _key_of_path(self, path: str) -> tuple[int, int] | None:
        try:
            return self._key(os.lstat(self._path(path)))
        except FileNotFoundError:
            return None

    def _unsynced(self, key: tuple[int, int], descriptor: int) -> Unsynced:
        entry = self.unsynced.get(key)
        if entry is None:
            size = os.fstat(descriptor).st_size
            entry = self.unsynced[key] = Unsynced(size, size)
        return entry

    def _page(self, entry: Unsynced, number: int, descriptor: int) -> bytearray:
        page = entry.pages.get(number)
        if page is None:
            valid = max(0, min(PAGE, entry.backing_limit - number * PAGE))
            page = bytearray(os.pread(descriptor, valid, number * PAGE).ljust(PAGE, b"\0"))
            entry.pages[number] = page
        return page

    def _forget(self, key: tuple[int, int] | None) -> None:
        """A name went away: its unsynced data goes too, once nobody has it open."""
        if key is None:
            return
        if self.open_count.get(key):
            self.unlinked.add(key)
        else:
            self.unsynced.pop(key, None)

    # -- metadata (durable at once) --------------------------------------------------------

    def getattr(self, path, fh=None):
        info = os.fstat(self.descriptors[fh]) if fh is not None and fh in self.descriptors \
            else os.lstat(self._path(path))
        attributes = {key: getattr(info, key) for key in (
            "st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime_ns",
            "st_mtime_ns", "st_ctime_ns")}
        for name in ("atime", "mtime", "ctime"):
            attributes[f"st_{name}"] = attributes.pop(f"st_{name}_ns")
        entry = self.unsynced.get(self._key(info))
        if entry is not None and stat.S_ISREG(info.st_mode):
            attributes["st_size"] = entry.size
        return attributes

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._path(path))

    def access(self, path, amode):
        if not os.access(self._path(path), amode):
            raise FuseOSError(errno.EACCES)
        return 0

    def statfs(self, path):
        info = os.statvfs(self._path(path))
        return {key: getattr(info, key) for key in (
            "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
            "f_flag", "f_frsize", "f_namemax")}

    def mkdir(self, path, mode):
        os.mkdir(self._path(path), mode)
        return 0

    def rmdir(self, path):
        os.rmdir(self._path(path))
        return 0

    def unlink(self, path):
        key = self._key_of_path(path)
        os.unlink(self._path(path))
        self._forget(key)
        return 0

    def rename(self, old, new):
        replaced = self._key_of_path(new)
        os.rename(self._path(old), self._path(new))
        if replaced is not None and replaced != self._key_of_path(new):
            self._forget(replaced)
        return 0

    def chmod(self, path, mode):
        os.chmod(self._path(path), mode)
        return 0

    def chown(self, path, uid, gid):
        os.chown(self._path(path), uid, gid)
        return 0

    def utimens(self, path, times=None):
        os.utime(self._path(path), ns=times)
        return 0

    # -- files -----------------------------------------------------------------------------

    def _register(self, descriptor: int) -> int:
        key = self._key(os.fstat(descriptor))
        self.open_count[key] = self.open_count.get(key, 0) + 1
        fh = descriptor  # the backing descriptor is a unique handle while open
        self.descriptors[fh] = descriptor
        return fh

    def create(self, path, mode, fi=None):
        if path == CUT_FILE:
            self.unsynced.clear()
            self.cuts += 1
            raise FuseOSError(errno.EIO)
        return self._register(os.open(self._path(path), os.O_RDWR | os.O_CREAT, mode))

    def open(self, path, flags):
        try:
            descriptor = os.open(self._path(path), os.O_RDWR)
        except IsADirectoryError:
            descriptor = os.open(self._path(path), os.O_RDONLY)
        except PermissionError:
            descriptor = os.open(self._path(path), os.O_RDONLY)
        return self._register(descriptor)

    def release(self, path, fh):
        descriptor = self.descriptors.pop(fh)
        key = self._key(os.fstat(descriptor))
        remaining = self.open_count.get(key, 1) - 1
        if remaining:
            self.open_count[key] = remaining
        else:
            self.open_count.pop(key, None)
            if key in self.unlinked:
                self.unlinked.discard(key)
                self.unsynced.pop(key, None)
        os.close(descriptor)
        return 0

    def flush(self, path, fh):
        return 0  # close is not a sync

    def read(self, path, size, offset, fh):
        descriptor = self.descriptors[fh]
        entry = self.unsynced.get(self._key(os.fstat(descriptor)))
        if entry is None:
            return os.pread(descriptor, size, offset)
        end = min(offset + size, entry.size)
        if end <= offset:
            return b""
        valid = max(0, min(end, entry.backing_limit) - offset)
        data = bytearray(os.pread(descriptor, valid, offset).ljust(end - offset, b"\0"))
        for number in range(offset // PAGE, (end - 1) // PAGE + 1):
            page = entry.pages.get(number)
            if page is not None:
                start = max(offset, number * PAGE)
                stop = min(end, (number + 1) * PAGE)
                data[start - offset:stop - offset] = page[start - number * PAGE:stop - number * PAGE]
        return bytes(data)

    def write(self, path, data, offset, fh):
        descriptor = self.descriptors[fh]
        entry = self._unsynced(self._key(os.fstat(descriptor)), descriptor)
        position = offset
        view = memoryview(data)
        while view:
            number, within = divmod(position, PAGE)
            page = self._page(entry, number, descriptor)
            piece = min(len(view), PAGE - within)
            page[within:within + piece] = view[:piece]
            view = view[piece:]
            position += piece
        entry.size = max(entry.size, offset + len(data))
        return len(data)

    def truncate(self, path, length, fh=None):
        if fh is not None and fh in self.descriptors:
            descriptor, owned = self.descriptors[fh], False
        else:
            descriptor, owned = os.open(self._path(path), os.O_RDWR), True
        try:
            entry = self._unsynced(self._key(os.fstat(descriptor)), descriptor)
            for number in [n for n in entry.pages if n * PAGE >= length]:
                del entry.pages[number]
            entry.backing_limit = min(entry.backing_limit, length)
            if length % PAGE and length < entry.size:
                page = self._page(entry, length // PAGE, descriptor)
                page[length % PAGE:] = bytes(PAGE - length % PAGE)
            entry.size = length  # growing: what lies past the old size reads as zeros
        finally:
            if owned:
                os.close(descriptor)
        return 0

    def fallocate(self, path, mode, offset, size, fh):
        if mode != 0:
            raise FuseOSError(errno.EOPNOTSUPP)
        descriptor = self.descriptors[fh]
        entry = self._unsynced(self._key(os.fstat(descriptor)), descriptor)
        if offset + size > entry.size:
            self.truncate(path, offset + size, fh)
        return 0

    def fsync(self, path, datasync, fh):
        descriptor = self.descriptors[fh]
        entry = self.unsynced.pop(self._key(os.fstat(descriptor)), None)
        if entry is not None:
            os.ftruncate(descriptor, entry.backing_limit)  # stale bytes go first
            for number, page in sorted(entry.pages.items()):
                if number * PAGE < entry.size:
                    os.pwrite(descriptor, page[: min(PAGE, entry.size - number * PAGE)], number * PAGE)
            os.ftruncate(descriptor, entry.size)
        os.fsync(descriptor)
        return 0

    def fsyncdir(self, path, datasync, fh):
        return 0  # metadata is durable at once (see the module docstring)


def main() -> None:
    backing, mountpoint = sys.argv[1], sys.argv[2]
    FUSE(PowerCutFS(backing), mountpoint, foreground=True, nothreads=True, fsname="powercut",
         default_permissions=True)


if __name__ == "__main__":
    main()
