"""What every service shares: the model, the catalog (``core.catalog``), the partition logs
(``core.log``), the files, the clock.

Owns: lookups by id or name (``Ref``) (with the right not-found error for ids and names), id
assignment, opening partitions (their logs through the ``Logs`` port), the authentication gate, and the order of
catalogue changes (``catalogue_change``: creating and deleting streams, topics and partitions,
one at a time, each to its end). Invariant: services reach streams, topics and partitions only
through these lookups.
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TypeVar

from rill import errors
from rill.server.auth.permissioner import Action, Permissioner
from rill.server.auth.throttling import LoginThrottle, ThrottleSettings
from rill.server.config import ServerConfig
from rill.server.core.cluster_view import UNPLACED, ClusterView
from rill.server.core.catalog import Catalog
from rill.server.core.log import Logs
from rill.server.core.model import FOLLOWER, Partition, Session, Stream, Topic
from rill.server.core.registry import Registry
from rill.server.core.types import Ref
from rill.server.storage.durability import Durability
from rill.server.storage.log_opener import FileLogs
from rill.server.storage.paths import DataPaths


def now_microseconds() -> int:
    return time.time_ns() // 1000


@dataclass(eq=False)
class CoreState:
    config: ServerConfig
    paths: DataPaths
    store: Catalog  # the Catalog port: changed only through it, the model applied after
    durability: Durability
    permissioner: Permissioner
    clock: Callable[[], int] = now_microseconds
    streams: Registry = field(default_factory=Registry)  # id -> Stream, also by name
    clean_start: bool = True
    login_throttle: LoginThrottle = field(
        default_factory=lambda: LoginThrottle(ThrottleSettings(enabled=False)))
    # catalogue changes (``catalogue_change``) run one at a time, each to its end
    catalogue_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    catalogue_changes: set[asyncio.Future[Any]] = field(default_factory=set)
    # the Logs port: opens partitions' logs; None: segment files in the data directory
    # (``storage.log_opener``, the one place the core opens file logs through), or the twin
    logs: Logs = None  # type: ignore[assignment]
    # the cluster this node belongs to (``core.cluster_view``); None: standalone
    cluster: ClusterView | None = None

    def __post_init__(self) -> None:
        if self.logs is None:
            system = self.config.system
            self.logs = FileLogs.with_settings(
                self.paths, self.durability, segment_size=system.segment.size,
                validate_checksum=system.segment.validate_checksum,
                append_threads=system.append_threads,
                append_thread_min_size=system.append_thread_min_size)

    # -- gates -----------------------------------------------------------------------------

    def authorize(
        self,
        session: Session,
        action: Action,
        stream_id: int | None = None,
        topic_id: int | None = None,
    ) -> None:
        """40 when not logged in; 41 when the user's permissions do not grant ``action`` on the
        server (no ids), the stream or the topic."""
        if not session.is_authenticated:
            raise errors.Unauthenticated()
        self.permissioner.authorize(session.user_id, action, stream_id, topic_id)

    # -- lookups ---------------------------------------------------------------------------

    def find_stream(self, stream_id: Ref) -> Stream:
        value = stream_id
        if isinstance(value, int):
            stream = self.streams.get(value)
            if stream is None:
                raise errors.StreamIdNotFound(value, field="stream_id")
            return stream
        stream = self.streams.named(value)
        if stream is None:
            raise errors.StreamNameNotFound(value, field="stream_id")
        return stream

    def find_topic(self, stream_id: Ref, topic_id: Ref) -> Topic:
        stream = self.find_stream(stream_id)
        value = topic_id
        if isinstance(value, int):
            topic = stream.topics.get(value)
            if topic is None:
                raise errors.TopicIdNotFound(value, stream.id, field="topic_id")
            return topic
        topic = stream.topics.named(value)
        if topic is None:
            raise errors.TopicNameNotFound(value, stream.id, field="topic_id")
        return topic

    @staticmethod
    def find_partition(topic: Topic, partition_id: int) -> Partition:
        partition = topic.partitions.get(partition_id)
        if partition is None:
            if not topic.partitions:
                raise errors.NoPartitions(topic.id, topic.stream_id)
            raise errors.PartitionNotFound(
                partition_id, topic.id, topic.stream_id, field="partition_id"
            )
        return partition

    # -- ids -------------------------------------------------------------------------------

    @staticmethod
    def lowest_free_id(used: dict[int, object] | set[int]) -> int:
        """The lowest free id from 1 in a small collection (consumer groups of a topic; streams
        and topics use their Registry's)."""
        candidate = 1
        while candidate in used:
            candidate += 1
        return candidate

    # -- disk space ------------------------------------------------------------------------

    def space_freed(self) -> None:
        """Files were deleted: take the metadata space reserve again if it was released."""
        if self.store.reserve is not None:
            self.store.reserve.take()

    # -- catalogue changes -----------------------------------------------------------------

    async def settle_catalogue(self) -> None:
        """Wait for the catalogue changes under way (a stop, before it closes the logs)."""
        while self.catalogue_changes:
            await asyncio.gather(*self.catalogue_changes, return_exceptions=True)

    # -- partition files -------------------------------------------------------------------

    def open_partition(self, topic: Topic, partition_id: int, created_at: int,
                       sync_parent: bool = True) -> Partition:
        log = self.logs.open(topic.stream_id, topic.id, partition_id, topic.record_format,
                             self.clean_start, sync_parent=sync_parent)
        partition = Partition(topic.stream_id, topic.id, partition_id, created_at, log)
        if self.cluster is not None:  # offline until the cluster places it
            partition.placement = UNPLACED
            partition.role = FOLLOWER
        return partition


Change = TypeVar("Change", bound=Callable[..., Awaitable[Any]])


def catalogue_change(method: Change) -> Change:
    """A service's coroutine method that creates or deletes streams, topics or partitions,
    making or removing their files in a worker thread while the event loop serves everyone
    else (``core.partitions``). Such changes run one at a time (the state's
    ``catalogue_lock``: what one checked, e.g. that a name is free, still holds when it
    commits), and each runs to its end even when its caller is cancelled (a thread cannot be
    stopped half-way: what it made is then committed or removed, never left behind); a stop
    waits for them (``settle_catalogue``). Everything else (sends, polls, lookups, settings)
    goes on meanwhile and sees the catalogue as it was until the change commits."""

    @functools.wraps(method)
    async def change(self: Any, *args: Any, **kwargs: Any) -> Any:
        state: CoreState = self.state

        async def locked() -> Any:
            async with state.catalogue_lock:
                return await method(self, *args, **kwargs)

        task = asyncio.ensure_future(locked())
        state.catalogue_changes.add(task)
        task.add_done_callback(_finished_change(state))
        return await asyncio.shield(task)

    return change  # type: ignore[return-value]


def _finished_change(state: CoreState) -> Callable[[asyncio.Future[Any]], None]:
    def finished(task: asyncio.Future[Any]) -> None:
        state.catalogue_changes.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a caller that was cancelled no longer awaits it
    return finished
