"""Durability: the one fsync policy of the storage engine, and the only module that calls fsync
(``write_private_file`` too: the secrets and certificates of the data directory).

Policies:
  * ``NEVER``    nothing is ever synced by rill; the operating system writes back when it likes.
  * ``INTERVAL`` a background task syncs every file written since the last pass, every
                 ``interval_seconds``; ``wait_durable`` returns at once.
  * ``ALWAYS``   ``wait_durable`` returns only once the file is synced. Concurrent waiters share
                 rounds (group commit): a round takes every dirty file, syncs them in worker
                 threads so the event loop keeps serving, then resolves every waiter that joined
                 before the round began; waiters arriving during a round join the next one.
                 The files of a round are synced in parallel (up to ``threads`` at once):
                 the file system can commit concurrent fsyncs together (8 files synced from 8
                 threads took a third of the time of one after the other, on ext4), so a round
                 of many partitions costs less than one fsync per partition.

Files: a file is either a descriptor its owner keeps open (an ``int``: staged files, repairs)
or a ``CachedFile`` (segment files, ``storage.descriptors``), whose descriptor the cache may
close while the file is not in use, dirty or not. A sync pins a cached file for the length of
its fsync, reopening it if the cache closed it: fsync makes the data of a file durable whichever
descriptor wrote it, so a dirty file the cache closed is still synced as the policy promises (by
the next round under ``ALWAYS``, within the interval under ``INTERVAL``).

Invariants:
  * A file descriptor is only synced while it is open: files are closed through ``close_file``,
    which forgets the file and defers the close while a round is still syncing it (a cached
    file stays pinned, an ``int`` is closed after the round), so a reused descriptor number is
    never synced by mistake.
  * An fsync failure fails the waiters of that file with ``CannotSyncFile`` (never a hang) and
    keeps failing later waiters of that file: after a failed fsync the kernel may have dropped
    the dirty pages, so a later successful fsync proves nothing.
  * Seal and shutdown syncs (``sync_now``, ``sync_directory``) follow the policy: no-ops under
    ``NEVER``. Only ``sync_file``, a client's explicit flush, syncs whatever the policy.
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from pathlib import Path
from typing import Union

from rill.errors import CannotSyncFile
from rill.server.storage.descriptors import CachedFile, FileClosed
from rill.server.storage.file_io import IoTotals

logger = logging.getLogger(__name__)

# fsyncs of one round that run at once (one file each) unless told otherwise
# ([system] fsync_threads); 1 syncs the files of a round one after the other in one thread.
FSYNC_THREADS = 8
# worker threads of one server's off-loop appends (a log has at most one append in flight)
APPEND_THREADS = 4


class FsyncPolicy(str, Enum):
    NEVER = "never"
    INTERVAL = "interval"
    ALWAYS = "always"


File = Union[int, CachedFile]  # see "Files" above


def _fsync(file: File) -> None:
    """fsync one file; a cached file is pinned (reopened if need be) meanwhile."""
    if isinstance(file, int):
        os.fsync(file)
        return
    descriptor = file.pin(recent=False)
    try:
        os.fsync(descriptor)
    finally:
        file.unpin()


def _sync_each(files: list[File]) -> dict[File, OSError]:
    """Runs in a worker thread: fsync every file, collecting failures. A cached file closed
    since the round took it is skipped: its owner closed it through ``close_file``, which
    forgot what it owed."""
    failures: dict[File, OSError] = {}
    for file in files:
        try:
            _fsync(file)
        except FileClosed:
            pass
        except OSError as error:
            failures[file] = error
    return failures


class Durability:
    """Tracks written ("dirty") files and makes them durable according to the policy."""

    def __init__(
        self, policy: FsyncPolicy | str, interval_seconds: float = 1.0,
        threads: int = FSYNC_THREADS,
    ) -> None:
        self.policy = FsyncPolicy(policy)
        if interval_seconds <= 0:
            raise ValueError("interval_seconds must be positive")
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self.interval_seconds = interval_seconds
        self.threads = threads
        # worker-thread rounds that synced something (group commits, interval passes, flushes)
        self.sync_rounds = 0
        self.fsync_calls = 0  # files synced by rounds, sync_now and stop
        self._dirty: set[File] = set()
        self._failed: dict[File, OSError] = {}
        self._in_flight: dict[File, int] = {}  # file -> syncs of it queued or running in threads
        self._close_after_round: set[int] = set()
        self._waiters: list[tuple[File, asyncio.Future[None]]] = []
        self._round_runner: asyncio.Task[None] | None = None
        self._interval_task: asyncio.Task[None] | None = None
        self._stopping: asyncio.Event | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.io_totals = IoTotals()  # see "Per-server storage state" above
        # (id() of the partition log that appended last, time.monotonic() then)
        self.last_append: tuple[int | None, float] = (None, 0.0)
        self._append_executor: ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self.policy is FsyncPolicy.INTERVAL and self._interval_task is None:
            self._stopping = asyncio.Event()
            self._interval_task = asyncio.get_running_loop().create_task(self._interval_loop())

    async def stop(self) -> None:
        """Stop background work, then sync everything still dirty (final sync per policy)."""
        if self._interval_task is not None:
            assert self._stopping is not None
            self._stopping.set()
            await self._interval_task
            self._interval_task = None
        while self._round_runner is not None and not self._round_runner.done():
            await self._round_runner
        if self.policy is not FsyncPolicy.NEVER and self._dirty:
            files = list(self._dirty)
            self._dirty.clear()
            await self._sync_round(files)
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        if self._append_executor is not None:
            self._append_executor.shutdown(wait=True)
            self._append_executor = None

    def append_executor(self) -> ThreadPoolExecutor:
        """The worker threads of this server's off-loop appends (made on first use)."""
        if self._append_executor is None:
            self._append_executor = ThreadPoolExecutor(APPEND_THREADS,
                                                       thread_name_prefix="rill-append")
        return self._append_executor

    # ------------------------------------------------------------------ tracking
    def mark_dirty(self, file: File) -> None:
        """Record that ``file`` was written and is not yet durable."""
        if self.policy is not FsyncPolicy.NEVER:
            self._dirty.add(file)

    def is_dirty(self, file: File) -> bool:
        return file in self._dirty

    @property
    def sync_in_progress(self) -> bool:
        """True while fsyncs are queued or running in the worker thread."""
        return bool(self._in_flight)

    def close_file(self, file: File) -> None:
        """Forget ``file`` and close it (after the running round, if that round holds it)."""
        self._dirty.discard(file)
        self._failed.pop(file, None)
        if not isinstance(file, int):
            file.close()  # the cache closes it once no sync holds it pinned
        elif file in self._in_flight:
            self._close_after_round.add(file)
        else:
            os.close(file)

    # ------------------------------------------------------------------ waiting
    async def wait_durable(self, file: File) -> None:
        """Return once what was written to ``file`` is durable as the policy requires."""
        if self.policy is not FsyncPolicy.ALWAYS:
            return
        self._raise_if_failed(file)
        if file not in self._dirty and file not in self._in_flight:
            return  # nothing unsynced, and no sync of it still running
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._waiters.append((file, future))
        if self._round_runner is None or self._round_runner.done():
            self._round_runner = loop.create_task(self._run_rounds())
        await future

    async def _run_rounds(self) -> None:
        while self._waiters:
            waiters, self._waiters = self._waiters, []
            # Dirty files, plus waited-on files another sync still holds: a sync that starts
            # now, after the waiter's write, covers that write whether or not the other one
            # has finished.
            files = list(self._dirty | {file for file, _ in waiters if file in self._in_flight})
            self._dirty.clear()
            try:
                failures = await self._sync_round(files)
            except BaseException as error:
                for _, future in waiters:
                    if not future.done():
                        future.set_exception(CannotSyncFile(reason=f"Cannot sync file: {error!r}"))
                raise
            for file, future in waiters:
                if future.done():  # the waiter was cancelled
                    continue
                failure = failures.get(file) or self._failed.get(file)
                if failure is None:
                    future.set_result(None)
                else:
                    future.set_exception(_sync_error(failure))

    async def _sync_round(self, files: list[File]) -> dict[File, OSError]:
        """Sync ``files`` in worker threads, several at once; record and return the
        failures."""
        if not files:
            return {}
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="rill-fsync")
        for file in files:
            self._in_flight[file] = self._in_flight.get(file, 0) + 1
        width = min(len(files), self.threads)
        thread_futures = [
            loop.run_in_executor(self._executor, _sync_each, files[start::width])
            for start in range(width)
        ]
        # return_exceptions: done only once every thread is done with its descriptors
        all_done = asyncio.gather(*thread_futures, return_exceptions=True)
        try:
            results = await asyncio.shield(all_done)
        finally:
            closed_during_round = {
                file for file in files
                if file in self._close_after_round or getattr(file, "closed", False)
            }
            if all_done.done():
                self._release(files)
            else:  # cancelled while threads still use the descriptors: release them later
                all_done.add_done_callback(lambda _: self._release(files))
        failures: dict[File, OSError] = {}
        for result in results:
            if isinstance(result, BaseException):
                raise result
            failures.update(result)
        self.sync_rounds += 1
        self.fsync_calls += len(files)
        for file, error in failures.items():
            logger.error("fsync of %s failed: %s", _name(file), error)
            if file not in closed_during_round:
                self._failed[file] = error
        return failures

    def _release(self, files: list[File]) -> None:
        """The threads are done with ``files``: close the descriptors whose close was deferred
        (cached files close themselves at their last unpin)."""
        for file in files:
            remaining = self._in_flight[file] - 1
            if remaining:
                self._in_flight[file] = remaining
                continue
            del self._in_flight[file]
            if file in self._close_after_round:
                assert isinstance(file, int)
                self._close_after_round.discard(file)
                os.close(file)

    def _raise_if_failed(self, file: File) -> None:
        failure = self._failed.get(file)
        if failure is not None:
            raise _sync_error(failure)

    async def _interval_loop(self) -> None:
        assert self._stopping is not None
        while not self._stopping.is_set():
            try:
                await asyncio.wait_for(self._stopping.wait(), self.interval_seconds)
            except asyncio.TimeoutError:
                pass
            if self._dirty:
                files = list(self._dirty)
                self._dirty.clear()
                try:
                    await self._sync_round(files)
                except Exception:  # noqa: BLE001 - keep the background syncs going
                    logger.exception("background sync round failed")

    async def sync_file(self, file: File) -> None:
        """Sync one file now, in the worker thread, whatever the policy (an explicit flush)."""
        self._dirty.discard(file)
        failures = await self._sync_round([file])
        if file in failures:
            raise _sync_error(failures[file])

    # ------------------------------------------------------------------ blocking syncs
    def sync_now(self, file: File) -> None:
        """Blocking fsync of one file (seal, truncation, shutdown); a no-op under NEVER."""
        if self.policy is FsyncPolicy.NEVER:
            return
        self._raise_if_failed(file)
        self._dirty.discard(file)
        try:
            _fsync(file)
        except OSError as error:
            self._failed[file] = error
            raise _sync_error(error) from error
        self.fsync_calls += 1

    def sync_directory(self, directory: str | os.PathLike[str]) -> None:
        """Make created, renamed or deleted entries of ``directory`` durable; no-op under NEVER."""
        if self.policy is FsyncPolicy.NEVER:
            return
        descriptor = os.open(Path(directory), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(descriptor)
        except OSError as error:
            raise _sync_error(error) from error
        finally:
            os.close(descriptor)
        self.fsync_calls += 1


def write_private_file(path: Path, data: bytes) -> None:
    """Secrets and certificates, whatever the policy: ``data`` into a temporary 0600 file,
    synced, renamed over ``path``, the directory synced; a crash leaves the old file or the new
    one, never a torn one."""
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view):]
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.chmod(temporary, 0o600)  # O_CREAT's mode does not apply to a file left by a crash
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _name(file: File) -> str:
    return f"descriptor {file}" if isinstance(file, int) else str(file.path)


def _sync_error(error: OSError) -> CannotSyncFile:
    return CannotSyncFile(reason=f"Cannot sync file: {error.strerror or error}")
