"""The Coordinator's memory twin: etcd's behaviour in one process, deterministic.

Owns: an in-memory key-value store with etcd's revisions, transactions, leases, watches and
compaction (``coordinator`` states the semantics), a manual clock and a "no leader" switch.

Determinism: time moves only by ``advance(seconds)``, which steps the clock from one waiting
``sleep`` to the next (so keepalive loops run when they would), expires leases whose TTL has
passed (their keys deleted in one revision, as etcd's lessor does) and lets woken tasks run.
``set_leader(False)`` makes every call raise ``NoLeader`` and ends every open watch with it
(etcd cancels watches that require a leader); leases do not expire meanwhile, and when the
leader is back every lease has its whole TTL again (etcd's new leader restarts them).
Leases are granted at least ``minimum_lease_ttl`` seconds (etcd: 1.5 x its election timeout,
2 s by default).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from rill.server.cluster.coordinator import (
    Compacted,
    Compare,
    Coordinator,
    CoordinatorError,
    Delete,
    Get,
    KeyValue,
    LeaseGrant,
    LeaseNotFound,
    NoLeader,
    Operation,
    OperationResult,
    Put,
    RangeResult,
    TxnResult,
    WatchBatch,
    WatchEvent,
)

SETTLE_ROUNDS = 50  # event-loop turns given to woken tasks after each step of the clock


@dataclass
class _Lease:
    ttl: int
    expiry: float
    keys: set[bytes] = field(default_factory=set)


@dataclass(eq=False)
class _Watcher:
    key: bytes
    prefix: bool
    start: int  # changes from this revision on
    queue: asyncio.Queue[WatchBatch | CoordinatorError] = field(default_factory=asyncio.Queue)

    def matches(self, key: bytes) -> bool:
        return key.startswith(self.key) if self.prefix else key == self.key


class MemoryCoordinator(Coordinator):
    def __init__(self, minimum_lease_ttl: int = 2) -> None:
        self.minimum_lease_ttl = minimum_lease_ttl
        self.revision = 1  # a new etcd store is at revision 1
        self.compact_revision = 0
        self.has_leader = True
        self.now = 0.0
        self._store: dict[bytes, KeyValue] = {}
        self._history: list[tuple[int, WatchEvent]] = []  # revisions above the compaction
        self._leases: dict[int, _Lease] = {}
        self._lease_ids = itertools.count(0x7A3F_0000_0001)
        self._watchers: set[_Watcher] = set()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._sleeper_order = itertools.count()

    # -- the switches and the clock --------------------------------------------------------

    def set_leader(self, present: bool) -> None:
        """Simulate the coordination service losing (False) or regaining (True) its leader."""
        if present and not self.has_leader:
            for lease in self._leases.values():
                lease.expiry = self.now + lease.ttl
        self.has_leader = present
        if not present:
            for watcher in self._watchers:
                watcher.queue.put_nowait(NoLeader("etcdserver: no leader"))

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._sleeper_order), future))
        await future

    async def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` on, waking sleepers and expiring leases in time order."""
        target = self.now + seconds
        await self.settle()  # tasks just started take their place in line first
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future = heapq.heappop(self._sleepers)
            self.now = max(self.now, deadline)
            self._expire_leases()
            if not future.done():
                future.set_result(None)
            await self.settle()
        self.now = target
        self._expire_leases()
        await self.settle()

    @staticmethod
    async def settle() -> None:
        """Let tasks that became ready run until they wait again."""
        for _ in range(SETTLE_ROUNDS):
            await asyncio.sleep(0)

    # -- key-value -------------------------------------------------------------------------

    def _require_leader(self) -> None:
        if not self.has_leader:
            raise NoLeader("etcdserver: no leader")

    def _read(self, key: bytes, prefix: bool) -> tuple[KeyValue, ...]:
        if not prefix:
            kv = self._store.get(key)
            return (kv,) if kv is not None else ()
        return tuple(self._store[name] for name in sorted(self._store) if name.startswith(key))

    async def range(self, key: bytes, prefix: bool = False) -> RangeResult:
        self._require_leader()
        return RangeResult(self._read(key, prefix), self.revision)

    async def txn(self, compares: Sequence[Compare], success: Sequence[Operation] = (),
                  failure: Sequence[Operation] = ()) -> TxnResult:
        self._require_leader()
        succeeded = all(compare.holds(self._store.get(compare.key)) for compare in compares)
        operations = success if succeeded else failure
        for operation in operations:
            if isinstance(operation, Put) and operation.lease and operation.lease not in self._leases:
                raise LeaseNotFound("etcdserver: requested lease not found")
        revision = self.revision + 1
        events: list[WatchEvent] = []
        results: list[OperationResult] = []
        for operation in operations:
            if isinstance(operation, Get):
                results.append(self._read(operation.key, operation.prefix))
            elif isinstance(operation, Put):
                events.append(self._put(operation, revision))
                results.append(None)
            elif isinstance(operation, Delete):
                deleted = [self._remove(kv.key, revision) for kv in self._read(operation.key, operation.prefix)]
                events.extend(deleted)
                results.append(len(deleted))
            else:
                raise TypeError(f"not a transaction operation: {operation!r}")
        self._commit(revision, events)
        return TxnResult(succeeded, self.revision, tuple(results))

    def _put(self, put: Put, revision: int) -> WatchEvent:
        old = self._store.get(put.key)
        if old is not None and old.lease in self._leases:
            self._leases[old.lease].keys.discard(put.key)
        kv = KeyValue(put.key, put.value, old.create_revision if old else revision, revision,
                      old.version + 1 if old else 1, put.lease)
        self._store[put.key] = kv
        if put.lease:
            self._leases[put.lease].keys.add(put.key)
        return WatchEvent("put", kv)

    def _remove(self, key: bytes, revision: int) -> WatchEvent:
        old = self._store.pop(key)
        if old.lease in self._leases:
            self._leases[old.lease].keys.discard(key)
        return WatchEvent("delete", KeyValue(key, mod_revision=revision))

    def _commit(self, revision: int, events: list[WatchEvent]) -> None:
        if not events:
            return  # a transaction that changed nothing keeps the revision (etcd's rule)
        self.revision = revision
        self._history.extend((revision, event) for event in events)
        for watcher in self._watchers:
            mine = tuple(event for event in events if watcher.matches(event.kv.key))
            if mine and revision >= watcher.start:
                watcher.queue.put_nowait(WatchBatch(mine, revision))

    async def compact(self, revision: int) -> None:
        self._require_leader()
        if revision > self.revision:
            raise CoordinatorError("mvcc: required revision is a future revision")
        if revision <= self.compact_revision:
            raise Compacted(0)  # etcd's answer names no revision either
        self.compact_revision = revision
        self._history = [(rev, event) for rev, event in self._history if rev >= revision]

    # -- leases ----------------------------------------------------------------------------

    async def grant_lease(self, ttl: int) -> LeaseGrant:
        self._require_leader()
        ttl = max(int(ttl), self.minimum_lease_ttl)
        lease_id = next(self._lease_ids)
        self._leases[lease_id] = _Lease(ttl, self.now + ttl)
        return LeaseGrant(lease_id, ttl)

    async def keepalive(self, lease: int) -> int:
        self._require_leader()
        held = self._leases.get(lease)
        if held is None:
            return 0
        held.expiry = self.now + held.ttl
        return held.ttl

    async def revoke_lease(self, lease: int) -> None:
        self._require_leader()
        if lease not in self._leases:
            raise LeaseNotFound("etcdserver: requested lease not found")
        self._end_lease(lease)

    async def lease_time_to_live(self, lease: int) -> int:
        self._require_leader()
        held = self._leases.get(lease)
        if held is None:
            return -1
        return max(0, int(held.expiry - self.now))

    def _end_lease(self, lease: int) -> None:
        held = self._leases.pop(lease)
        revision = self.revision + 1
        events = [self._remove(key, revision) for key in sorted(held.keys) if key in self._store]
        self._commit(revision, events)

    def _expire_leases(self) -> None:
        if not self.has_leader:
            return  # no leader, no expiry: etcd's lessor runs on the leader only
        for lease_id, held in sorted(self._leases.items(), key=lambda item: item[1].expiry):
            if held.expiry <= self.now:
                self._end_lease(lease_id)

    # -- watches ---------------------------------------------------------------------------

    def watch(self, key: bytes, start_revision: int = 0,
              prefix: bool = True) -> AsyncIterator[WatchBatch]:
        return self._watch(key, start_revision, prefix)

    async def _watch(self, key: bytes, start_revision: int, prefix: bool) -> AsyncIterator[WatchBatch]:
        self._require_leader()
        if start_revision and start_revision < self.compact_revision:
            raise Compacted(self.compact_revision)
        start = start_revision or self.revision + 1
        watcher = _Watcher(key, prefix, start)
        backlog = [(revision, event) for revision, event in self._history
                   if revision >= start and watcher.matches(event.kv.key)]
        self._watchers.add(watcher)
        for revision, group in itertools.groupby(backlog, key=lambda item: item[0]):
            watcher.queue.put_nowait(WatchBatch(tuple(event for _, event in group), revision))
        try:
            yield WatchBatch((), self.revision)
            while True:
                item = await watcher.queue.get()
                if isinstance(item, CoordinatorError):
                    raise item
                yield item
        finally:
            self._watchers.discard(watcher)

