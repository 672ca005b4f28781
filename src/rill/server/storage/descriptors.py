"""Descriptors: every segment file the process has open, opened on demand against one budget.

Owns: the process-wide ``DescriptorCache`` (``shared()``; its budget is set from
``[system] max_open_files`` by ``configure``), ``CachedFile`` (one segment file: its path and
how to open it; the cache opens its descriptor when it is used and may close it when it is
not), and ``MappedFile`` (a sealed segment's index, memory-mapped on demand). 10,000 partitions
therefore need no 20,000 descriptors: a partition that is not being written or read holds none.
The cache is process-wide on purpose, shared by every server in the process: the open-file
limit it keeps under is the process's.

Invariants:
  * A descriptor is used only while pinned (``pin``/``unpin``): the cache closes unpinned
    ones only, least recently used first, so a thread writing or syncing through one never
    sees it closed or its number reused. ``close`` of a pinned file waits for its last unpin.
  * At most ``budget`` descriptors are held through the cache: open files (the ones whose close
    waits for an unpin included) and mappings, which hold one each (CPython's ``mmap`` keeps a
    duplicate of the descriptor it maps, until 3.13's ``trackfd``; the one opened to make the
    mapping is closed right after). Mappings are bounded by ``max_maps`` as well. Pinned
    descriptors are never closed, so while more than ``budget`` are pinned at once (a budget
    smaller than the threads that may each hold one) the count exceeds it until they are
    unpinned. An open that fails with EMFILE or ENFILE (other descriptors of the process used
    more than their share) closes the least recently used and tries again.
  * Reopening never creates or truncates: a file is created once (``create``) and reopened
    without ``O_CREAT``/``O_TRUNC``, so its bytes are what the last write left.
  * Closing a descriptor loses nothing written through it and no durability promise: the
    written data stays in the page cache, per file, and ``Durability`` still owes an fsync of
    the file; it pins the file for that fsync, reopening it if need be (fsync makes a file's
    data durable whichever of its descriptors wrote it). A write-back error the kernel records
    for the file is reported to the first fsync after it, from any descriptor (Linux >= 4.16).
  * Mappings are used on the event loop only, within one method of the segment: one the cache
    drops is closed by reference counting once that method no longer holds it, so it is never
    closed under a reader (and a replaced index file is mapped anew on its next read).
  * Thread safe: appends and fsyncs pin from worker threads. One lock guards the bookkeeping;
    it is held across ``open``/``close``/``mmap`` calls only, never across reads, writes or
    fsyncs.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import threading
from collections import OrderedDict
from pathlib import Path

logger = logging.getLogger(__name__)

MIN_OPEN_FILES = 16  # the smallest budget [system] max_open_files accepts
# Mapped sealed indexes kept at most (within the budget): every mapping is also an entry of
# vm.max_map_count (65530 by default, shared with the allocator, SQLite and thread stacks).
MAX_INDEX_MAPS = 8192
_UNLIMITED = 1 << 20  # the budget's basis when the soft limit is RLIM_INFINITY
_REOPEN_MASK = ~(os.O_CREAT | os.O_TRUNC | os.O_EXCL)


class FileClosed(Exception):
    """A closed ``CachedFile`` was pinned: its owner is done with it."""


class CachedFile:
    """One file whose descriptor the cache opens when used; see the module invariants."""

    __slots__ = ("path", "flags", "_cache", "_descriptor", "_pins", "_closed")

    def __init__(self, cache: DescriptorCache, path: Path, flags: int) -> None:
        self.path = path
        self.flags = flags & _REOPEN_MASK
        self._cache = cache
        self._descriptor: int | None = None
        self._pins = 0
        self._closed = False

    @property
    def is_open(self) -> bool:
        """Whether the file holds a descriptor now."""
        return self._descriptor is not None

    @property
    def closed(self) -> bool:
        return self._closed

    def pin(self, recent: bool = True) -> int:
        """The descriptor, opened if need be and kept open until ``unpin``. Raises
        ``FileClosed`` after ``close``, OSError when the file cannot be opened. ``recent=False``
        (a background fsync) leaves the file where it was in the LRU order, first out when it
        had to be opened: a sync pass over many files does not push out those in use."""
        cache = self._cache
        with cache._lock:  # the common case inline: this is on every read and write
            descriptor = self._descriptor
            if descriptor is None or self._closed:
                descriptor = cache._open_file(self, recent)
            elif recent:
                cache._open.move_to_end(self)
            self._pins += 1
            return descriptor

    def unpin(self) -> None:
        cache = self._cache
        with cache._lock:
            self._pins -= 1
            if not self._pins and (self._closed or len(cache._open) > cache.budget):
                cache._unpinned(self)

    def close(self) -> None:
        """Close the descriptor (after the last unpin, if pinned); the file is not used again."""
        self._cache._close(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else (
            f"descriptor {self._descriptor}" if self._descriptor is not None else "not open")
        return f"CachedFile({str(self.path)!r}, {state}, {self._pins} pins)"


class MappedFile:
    """A read-only mapping of a whole file (a sealed segment's index), made on demand; the
    cache drops the least recently used beyond its bounds. Used on the event loop only."""

    __slots__ = ("path", "_cache", "_mapping")
    _pins = 0  # never pinned (see the module invariants): the cache may always drop it

    def __init__(self, cache: DescriptorCache, path: Path) -> None:
        self.path = path
        self._cache = cache
        self._mapping: mmap.mmap | None = None

    @property
    def is_mapped(self) -> bool:
        return self._mapping is not None

    def get(self) -> mmap.mmap:
        """The mapping (of the file as it is now when it is made). Raises OSError, or
        ValueError for an empty file."""
        return self._cache._map(self)

    def drop(self) -> None:
        """Forget the mapping (the file changed or is going away); ``get`` maps it again."""
        self._cache._unmap(self)


class DescriptorCache:
    """Descriptors of ``CachedFile``s and mappings of ``MappedFile``s, at most ``budget`` in
    all, at most ``max_maps`` of them mappings. Least recently used first out."""

    def __init__(self, budget: int, max_maps: int | None = None) -> None:
        self._lock = threading.Lock()
        # every file and mapping holding a descriptor, least recently used first
        self._open: OrderedDict[CachedFile | MappedFile, None] = OrderedDict()
        self._maps: OrderedDict[MappedFile, None] = OrderedDict()  # the mappings alone
        self.budget = 1
        self.max_maps = 1
        self.opens = 0  # descriptors opened (for tests and benchmarks)
        self.evictions = 0  # descriptors closed to stay within the budget
        self.resize(budget, max_maps)

    # ------------------------------------------------------------------ files
    def file(self, path: str | os.PathLike[str], flags: int) -> CachedFile:
        """An existing file, opened with ``flags`` when first used (nothing is opened now)."""
        return CachedFile(self, _path(path), flags)

    def create(self, path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> CachedFile:
        """Create (or empty, with ``O_TRUNC``) the file now, and keep its descriptor; it is
        reopened later without ``O_CREAT``/``O_TRUNC``. Raises OSError."""
        file = CachedFile(self, _path(path), flags)
        with self._lock:
            self._make_room(1)
            file._descriptor = self._open_descriptor(file.path, flags | os.O_CREAT, mode)
            self._open[file] = None
        return file

    @property
    def open_count(self) -> int:
        """Descriptors held through the cache now (open files and mappings)."""
        return len(self._open)

    @property
    def map_count(self) -> int:
        return len(self._maps)

    def resize(self, budget: int, max_maps: int | None = None) -> None:
        """A new budget (and bound on mappings: at most ``MAX_INDEX_MAPS`` and the budget by
        default); what is over it now is closed, least recently used first."""
        if budget < 1:
            raise ValueError("the descriptor budget must be at least 1")
        with self._lock:
            self.budget = budget
            self.max_maps = max(1, max_maps if max_maps is not None
                                else min(budget, MAX_INDEX_MAPS))
            self._make_room(0)
            while len(self._maps) > self.max_maps:
                self._unmap_locked(next(iter(self._maps)))

    def close_all(self) -> None:
        """Close every unpinned descriptor and drop every mapping (tests; reopened when used)."""
        with self._lock:
            for entry in [entry for entry in self._open if not entry._pins]:
                self._release(entry)

    def _open_file(self, file: CachedFile, recent: bool) -> int:
        """(Lock held.) Open ``file``'s descriptor, making room first."""
        if file._closed:
            raise FileClosed(str(file.path))
        self._make_room(1)
        descriptor = file._descriptor = self._open_descriptor(file.path, file.flags)
        self._open[file] = None
        if not recent:
            self._open.move_to_end(file, last=False)
        return descriptor

    def _unpinned(self, file: CachedFile) -> None:
        """(Lock held.) ``file``'s last pin went: close it if its owner did, and give back
        what pins held over the budget."""
        if file._closed:
            self._close_descriptor(file)
        else:
            self._make_room(0)

    def _close(self, file: CachedFile) -> None:
        with self._lock:
            file._closed = True
            if not file._pins:
                self._close_descriptor(file)

    def _open_descriptor(self, path: Path, flags: int, mode: int = 0o644) -> int:
        while True:
            try:
                descriptor = os.open(path, flags, mode)
            except OSError as error:
                # the process ran out elsewhere (sockets): give back one of ours and retry
                if error.errno in (errno.EMFILE, errno.ENFILE) and self._evict_one():
                    continue
                raise
            self.opens += 1
            return descriptor

    def _make_room(self, needed: int) -> None:
        """Close unpinned descriptors until ``needed`` more fit within the budget."""
        while len(self._open) + needed > self.budget and self._evict_one():
            pass

    def _evict_one(self) -> bool:
        """Close the least recently used unpinned descriptor or mapping; False when every one
        is pinned."""
        for entry in self._open:
            if not entry._pins:
                self._release(entry)
                self.evictions += 1
                return True
        return False

    def _release(self, entry: CachedFile | MappedFile) -> None:
        if isinstance(entry, MappedFile):
            self._unmap_locked(entry)
        else:
            self._close_descriptor(entry)

    def _close_descriptor(self, file: CachedFile) -> None:
        descriptor = file._descriptor
        if descriptor is None:
            return
        file._descriptor = None
        del self._open[file]
        try:
            os.close(descriptor)
        except OSError as error:  # nothing written is lost by a failed close; keep going
            logger.warning("closing %s failed: %s", file.path, error)

    # ------------------------------------------------------------------ mappings
    def mapped(self, path: str | os.PathLike[str]) -> MappedFile:
        """A file to map read-only when first read (nothing is mapped now)."""
        return MappedFile(self, _path(path))

    def _map(self, mapped: MappedFile) -> mmap.mmap:
        with self._lock:
            mapping = mapped._mapping
            if mapping is not None:
                self._open.move_to_end(mapped)
                self._maps.move_to_end(mapped)
                return mapping
            while len(self._maps) >= self.max_maps:
                self._unmap_locked(next(iter(self._maps)))
            self._make_room(1)  # for the duplicate the mapping keeps
            descriptor = self._open_descriptor(mapped.path, os.O_RDONLY)
            try:
                mapping = self._map_descriptor(descriptor)
            finally:
                os.close(descriptor)  # the mapping keeps its own duplicate
            mapped._mapping = mapping
            self._open[mapped] = None
            self._maps[mapped] = None
            return mapping

    def _map_descriptor(self, descriptor: int) -> mmap.mmap:
        while True:
            try:
                return mmap.mmap(descriptor, 0, access=mmap.ACCESS_READ)
            except OSError as error:  # the duplicate hit the process limit: as for opens
                if error.errno in (errno.EMFILE, errno.ENFILE) and self._evict_one():
                    continue
                raise

    def _unmap(self, mapped: MappedFile) -> None:
        with self._lock:
            self._unmap_locked(mapped)

    def _unmap_locked(self, mapped: MappedFile) -> None:
        """Forget a mapping; it closes (with its descriptor) when its last user lets it go,
        at once unless a segment method on the event loop is reading through it now."""
        if mapped._mapping is None:
            return
        mapped._mapping = None
        del self._open[mapped]
        del self._maps[mapped]


def _path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path, the segment's own object when it is one (no copy per file)."""
    return path if isinstance(path, Path) else Path(path)


# ---------------------------------------------------------------------- the process's cache
def open_file_limit() -> int:
    """The soft RLIMIT_NOFILE of this process (a large number when unlimited)."""
    try:
        import resource
    except ImportError:  # not a Unix: no limit to read
        return _UNLIMITED
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _UNLIMITED if soft == resource.RLIM_INFINITY else soft


def budget_for(max_open_files: int | str, limit: int) -> int:
    """The cache's budget for ``[system] max_open_files`` under a soft limit of ``limit``.

    ``auto`` is half the limit: the other half is left to what the cache does not bound —
    sockets (one per connection, and connections are not capped), the metadata store (SQLite:
    database, WAL, shared memory), staged transaction files, recovery's and the background
    verifier's one-at-a-time files, the event loop and standard streams. Connections are the
    only large one, and half keeps storage and connections from starving each other however a
    server is used; after the soft limit is raised to the hard one (often 524,288 or more),
    half is more than 10,000 busy partitions need, so nothing is ever closed there.
    """
    if max_open_files == "auto":
        return max(MIN_OPEN_FILES, limit // 2)
    return int(max_open_files)


_shared: DescriptorCache | None = None


def shared() -> DescriptorCache:
    """The process's cache (``auto`` budget until ``configure``)."""
    global _shared
    if _shared is None:
        _shared = DescriptorCache(budget_for("auto", open_file_limit()))
    return _shared


def configure(max_open_files: int | str) -> int:
    """Set the process's budget from ``[system] max_open_files`` and the soft limit now;
    returns it."""
    budget = budget_for(max_open_files, open_file_limit())
    shared().resize(budget)
    return budget
