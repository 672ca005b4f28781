"""The Coordinator port: what the cluster asks of its coordination service, in neutral types.

Owns: the interface (``Coordinator``), its values (``KeyValue``, ``Compare``, ``Put``, ``Get``,
``Delete``, ``TxnResult``, ``RangeResult``, ``WatchEvent``, ``WatchBatch``) and its errors.
Two implementations keep the same behaviour and raise the same errors: the etcd v3 JSON
gateway (``etcd_gateway.EtcdGateway``) and the memory twin
(``memory_coordinator.MemoryCoordinator``); one test body runs on both
(``tests/server/cluster/test_coordinator.py``). No etcd type crosses this interface.

Semantics (etcd v3's, which the twin copies):
* Every change has a revision, global and increasing; a transaction's writes share one. A
  key's ``create_revision`` is the revision that created it (a fencing token: a deleted and
  re-created key gets a new one), ``mod_revision`` the last that changed it, ``version`` the
  number of changes since its creation.
* ``txn`` applies ``success`` if every compare holds, else ``failure``, atomically. A compare
  on a missing key compares against zero (version, revisions, lease 0); a VALUE compare on a
  missing key never holds.
* A lease lives ``ttl`` seconds after its grant or last keepalive; when it expires or is
  revoked, every key put with it is deleted, in one revision.
* ``watch(prefix, start_revision)`` yields every change of the keys under ``prefix`` from
  ``start_revision`` on (0: from the next change), in revision order, never splitting a
  revision across batches. It raises ``Compacted`` when that revision's history is gone,
  ``NoLeader`` when the coordination service has no leader (an etcd member cut off from its
  majority: it fails fast instead of hanging), ``CoordinatorUnavailable`` when the link breaks.
  Its first batch is empty: the watch is in place (its revision is the store's then, not a
  change), so a caller can make changes knowing the watch will see them.
  ``watch.ResumingWatch`` resumes from the last revision + 1 and resyncs after a compaction.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Literal


class CoordinatorError(Exception):
    """Base of the coordinator's errors."""


class CoordinatorUnavailable(CoordinatorError):
    """No endpoint answered (in time). A write's outcome is then unknown: it may have applied."""


class NoLeader(CoordinatorError):
    """The coordination service has no leader (etcd: a member without its majority)."""


class Compacted(CoordinatorError):
    """The history asked for was compacted; everything below ``compact_revision`` is gone
    (0: etcd did not say where the compaction stands, as when ``compact`` is asked again)."""

    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"revisions below {compact_revision} were compacted")
        self.compact_revision = compact_revision


class LeaseNotFound(CoordinatorError):
    """The lease does not exist (never granted, expired or revoked)."""


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes = b""
    create_revision: int = 0
    mod_revision: int = 0
    version: int = 0
    lease: int = 0  # the lease id the key is attached to; 0 = none


@dataclass(frozen=True, slots=True)
class RangeResult:
    kvs: tuple[KeyValue, ...]
    revision: int  # the store's revision the read saw: watch from revision + 1 to follow on


CompareTarget = Literal["value", "version", "create_revision", "mod_revision", "lease"]
CompareOperator = Literal["==", "!=", "<", ">"]


@dataclass(frozen=True, slots=True)
class Compare:
    """``key``'s ``target`` ``operator`` ``operand`` (bytes for value, int otherwise)."""

    key: bytes
    target: CompareTarget
    operator: CompareOperator
    operand: bytes | int

    @classmethod
    def value(cls, key: bytes, operator: CompareOperator, value: bytes) -> Compare:
        return cls(key, "value", operator, value)

    @classmethod
    def version(cls, key: bytes, operator: CompareOperator, version: int) -> Compare:
        return cls(key, "version", operator, version)

    @classmethod
    def create_revision(cls, key: bytes, operator: CompareOperator, revision: int) -> Compare:
        return cls(key, "create_revision", operator, revision)

    @classmethod
    def mod_revision(cls, key: bytes, operator: CompareOperator, revision: int) -> Compare:
        return cls(key, "mod_revision", operator, revision)

    @classmethod
    def lease(cls, key: bytes, operator: CompareOperator, lease: int) -> Compare:
        return cls(key, "lease", operator, lease)

    @classmethod
    def missing(cls, key: bytes) -> Compare:
        """Holds while ``key`` does not exist."""
        return cls(key, "create_revision", "==", 0)

    def holds(self, kv: KeyValue | None) -> bool:
        """Whether the compare holds for ``kv`` (None: the key is missing)."""
        if kv is None:
            if self.target == "value":
                return False  # etcd: a value compare on a missing key never holds
            kv = KeyValue(self.key)
        actual = getattr(kv, self.target)
        operand = self.operand
        if self.operator == "==":
            return actual == operand
        if self.operator == "!=":
            return actual != operand
        if self.operator == "<":
            return actual < operand  # type: ignore[operator]
        return actual > operand  # type: ignore[operator]


