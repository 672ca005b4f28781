"""A lease kept alive, with a local deadline.

Owns: ``LeaseKeeper``: grants a lease, renews it every TTL/3 and keeps a **local deadline** =
the send time of the last confirmed keepalive (or of the grant) + TTL, on the coordinator's
monotonic clock. The coordination service cannot have expired the lease before that
deadline, so while ``valid`` the holder may act on the strength of the lease; past it the
holder must assume the lease lost (``lost`` is set, with ``lost_reason``), without asking
anyone: a holder paused (SIGSTOP, a VM stall) past its deadline learns on waking, before it
sends anything, that it may have lost it (tikv/pd ``pkg/election/lease.go``, and
``shared/spec/cluster-design.md`` §2.5). A lost lease is not renewed again: a new one is
granted (a new member epoch) -- unless the keeper was made to ``outlive_deadline``: it then
goes on renewing past the deadline (``valid`` false meanwhile) and is lost only when the
coordinator says the lease is gone. Safety never rests on this (every write that relies on the
lease also carries an etcd compare); it stops a stale holder early.
"""

from __future__ import annotations

import asyncio
import contextlib

from rill.server.cluster.coordinator import Coordinator, CoordinatorError

LOCAL_DEADLINE_PASSED = "the local deadline passed without a confirmed keepalive"
EXPIRED = "the coordinator says the lease no longer exists"


class LeaseKeeper:
    def __init__(self, coordinator: Coordinator, ttl: int, outlive_deadline: bool = False
                 ) -> None:
        self.coordinator = coordinator
        self.requested_ttl = ttl
        # past the local deadline, keep renewing (``valid`` is false meanwhile) until the
        # coordinator says the lease is gone: a member lease across an etcd quorum loss, which
        # etcd does not expire (its new leader restarts every lease's TTL)
        self.outlive_deadline = outlive_deadline
        self.lease = 0
        self.ttl = 0
        self.deadline = 0.0
        self.keepalives_sent = 0
        self.lost = asyncio.Event()
        self.lost_reason = ""
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> int:
        """Grant the lease and start renewing it; returns its id."""
        sent = self.coordinator.clock()
        grant = await self.coordinator.grant_lease(self.requested_ttl)
        self.lease, self.ttl = grant.id, grant.ttl
        self.deadline = sent + grant.ttl
        self._task = asyncio.create_task(self._renew(), name=f"lease {self.lease:x}")
        return self.lease

    @property
    def valid(self) -> bool:
        """Whether the lease surely still exists: not lost, and the local deadline not passed."""
        return not self.lost.is_set() and self.coordinator.clock() < self.deadline

    def _lose(self, reason: str) -> None:
        if not self.lost.is_set():
            self.lost_reason = reason
            self.lost.set()

    async def _renew(self) -> None:
        clock = self.coordinator.clock
        while True:
            await self.coordinator.sleep(self.ttl / 3)
            if clock() >= self.deadline and not self.outlive_deadline:
                self._lose(LOCAL_DEADLINE_PASSED)  # checked before sending anything
                return
            sent = clock()
            self.keepalives_sent += 1
            try:
                remaining = await self.coordinator.keepalive(self.lease)
            except CoordinatorError:  # unavailable, no leader: the deadline stands
                continue  # the next round tries again
            if remaining <= 0:
                self._lose(EXPIRED)
                return
            self.deadline = max(self.deadline, sent + remaining)

    async def stop(self, revoke: bool = True) -> None:
        """Stop renewing; ``revoke``: end the lease now (its keys go at once)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if revoke and self.lease and not self.lost.is_set():
            with contextlib.suppress(CoordinatorError):
                await self.coordinator.revoke_lease(self.lease)
        self._lose("stopped")
