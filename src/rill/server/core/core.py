"""The Core: builds the services over one shared state, loads it at start, closes it at stop.

Owns: start-up (the catalog — ``core.catalog``: the SQLite metadata store of the data
directory, or the catalog the Core was given — reconciled with the data directory — see
``core.reconciliation`` —, catalog -> model, partition logs opened through the ``Logs`` port —
``core.log``: files with recovery, or the logs the Core was given —, the root user at the
first start, then the catalog followed: ``apply``), sessions (one per connection), background
tasks (retention, token cleaner, heartbeat, metadata checkpoints under ``fsync = interval``),
and the clean-shutdown marker that tells the
next start whether the tails of the logs need checksum verification.

The data directory is private to the server's user (0700), and so is every file in it (0600).
One server per data directory: the Core takes the directory's lock (``storage.data_lock``)
before it reads anything there and lets it go last at stop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from typing import Awaitable, Callable

import xxhash

from rill.server.auth.permissioner import Permissioner
from rill.server.auth.throttling import LoginThrottle, ThrottleSettings
from rill.server.config import ServerConfig
from rill.server.auth.access_tokens import JwtManager, load_or_create_secret
from rill.server.core.consumer_groups import (
    ConsumerGroupService,
    GroupMembership,
    NoMembership,
)
from rill.server.core.cluster_view import ClusterView
from rill.server.core.broker import Broker
from rill.server.core import applying
from rill.server.core.catalog import Catalog, CatalogChange
from rill.server.core.log import Log, Logs
from rill.server.core.clients import ClientService, run_heartbeat_verifier
from rill.server.core.columnar import ColumnarReadService
from rill.server.core.consumer_offsets import ConsumerOffsetService
from rill.server.core.long_poll import AppendSignals, LongPollService
from rill.server.core.messages import MessageService
from rill.server.core.model import Session, Stream, Topic
from rill.server.core.partitions import PartitionService
from rill.server.core.reconciliation import (
    open_store,
    reconcile,
    root_user_needed,
    write_identity,
)
from rill.server.core.retention import run_retention
from rill.server.core.snapshot import SnapshotService
from rill.server.core.state import CoreState
from rill.server.core.streams import StreamService
from rill.server.core.system import SystemService
from rill.server.core.tokens import PersonalAccessTokenService
from rill.server.core.topics import TopicService
from rill.server.core.transactions import TransactionService
from rill.server.core.types import MemberSource
from rill.server.core.users import UserService
from rill.server.metrics import Metrics
from rill.server.storage.data_lock import DataDirectoryLock
from rill.server.storage.descriptors import configure as configure_descriptors
from rill.server.storage.descriptors import open_file_limit
from rill.server.storage.directories import DIRECTORY_MODE, make_directory
from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.paths import DataPaths
from rill.server.storage.reserve import SpaceReserve

log = logging.getLogger(__name__)

class Core:
    def __init__(self, config: ServerConfig, recover_metadata: bool = False,
                 group_membership: GroupMembership | None = None,
                 catalog: Catalog | None = None, logs: Logs | None = None) -> None:
        """Open the data directory and its metadata store; raises ``StartupRefused`` when the
        store is damaged or lost its users (``recover_metadata`` rebuilds what it can).
        ``group_membership``: who manages the members of consumer groups (Iggy's, when the
        server serves Iggy; without one no client can be a member). ``catalog``: the catalog
        to run on instead of the metadata store (the memory twin, ``core.memory_catalog``);
        the Core closes it at stop. ``logs``: what opens the partitions' logs instead of
        segment files in the data directory (the memory twin, ``storage.memory_log``)."""
        self.config = config
        self._group_membership = group_membership or NoMembership()
        paths = DataPaths(config.data_path)
        make_directory(paths.root)
        paths.root.chmod(DIRECTORY_MODE)
        self.running = False  # from the end of start to the beginning of stop
        self._lock = DataDirectoryLock.acquire(paths.lock)  # before anything else is touched
        try:
            self._open(config, paths, recover_metadata, catalog, logs)
        except BaseException:
            self._lock.release()
            raise

    @property
    def cluster(self) -> ClusterView | None:
        """The cluster this node belongs to (``core.cluster_view``; set by the cluster layer
        before the listeners start); None: standalone."""
        return self.state.cluster

    @cluster.setter
    def cluster(self, view: ClusterView | None) -> None:
        self.state.cluster = view

    def _open(self, config: ServerConfig, paths: DataPaths, recover_metadata: bool,
              catalog: Catalog | None, logs: Logs | None) -> None:
        self._first_start = not (paths.identity if catalog is not None
                                 else paths.metadata_db).exists()
        budget = configure_descriptors(config.system.max_open_files)
        log.info("storage keeps at most %d segment files open (max_open_files = %s, open-file "
                 "limit %d)", budget, config.system.max_open_files, open_file_limit())
        if budget > open_file_limit():
            log.warning("max_open_files = %d is above the open-file limit %d: opens that hit "
                        "the limit close other segment files first", budget, open_file_limit())
        policy = config.fsync_policy
        reserve = SpaceReserve(paths.metadata_reserve, config.system.metadata_reserve)
        store = catalog if catalog is not None else open_store(
            paths, policy is FsyncPolicy.ALWAYS, reserve, recover_metadata)
        try:
            self._create_root = root_user_needed(paths, store, recover_metadata)
        except BaseException:
            store.close()
            raise
        durability = Durability(policy, config.system.fsync_interval,
                                config.system.fsync_threads)
        self.state = CoreState(
            config=config,
            paths=paths,
            store=store,
            durability=durability,
            logs=logs,  # None: segment files (``CoreState``)
            permissioner=Permissioner(),
            login_throttle=LoginThrottle(
                ThrottleSettings(**dataclasses.asdict(config.login_throttle)), store=store),
        )
        state = self.state
        self.sessions: dict[int, Session] = {}
        # every service gets what it calls when it is built; the one list filled later is
        # member_sources (each protocol with groups of its own adds its source as it starts)
        groups = self.consumer_groups = ConsumerGroupService(state, self._group_membership)
        self.system = SystemService(state, self.sessions, groups.groups_of)
        self.clients = ClientService(state, self.sessions)
        self.snapshot = SnapshotService(state)
        # a deleted or deactivated user is logged out of every live session; its tokens go
        self.users = UserService(state, self.sessions.values,
                                 on_user_deleted=lambda user_id: self.tokens.forget_user(user_id))
        self.tokens = PersonalAccessTokenService(state, self.users)
        self.streams = StreamService(state, on_stream_deleted=groups.stream_deleted)
        self.topics = TopicService(state, on_topic_deleted=groups.topic_deleted)
        self.partitions = PartitionService(state, on_partitions_changed=groups.partitions_changed)
        self.consumer_offsets = ConsumerOffsetService(state, groups)
        self.metrics = Metrics()  # this server's (served at [http.metrics] endpoint)
        self.appends = AppendSignals()  # every append wakes the long polls of its partition
        # told of every append after the long polls (a cluster leader's high watermark)
        self.append_hooks: list[Callable[[Log], None]] = []
        self.messages = MessageService(state, self.consumer_offsets, self._appended,
                                       self.appends)
        # rill extensions (docs/extensions.md)
        self.columnar = ColumnarReadService(state)
        self.transactions = TransactionService(state, self._appended)
        self.long_poll = LongPollService(state, self.appends)
        self.broker = Broker(self)  # the neutral API the wire protocols call
        # the protocols whose groups' membership lives outside the core (Kafka's coordinator)
        # add a source here; the Broker's ``group_members`` asks them all
        self.member_sources: list[MemberSource] = []
        # called with the session when a client disconnects (consumer groups leave, ...)
        self._on_disconnect: tuple[Callable[[Session], None], ...] = (
            groups.client_disconnected,)
        self._client_ids = itertools.count(1)
        self.access_tokens: JwtManager | None = None  # made at start when HTTP is enabled
        self._tasks: list[asyncio.Task[None]] = []

    # -- sessions --------------------------------------------------------------------------

    def connect(self, address: str, transport: str) -> Session:
        """A session for a connection from ``address`` over ``transport`` (its neutral name:
        "tcp", "quic")."""
        client_id = xxhash.xxh32_intdigest(address.encode("utf-8"))
        while client_id == 0 or client_id in self.sessions:  # keep ids unique and non-zero
            client_id = (client_id + next(self._client_ids)) & 0xFFFFFFFF
        now = self.state.clock()
        session = Session(client_id, address, transport, connected_at=now, last_heartbeat=now)
        self.sessions[client_id] = session
        return session

    def request_session(self, address: str, transport: str, user_id: int) -> Session:
        """A session for one request of a connectionless transport (HTTP): client id 0,
        authenticated as ``user_id`` (0: nobody), never registered (no heartbeat, no groups)."""
        now = self.state.clock()
        return Session(0, address, transport, user_id=user_id, connected_at=now,
                       last_heartbeat=now)

    def disconnect(self, session: Session) -> None:
        if self.sessions.get(session.client_id) is not session:
            return  # already removed (e.g. by the heartbeat verifier); its id may be reused
        del self.sessions[session.client_id]
        for callback in self._on_disconnect:
            try:
                callback(session)
            except Exception:
                log.exception("disconnect hook failed for client %d", session.client_id)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        state = self.state
        marker = state.paths.clean_shutdown_marker
        state.clean_start = marker.exists()
        if not state.clean_start and not self._first_start:
            log.warning("previous run did not stop cleanly: verifying the tails of the logs")
        await reconcile(state.paths, state.store, state.durability, state.clock())
        await self._load()
        state.store.follow(self.apply)  # other nodes' changes, from what was loaded on
        write_identity(state.paths, state.clock())
        await self.transactions.start()  # finishes commits a crash interrupted
        marker.unlink(missing_ok=True)
        await state.durability.start()
        state.space_freed()  # the metadata reserve: taken at the first start, or again
        if state.durability.policy is FsyncPolicy.INTERVAL:
            self._tasks.append(asyncio.create_task(
                _checkpoint_metadata(state, state.durability.interval_seconds)))
        retention = self.config.retention
        if retention.cleaner_enabled:
            self._tasks.append(asyncio.create_task(run_retention(state, retention.interval)))
        self._tasks.append(asyncio.create_task(self.tokens.run_cleaner()))
        if self.config.http.enabled:  # HTTP's bearer tokens (auth.access_tokens)
            self.access_tokens = JwtManager(self.config.http.jwt,
                                            load_or_create_secret(state.paths.jwt_secret), state.store)
            self.access_tokens.forget_expired_revocations()
            self._tasks.append(asyncio.create_task(self.access_tokens.run_cleaner()))
        if not state.clean_start and not self._first_start:  # verify the rest, off the loop
            self._tasks.append(asyncio.create_task(state.logs.verify(lambda: [
                partition.log for stream in state.streams.values()
                for topic in stream.topics.values() for partition in topic.partitions.values()])))
        heartbeat = self.config.heartbeat
        if heartbeat.enabled:
            self._tasks.append(asyncio.create_task(
                run_heartbeat_verifier(state, self.sessions, heartbeat.interval, self.disconnect)
            ))
        self.running = True

    def apply(self, change: CatalogChange) -> None:
        """A change the catalog confirmed that this node did not make (``Catalog.follow``),
        applied to the model as this node's own confirmation of it is (``core.applying``)."""
        applying.apply(self.state, self.consumer_groups, self.users, change, self.tokens)

    def _appended(self, log: Log) -> None:
        """Every append, whatever its path (an append, an admitted one, a staged commit)."""
        self.metrics.record_appended(log)
        self.appends.appended(log)
        for hook in self.append_hooks:
            hook(log)

    # -- what transports and protocols may ask -------------------------------------------------

    @property
    def paths(self) -> DataPaths:
        return self.state.paths

    def heartbeat(self, session: Session) -> bool:
        """A request arrived on ``session``: it counts as a heartbeat. False when the session
        is gone (the heartbeat verifier removed it): the connection must close."""
        if self.sessions.get(session.client_id) is not session:
            return False
        session.last_heartbeat = self.state.clock()
        return True

    def user_is_active(self, user_id: int) -> bool:
        user = self.users.users.get(user_id)
        return user is not None and user.is_active

    def connections_by_protocol(self) -> dict[tuple[str, str], int]:
        """How many clients are connected now, by (wire protocol, transport): ("iggy", "tcp"),
        ("kafka", "tcp"), ... (HTTP callers have no connection)."""
        counts: dict[tuple[str, str], int] = {}
        for session in list(self.sessions.values()):
            key = (session.protocol, session.transport)
            counts[key] = counts.get(key, 0) + 1
        return counts

    def summary(self) -> str:
        """What this start loaded and how: for the one line the server logs once it serves."""
        state = self.state
        topics = [topic for stream in state.streams.values() for topic in stream.topics.values()]
        partitions = sum(len(topic.partitions) for topic in topics)
        if self._first_start:
            how = "a new data directory"
        elif state.clean_start:
            how = "after a clean stop"
        else:
            how = "recovered after an unclean stop (log tails verified; the rest in the background)"
        return (f"{len(state.streams)} streams, {len(topics)} topics, {partitions} partitions "
                f"loaded, {how}")

    def unready_because(self) -> str | None:
        """Why the server should not be sent traffic now (None: it is ready): not started yet,
        stopping, or its message writes are failing (e.g. a full disk)."""
        if not self.running:
            return "not running (starting or stopping)"
        failures = self.messages.write_failures.count
        if failures:
            return f"writing messages fails ({failures} failed attempt(s) since the last success)"
        return None

    async def _load(self) -> None:
        state = self.state
        store = state.store
        await self.users.load(create_root=self._create_root)
        self.tokens.load()
        for row in store.load_streams():
            state.streams[row.id] = Stream(row.id, row.name, row.created_at)
        for row in store.load_topics():
            state.streams[row.stream_id].topics[row.id] = Topic(
                row.stream_id, row.id, row.name, row.created_at, row.compression_algorithm,
                row.message_expiry, row.max_topic_size, row.replication_factor, row.record_format,
            )
        for row in store.load_partitions():
            topic = state.streams[row.stream_id].topics[row.topic_id]
            topic.partitions[row.id] = state.open_partition(topic, row.id, row.created_at)
        for position in store.load_positions():
            stream = state.streams.get(position.stream_id)
            topic = stream.topics.get(position.topic_id) if stream else None
            partition = topic.partitions.get(position.partition_id) if topic else None
            if partition is not None:
                partition.positions[position.consumer] = position.next_offset
                if position.note is not None:
                    partition.position_notes[position.consumer] = position.note
                if position.leader_epoch is not None:
                    partition.position_epochs[position.consumer] = position.leader_epoch
        self.consumer_groups.load()

    async def stop(self) -> None:
        self.running = False
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._tasks.clear()
        state = self.state
        await state.settle_catalogue()  # a topic half made in a worker thread is finished first
        started = time.monotonic()
        logs = 0
        for stream in state.streams.values():
            for topic in stream.topics.values():
                for partition in topic.partitions.values():
                    partition.log.close()
                    logs += 1
        await state.durability.stop()
        self.transactions.close()
        state.store.close()
        state.paths.clean_shutdown_marker.touch()
        self._lock.release()
        synced = "synced and " if state.durability.policy is not FsyncPolicy.NEVER else ""
        log.info("stopped cleanly in %.1f s: %d partition logs %sclosed, the metadata store and "
                 "the transaction journal closed", time.monotonic() - started, logs, synced)

    def spawn(self, coroutine: Awaitable[None]) -> None:
        self._tasks.append(asyncio.ensure_future(coroutine))


async def _checkpoint_metadata(state: CoreState, interval_seconds: float) -> None:
    """Under ``fsync = interval`` the metadata store syncs only at checkpoints: one every
    interval bounds what a power loss can take to the last interval, as for the logs."""
    while True:
        await asyncio.sleep(interval_seconds)
        try:
            await asyncio.to_thread(state.store.checkpoint)
        except Exception:  # noqa: BLE001 - keep checkpointing; the next pass retries
            log.exception("metadata checkpoint failed")