@dataclass(frozen=True, slots=True)
class Put:
    key: bytes
    value: bytes
    lease: int = 0  # 0: no lease (a key put without one is detached from any earlier lease)


@dataclass(frozen=True, slots=True)
class Get:
    key: bytes
    prefix: bool = False  # every key starting with ``key``


@dataclass(frozen=True, slots=True)
class Delete:
    key: bytes
    prefix: bool = False


Operation = Put | Get | Delete
# per operation: Put -> None, Get -> tuple[KeyValue, ...], Delete -> number of keys deleted
OperationResult = None | tuple[KeyValue, ...] | int


@dataclass(frozen=True, slots=True)
class TxnResult:
    succeeded: bool  # the compares held: ``success`` ran (else ``failure``)
    revision: int  # the store's revision after the transaction
    results: tuple[OperationResult, ...] = ()


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: Literal["put", "delete"]
    kv: KeyValue  # a delete carries the key and the deleting revision (mod_revision) only


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """Changes of one or more whole revisions, in order."""

    events: tuple[WatchEvent, ...]  # empty: the opening batch of a watch
    revision: int  # the last revision the batch covers (opening batch: the store's revision)


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    id: int
    ttl: int  # seconds granted (etcd may raise a small TTL to its minimum)


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key starting with ``prefix`` (etcd's range_end); b"\\0" for
    the empty prefix (every key)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"


class Coordinator(abc.ABC):
    """A coordination service (etcd, or its memory twin). Every method may raise
    ``CoordinatorUnavailable`` or ``NoLeader``; reads are linearizable."""

    @abc.abstractmethod
    async def range(self, key: bytes, prefix: bool = False) -> RangeResult:
        """``key`` (or every key under it, in key order) at the current revision."""

    async def get(self, key: bytes) -> KeyValue | None:
        kvs = (await self.range(key)).kvs
        return kvs[0] if kvs else None

    @abc.abstractmethod
    async def txn(self, compares: Sequence[Compare], success: Sequence[Operation] = (),
                  failure: Sequence[Operation] = ()) -> TxnResult:
        """Atomically: ``success`` if every compare holds, else ``failure``."""

    async def put(self, key: bytes, value: bytes, lease: int = 0) -> int:
        """Returns the revision of the put. Raises ``LeaseNotFound`` for an unknown lease."""
        return (await self.txn((), (Put(key, value, lease),))).revision

    async def delete(self, key: bytes, prefix: bool = False) -> int:
        """Returns the number of keys deleted."""
        deleted = (await self.txn((), (Delete(key, prefix),))).results[0]
        assert isinstance(deleted, int)
        return deleted

    @abc.abstractmethod
    async def compact(self, revision: int) -> None:
        """Forget the history below ``revision`` (watches from there raise ``Compacted``)."""

    @abc.abstractmethod
    async def grant_lease(self, ttl: int) -> LeaseGrant:
        """A new lease of ``ttl`` seconds."""

    @abc.abstractmethod
    async def keepalive(self, lease: int) -> int:
        """Renew ``lease``; returns its TTL from now, 0 when it no longer exists."""

    @abc.abstractmethod
    async def revoke_lease(self, lease: int) -> None:
        """End ``lease`` now (its keys are deleted). Raises ``LeaseNotFound``."""

    @abc.abstractmethod
    async def lease_time_to_live(self, lease: int) -> int:
        """Seconds ``lease`` has left; -1 when it does not exist."""

    @abc.abstractmethod
    def watch(self, key: bytes, start_revision: int = 0,
              prefix: bool = True) -> AsyncIterator[WatchBatch]:
        """The changes of ``key`` (or every key under it) from ``start_revision`` on."""

    def clock(self) -> float:
        """Seconds on the clock lease deadlines are measured with (monotonic)."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of ``clock()`` (the twin's clock is moved by hand)."""
        await asyncio.sleep(seconds)

    async def close(self) -> None:
        """Release connections; the coordinator is not used afterwards."""

