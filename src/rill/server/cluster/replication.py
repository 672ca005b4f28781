"""Copying a partition from its leader to its followers (``shared/spec/cluster-design.md`` §2.7,
§2.8): the leader's side (``LeaderReplica``: followers' progress, the high watermark, the
acks=all waits, ISR changes to propose) and the follower's (``Follower``: truncation by leader
epochs, then a long-polled fetch loop appending the leader's stored bytes verbatim).

Invariants:
* The high watermark is the smallest log end among the leader and its ISR (the ISR as etcd
  holds it, plus a follower whose return is being proposed: Kafka's "maximal ISR"), never
  moves back, and no consumer reads at or above it (``core.messages``, ``core.long_poll``).
* A follower reports as its fetch offset only what its own fsync policy made durable (it
  waits for the policy's sync before asking for more), so acks=all under fsync=always means
  on disk on every ISR member.
* A follower truncates only after asking the leader where its last epoch ends (KIP-101,
  KIP-279), never below the high watermark it knows (``Log.truncate_to``'s floor).
* A replica serves a fetch only for the leader epoch it holds: older -> fenced_leader_epoch,
  newer -> unknown_leader_epoch; and only from the member epoch etcd holds for the sender.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from rill import errors
from rill.protocol.peer import codec
from rill.server.cluster.partition_state import PartitionState
from rill.server.cluster.peer_link import PeerLink, PeerRefused, PeerUnavailable

if TYPE_CHECKING:
    from rill.server.storage.file_region import FileRegion
    from rill.server.core.model import Partition

log = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 4 * 1024 * 1024


@dataclass(slots=True)
class Progress:
    """What the leader knows of one follower."""

    fetch_offset: int = 0  # the follower's durable log end, as its last fetch said
    caught_up_at: float = field(default_factory=time.monotonic)  # last time it had the end
    fetched_at: float = 0.0


class LeaderReplica:
    """This node leads ``partition`` at ``state.leader_epoch``."""

    def __init__(self, partition: Partition, state: PartitionState, node_id: int,
                 woken: Callable[[Partition], None]) -> None:
        self.partition = partition
        self.state = state
        self.node_id = node_id
        self.woken = woken  # the core's wake-up of long polls (the HW moved)
        now = time.monotonic()
        self.progress: dict[int, Progress] = {
            node: Progress(caught_up_at=now) for node in state.replicas if node != node_id}
        self.returning: set[int] = set()  # followers whose ISR return is being proposed
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.stepped_down = False

    @property
    def epoch(self) -> int:
        return self.state.leader_epoch

    def update(self, state: PartitionState) -> None:
        """etcd's newer state of the partition (same leader and epoch: an ISR change)."""
        self.state = state
        self.returning -= set(state.isr)
        self.advance()

    def high_watermark(self) -> int:
        log_end = self.partition.log.next_offset
        marks = [log_end]
        for node in (*self.state.isr, *self.returning):
            if node != self.node_id:
                progress = self.progress.get(node)
                marks.append(progress.fetch_offset if progress is not None else 0)
        return min(marks)

    def advance(self) -> None:
        """Move the high watermark up to what the ISR holds; wake what waited for it."""
        partition = self.partition
        mark = self.high_watermark()
        if mark > partition.high_watermark:
            partition.high_watermark = mark
            self.woken(partition)
        current = partition.high_watermark
        if self._waiters:
            keep = []
            for offset, waiter in self._waiters:
                if offset < current:
                    if not waiter.done():
                        waiter.set_result(None)
                else:
                    keep.append((offset, waiter))
            self._waiters = keep

    def fetched(self, follower: int, fetch_offset: int) -> None:
        now = time.monotonic()
        progress = self.progress.setdefault(follower, Progress(caught_up_at=now))
        progress.fetch_offset = fetch_offset
        progress.fetched_at = now
        if fetch_offset >= self.partition.log.next_offset:
            progress.caught_up_at = now
        self.advance()

    async def replicated(self, last_offset: int, timeout: float) -> None:
        if self.partition.high_watermark > last_offset:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((last_offset, waiter))
        try:
            async with asyncio.timeout(timeout):
                await waiter
        except TimeoutError:
            raise errors.ReplicationTimedOut() from None

    def step_down(self, leader: int | None) -> int:
        """This node no longer leads: every acks=all write still waiting is answered
        ``LeaderSteppedDown``, an unknown outcome (it was appended here, and a replica that
        copied it may lead now and keep it), never a refusal before writing, which would let
        the Iggy proxy, an HTTP redirect or a TANK client send it again and store it twice.
        Returns how many."""
        self.stepped_down = True
        answered = 0
        for _, waiter in self._waiters:
            if not waiter.done():
                answered += 1
                waiter.set_exception(errors.LeaderSteppedDown(
                    self.node_id, self.partition.id, leader))
        self._waiters = []
        return answered

    def lagging(self, lag_max: float) -> list[int]:
        """ISR followers that have not caught up for ``lag_max`` seconds."""
        now = time.monotonic()
        return [node for node in self.state.isr if node != self.node_id
                and now - self.progress.setdefault(node, Progress()).caught_up_at > lag_max]

    def caught_up(self, live: set[int]) -> list[int]:
        """Live replicas outside the ISR whose log reaches the high watermark at this epoch."""
        mark = self.partition.high_watermark
        return [node for node, progress in self.progress.items()
                if node not in self.state.isr and node not in self.returning and node in live
                and progress.fetched_at and progress.fetch_offset >= mark]

    def lag(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        end = self.partition.log.next_offset
        return [{"node_id": node, "fetch_offset": progress.fetch_offset,
                 "lag_messages": max(0, end - progress.fetch_offset),
                 "lag_seconds": round(0.0 if progress.fetch_offset >= end
                                      else now - progress.caught_up_at, 3)}
                for node, progress in sorted(self.progress.items())]


def answer_fetch(leader: LeaderReplica, header: dict[str, Any], regions: bool = False
                 ) -> tuple[dict[str, Any], list[bytes | FileRegion]]:
    """The records from the follower's fetch offset, up to ``max_bytes`` (at least one unit
    when any), as the log's chunks (sent as they are, not joined; with ``regions``, large
    verified ranges as file regions for the transport to sendfile), with the epochs they
    carry and the high watermark."""
    partition = leader.partition
    log_ = partition.log
    offset = int(header["fetch_offset"])
    max_bytes = min(int(header.get("max_bytes", FETCH_MAX_BYTES)), FETCH_MAX_BYTES)
    chunks: list[bytes | FileRegion] = []
    count = 0
    if offset < log_.next_offset:
        count, chunks = log_.read(offset, log_.next_offset - offset, max_bytes, regions=regions)
    epochs = log_.epochs_from(offset) if count else []
    return ({"high_watermark": partition.high_watermark, "log_start": log_.first_offset,
             "log_end": log_.next_offset, "count": count,
             "epochs": [list(pair) for pair in epochs]}, chunks)


class Follower:
    """Copies ``partition`` from its leader at ``leader_epoch`` until stopped."""

    def __init__(self, partition: Partition, leader_id: int, leader_epoch: int, incarnation: int,
                 link: Callable[[], Any], node_id: int, member_epoch: Callable[[], int],
                 on_fenced: Callable[[], None]) -> None:
        self.partition = partition
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.incarnation = incarnation  # the partition's (``PartitionState.incarnation``)
        self.stopped = False  # once set, no further request goes out (``stop_soon``)
        self.link = link  # coroutine function: a fresh PeerLink to the leader
        self.node_id = node_id
        self.member_epoch = member_epoch
        self.on_fenced = on_fenced  # the leader refused our epochs: re-read etcd's state
        self.task: asyncio.Task[None] | None = None
        self.fetches = 0

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name=f"follow {self._key}")

    @property
    def _key(self) -> str:
        p = self.partition
        return f"{p.stream_id}/{p.topic_id}/{p.id}"

    def stop_soon(self) -> None:
        """Stop without waiting: the task is cancelled, and the flag ends its loop even if a
        cancellation is lost (one that lands as an awaited answer arrives)."""
        self.stopped = True
        if self.task is not None:
            self.task.cancel()

    async def stop(self) -> None:
        self.stopped = True
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass

    def _ids(self) -> dict[str, int]:
        p = self.partition
        return {"stream_id": p.stream_id, "topic_id": p.topic_id, "partition_id": p.id,
                "incarnation": self.incarnation}

    async def _run(self) -> None:
        backoff = 0.05
        fetched = self.fetches
        while not self.stopped:
            link: PeerLink | None = None
            try:
                link = await self.link()
                await self._truncate(link)
                await self._fetch_loop(link)
            except asyncio.CancelledError:
                raise
            except PeerRefused as refusal:
                if refusal.status in ("fenced_leader_epoch", "unknown_leader_epoch",
                                      "not_leader_for_partition", "fenced_member"):
                    self.on_fenced()
                log.info("follower of %s: leader %d refused: %s", self._key, self.leader_id,
                         refusal)
            except PeerUnavailable as error:
                log.info("follower of %s: leader %d unreachable: %s", self._key,
                         self.leader_id, error)
            except Exception:
                log.exception("follower of %s failed; retrying", self._key)
            finally:
                if link is not None:
                    link.close()
            await asyncio.sleep(backoff)
            # (back to the shortest wait once a fetch went through)
            backoff = 0.05 if self.fetches > fetched else min(backoff * 2, 1.0)
            fetched = self.fetches

    async def _truncate(self, link: PeerLink) -> None:
        """KIP-101/279: cut this log where it leaves the leader's."""
        log_ = self.partition.log
        while not self.stopped:
            last = log_.last_epoch
            if last is None or log_.next_offset == log_.first_offset:
                return
            answer = await link.request(codec.EPOCH_END, {
                **self._ids(), "leader_epoch": self.leader_epoch, "epoch": last})
            if self.stopped:
                return
            epoch, end = answer.header["epoch"], int(answer.header["end_offset"])
            cut = min(end, log_.next_offset)
            if epoch is not None and epoch < last:
                mine = log_.epoch_end(epoch)
                cut = min(cut, mine[1] if mine is not None else log_.first_offset)
            if cut >= log_.next_offset:
                return
            floor = (self.partition.high_watermark if self.partition.high_watermark_known
                     else (log_.stored_high_watermark or 0))
            log.warning("follower of %s: truncating from %d to %d (leader epoch %s ends at %d)",
                        self._key, log_.next_offset, cut, epoch, end)
            log_.truncate_to(cut, floor)
            if epoch is None or epoch >= last:
                return

    async def _fetch_loop(self, link: PeerLink) -> None:
        partition = self.partition
        log_ = partition.log
        per_record = not log_.settings.record_format.startswith("kafka")
        while not self.stopped:
            answer = await link.request(codec.FETCH, {
                **self._ids(), "replica_id": self.node_id, "member_epoch": self.member_epoch(),
                "leader_epoch": self.leader_epoch, "fetch_offset": log_.next_offset,
                "max_wait_ms": FETCH_MAX_WAIT_MS, "max_bytes": FETCH_MAX_BYTES},
                timeout=FETCH_MAX_WAIT_MS / 1000 + 5)
            self.fetches += 1
            if self.stopped:
                return
            header = answer.header
            body = answer.body  # (a view of the answer's own buffer: never reused)
            if body:
                first = log_.next_offset
                # (a per-record format's records carry no epoch: the answer's runs say them)
                await log_.append_replicated_async(body, first,
                                                   header["epochs"] if per_record else None)
                await log_.wait_durable()  # the policy's sync before reporting the new end
            mark = min(int(header["high_watermark"]), log_.next_offset)
            if mark > partition.high_watermark or not partition.high_watermark_known:
                partition.high_watermark = mark
