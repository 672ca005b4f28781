"""A watch that survives breaks: resumes from the last revision + 1, resyncs on compaction.

Owns: ``ResumingWatch``, built on ``Coordinator.watch`` alone (so it behaves the same on etcd
and on the twin). It yields what the coordinator's watch yields (``WatchBatch``; an empty one
each time the watch is opened again) and, when the history it needs was compacted, a
``Resync``: the whole state under the key at a revision, which replaces what the caller held;
the watch then goes on from that revision + 1.

Invariant: no change is delivered twice and none is skipped, except through a ``Resync``
(which carries the state they produced). A break (the member died, was paused, lost its
leader) is resumed at once; while the watch cannot be opened again (etcd electing a new leader
after its leader died: about 1-2 s) it tries ``retries`` more times, waiting ``backoff``
seconds doubling in between (0.1 s x 6 tries: 6.3 s in all), then raises the error
(``CoordinatorUnavailable`` / ``NoLeader``); ``next_revision`` says where to go on from.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from rill.server.cluster.coordinator import (
    Compacted,
    Coordinator,
    CoordinatorUnavailable,
    KeyValue,
    NoLeader,
    WatchBatch,
)


@dataclass(frozen=True, slots=True)
class Resync:
    """Every key under the watched key at ``revision``: the caller's view is replaced by it."""

    kvs: tuple[KeyValue, ...]
    revision: int


class ResumingWatch:
    def __init__(self, coordinator: Coordinator, key: bytes, start_revision: int,
                 prefix: bool = True, retries: int = 6, backoff: float = 0.1) -> None:
        if start_revision < 1:
            raise ValueError("a resuming watch starts from a known revision (read at R: R + 1)")
        self.coordinator = coordinator
        self.key = key
        self.prefix = prefix
        self.next_revision = start_revision
        self.retries = retries
        self.backoff = backoff
        self.resumed = 0  # times the watch was opened again after a break
        self.resynced = 0  # times the history was compacted away and the state read again

    def __aiter__(self) -> AsyncIterator[WatchBatch | Resync]:
        return self._run()

    async def _run(self) -> AsyncIterator[WatchBatch | Resync]:
        failed = 0  # attempts in a row that could not open the watch
        broken = False  # a watch was open and broke: its next opening is a resumption
        while True:
            opened = False
            try:
                async for batch in self.coordinator.watch(self.key, self.next_revision, self.prefix):
                    if batch.events:
                        self.next_revision = batch.revision + 1
                    else:  # the opening batch
                        opened, failed = True, 0
                        if broken:
                            self.resumed += 1
                            broken = False
                    yield batch
            except Compacted:
                snapshot = await self.coordinator.range(self.key, self.prefix)
                self.next_revision = snapshot.revision + 1
                self.resynced += 1
                yield Resync(snapshot.kvs, snapshot.revision)
            except (CoordinatorUnavailable, NoLeader):
                if opened:
                    broken = True  # resume at once
                    continue
                if failed >= self.retries:
                    raise
                await self.coordinator.sleep(self.backoff * 2 ** failed)
                failed += 1
