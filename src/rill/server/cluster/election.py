"""An election on the Coordinator: one key per candidate under a lease; the oldest leads.

Owns: ``Election`` (campaign, leader, observe, resign) and ``Leadership``, built on the
Coordinator's transactions and watches alone, so etcd and the twin elect alike (the scheme of
etcd's own ``concurrency.Election``: a candidate puts ``<prefix><lease id>`` under its lease if
missing, then waits until no candidate key created before its own remains).

Invariants: the leader is the candidate key with the smallest create_revision; that revision
is the **epoch** of the leadership (the controller epoch of ``shared/spec/cluster-design.md``
§2.4). A leader's writes carry ``Leadership.fence()`` (its key still exists with that
create_revision) among their compares, so a deposed leader (lease expired while it was
paused) changes nothing, whatever it believes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from rill.server.cluster.coordinator import (
    Compare,
    Coordinator,
    CoordinatorError,
    Delete,
    Get,
    KeyValue,
    Put,
)
from rill.server.cluster.watch import ResumingWatch, Resync


@dataclass(frozen=True, slots=True)
class Leader:
    key: bytes
    value: bytes
    epoch: int  # the key's create_revision
    lease: int


@dataclass(frozen=True, slots=True)
class Leadership(Leader):
    def fence(self) -> Compare:
        """Holds only while this leadership lasts: put it in every transaction it makes."""
        return Compare.create_revision(self.key, "==", self.epoch)


def _leader(kvs: Sequence[KeyValue]) -> Leader | None:
    if not kvs:
        return None
    first = min(kvs, key=lambda kv: kv.create_revision)
    return Leader(first.key, first.value, first.create_revision, first.lease)


class Election:
    def __init__(self, coordinator: Coordinator, prefix: bytes) -> None:
        if not prefix.endswith(b"/"):
            raise ValueError("an election's prefix ends with '/'")
        self.coordinator = coordinator
        self.prefix = prefix

    async def campaign(self, lease: int, value: bytes) -> Leadership:
        """Stand under ``lease``; returns once this candidate leads."""
        key = self.prefix + b"%x" % lease
        result = await self.coordinator.txn([Compare.missing(key)], [Put(key, value, lease)],
                                            [Get(key)])
        if result.succeeded:
            epoch = result.revision
        else:  # stood before with this lease (a retried campaign): keep the place in line
            existing = result.results[0]
            assert isinstance(existing, tuple) and existing
            epoch = existing[0].create_revision
            if existing[0].value != value:
                await self.coordinator.txn([Compare.create_revision(key, "==", epoch)],
                                           [Put(key, value, lease)])
        await self._wait_for_older_candidates(key, epoch)
        return Leadership(key, value, epoch, lease)

    async def _wait_for_older_candidates(self, key: bytes, epoch: int) -> None:
        while True:
            snapshot = await self.coordinator.range(self.prefix, prefix=True)
            if not any(kv.key == key and kv.create_revision == epoch for kv in snapshot.kvs):
                raise CoordinatorError("the campaign key is gone (its lease ended) before it led")
            older = [kv for kv in snapshot.kvs if kv.create_revision < epoch]
            if not older:
                return
            last = max(older, key=lambda kv: kv.create_revision)
            await self._wait_deleted(last.key, snapshot.revision + 1)

    async def _wait_deleted(self, key: bytes, start_revision: int) -> None:
        async for item in ResumingWatch(self.coordinator, key, start_revision, prefix=False):
            if isinstance(item, Resync):
                if not item.kvs:
                    return
            elif any(event.type == "delete" for event in item.events):
                return

    async def leader(self) -> Leader | None:
        return _leader((await self.coordinator.range(self.prefix, prefix=True)).kvs)

    async def observe(self) -> AsyncIterator[Leader | None]:
        """The leader now, then each time it changes (None: no candidate)."""
        snapshot = await self.coordinator.range(self.prefix, prefix=True)
        candidates = {kv.key: kv for kv in snapshot.kvs}
        current = _leader(tuple(candidates.values()))
        yield current
        async for item in ResumingWatch(self.coordinator, self.prefix, snapshot.revision + 1):
            if isinstance(item, Resync):
                candidates = {kv.key: kv for kv in item.kvs}
            else:
                for event in item.events:
                    if event.type == "put":
                        candidates[event.kv.key] = event.kv
                    else:
                        candidates.pop(event.kv.key, None)
            leader = _leader(tuple(candidates.values()))
            if leader != current:
                current = leader
                yield current

    async def resign(self, leadership: Leadership) -> bool:
        """Step down (the next candidate leads at once); False if it had already ended."""
        result = await self.coordinator.txn([leadership.fence()], [Delete(leadership.key)])
        return result.succeeded
