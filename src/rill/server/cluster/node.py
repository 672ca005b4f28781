"""A rill node in a cluster: membership, the catalog and partition states applied from etcd,
the controller's election, and each partition's replica (``shared/spec/cluster-design.md``).

Owns: ``ClusterNode``, the core's ``ClusterView`` (``core.cluster_view``) and the answer to
peer requests (``serve_peer``). Its life:

1. ``attach`` (before any listener starts): the core's catalog becomes a ``ClusterCatalog``,
   and every partition is offline (no leader) until etcd's state is applied, so nothing is
   served on a stale belief.
2. ``start`` (the listeners are bound, their addresses known): a member lease (kept alive with
   a local deadline), the member key ``members/<id>`` under it (its create_revision: the member
   epoch), the cluster's peer secret and HTTP token signing secret, then everything under ``/rill/<name>/`` read at one
   revision R and applied (streams and topics created or deleted locally to match, partition
   states), then a watch from R + 1 applying every change in order, and a campaign for the
   controller's election (``Controller`` while it leads).
3. Per partition state applied: the leader (``LeaderReplica``) takes appends at its epoch and
   moves the high watermark as followers fetch; a follower (``Follower``) truncates and copies;
   a node outside the replicas only knows who leads.
4. A leader checks its followers every ``ISR_CHECK`` seconds: one behind for
   ``replica_lag_max`` leaves the ISR, one caught up returns (compare-and-swap on the
   partition's mod_revision: a deposed leader changes nothing).

Iggy consumer groups' members (``group_members.ClusterGroupRoster``: this node's clients'
memberships under its member lease, every node's applied from the watch) and HTTP access
token revocations (``revoked/<id>``) are applied from the same watch.

The data path never calls etcd: appends, fetches and the high watermark are local and peer
traffic. With etcd unreachable, partitions keep their leaders and ISR; catalog changes fail
with ``ClusterUnavailable``; the watch resumes where it stopped when etcd returns. Past its
lease's local deadline a node is not sure of its leaderships (``leadership_certain``: it
tells no client that a position is out of range). Clients are told of the members and, for
``LISTED_AFTER_LEAVING`` seconds, of a node that left them (``listed_nodes``). A request
forwarded to a leader (``forward``) is answered as lost as soon as that leader leaves the
members.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from rill import errors
from rill.protocol.peer import codec
from rill.protocol.peer.codec import Message
from rill.server.cluster.catalog import ClusterCatalog, user_row
from rill.server.cluster.controller import Controller
from rill.server.cluster.coordinator import (
    Compare,
    Coordinator,
    CoordinatorError,
    CoordinatorUnavailable,
    Get,
    KeyValue,
    NoLeader,
    Put,
    WatchBatch,
)
from rill.server.cluster.election import Election
from rill.server.cluster.group_members import ClusterGroupRoster
from rill.server.cluster.keys import ClusterKeys
from rill.server.cluster.leases import LeaseKeeper
from rill.server.cluster.partition_state import PartitionState, expand, shrink
from rill.server.cluster.peer_link import (
    PeerAnswerLost,
    PeerLink,
    PeerLinks,
    PeerRefused,
    PeerUnavailable,
    proof,
)
from rill.server.cluster.replication import Follower, LeaderReplica, answer_fetch
from rill.server.cluster.watch import ResumingWatch, Resync
from rill.server.core.catalog import (
    ConsumerGroupRow,
    GroupCreated,
    GroupDeleted,
    PartitionRow,
    PartitionsCreated,
    PersonalAccessTokenRow,
    PositionRow,
    PositionStored,
    StreamCreated,
    StreamDeleted,
    StreamRow,
    TopicCreated,
    TopicDeleted,
    TopicRow,
    UserCreated,
    UserDeleted,
)
from rill.server.core.cluster_view import UNPLACED, NodeInfo, Placement
from rill.server.core.model import FOLLOWER, LEADER, Partition
from rill.server.core.tokens import TokenDeleted, TokenStored

if TYPE_CHECKING:
    from rill.server.config import ClusterConfig
    from rill.server.core.core import Core

log = logging.getLogger(__name__)

ISR_CHECK = 0.5  # seconds between a leader's looks at its followers
HW_CHECKPOINT_ROUNDS = 10  # high watermarks are stored every 10 looks (5 s)
MAX_LEASE_TTL = 9_000_000_000  # etcd's MaxLeaseTTL (seconds)
LEADERS_CATCH_UP = 10.0  # seconds a purge waits for the partitions' leaders to apply it
FORWARD_TIMEOUT = 35.0  # seconds a request forwarded to a live member waits for its answer
LISTED_AFTER_LEAVING = 30.0  # seconds a node that left the members is still listed to clients


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


class ClusterNode:
    def __init__(self, settings: ClusterConfig, core: Core, coordinator: Coordinator) -> None:
        self.settings = settings
        self.core = core
        self.coordinator = coordinator
        self.keys = ClusterKeys(settings.name)
        self._node_id = settings.node_id
        self.members: dict[int, NodeInfo] = {}
        self.member_epochs: dict[int, int] = {}
        self._departures: dict[int, asyncio.Event] = {}  # node id -> set when it leaves (forward)
        self._left: dict[int, tuple[NodeInfo, float]] = {}  # node id -> (its info, when it left)
        self.partition_states: dict[tuple[int, int, int], PartitionState] = {}
        self.id_blocks: dict[str, int] = {}
        self.controller_node: int | None = None
        self.controller: Controller | None = None
        self.member_epoch = 0
        self.secret = b""
        self.links = PeerLinks(self._node_id)
        self.leaders: dict[tuple[int, int, int], LeaderReplica] = {}
        self._led_logs: dict[Any, LeaderReplica] = {}  # a led partition's log -> its leader
        self.followers: dict[tuple[int, int, int], Follower] = {}
        self.applied_revision = 0
        self._applied = asyncio.Condition()
        self._own_proposals: set[str] = set()
        self.own_deletions: set[bytes] = set()  # keys this node's own changes delete
        self._tasks: list[asyncio.Task[Any]] = []
        self._background: set[asyncio.Future[None]] = set()
        self._elect = asyncio.Event()
        self.lease: LeaseKeeper | None = None
        self.counters = {"isr_shrinks": 0, "isr_expands": 0, "leader_elections": 0,
                         "fenced_requests": 0, "replicas_emptied": 0}
        # (stream, topic, revision) of the purge whose stored positions this node dropped last
        self._positions_purged: tuple[int, int, int] | None = None
        self.catalog = ClusterCatalog(core.state.store, self)
        self.roster = ClusterGroupRoster(self)  # Iggy groups' members on every node
        self.listeners: dict[str, tuple[str, int]] = {}

    # -- ClusterView ---------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def controller_id(self) -> int | None:
        return self.controller_node

    def nodes(self) -> list[NodeInfo]:
        return [self.members[key] for key in sorted(self.members)]

    def node(self, node_id: int) -> NodeInfo | None:
        return self.members.get(node_id)

    def leadership_certain(self) -> bool:
        return self.lease is not None and self.lease.valid

    def listed_nodes(self) -> list[NodeInfo]:
        now = self.coordinator.clock()
        for node_id, (_, left_at) in list(self._left.items()):
            if now - left_at >= LISTED_AFTER_LEAVING:
                del self._left[node_id]
        listed = {**{node_id: info for node_id, (info, _) in self._left.items()}, **self.members}
        return [listed[key] for key in sorted(listed)]

    async def replicated(self, partition: Partition, last_offset: int, timeout: float) -> None:
        """The acks=all wait, after the records were appended here. This node may have stopped
        leading while the append awaited (a worker thread's write, an fsync): that is
        ``LeaderSteppedDown`` too, an unknown outcome, never a refusal before writing."""
        leader = self.leaders.get((partition.stream_id, partition.topic_id, partition.id))
        if leader is None or leader.partition is not partition:
            placement = partition.placement
            raise errors.LeaderSteppedDown(self._node_id, partition.id,
                                           placement.leader if placement is not None else None)
        await leader.replicated(last_offset, timeout)

    def _departed(self, node_id: int) -> None:
        """Node ``node_id`` left the members (or came back as a new member): the requests
        forwarded to it and not answered yet are answered now, as lost."""
        departed = self._departures.pop(node_id, None)
        if departed is not None:
            departed.set()

    async def forward(self, node_id: int, protocol: str, user_id: int, request: bytes) -> bytes:
        node = self.members.get(node_id)
        address = node.address("peer") if node is not None else None
        if address is None:
            raise errors.LeaderNotAvailable(reason=f"node {node_id} is not a live member")
        departed = self._departures.setdefault(node_id, asyncio.Event())
        asking = asyncio.ensure_future(self.links.request(
            *address, codec.FORWARD, {"protocol": protocol, "user_id": user_id}, request,
            timeout=FORWARD_TIMEOUT))
        leaving = asyncio.ensure_future(departed.wait())
        try:
            await asyncio.wait((asking, leaving), return_when=asyncio.FIRST_COMPLETED)
        finally:
            leaving.cancel()
            asking.cancel()  # (a no-op once it is done)
        if not asking.done() or asking.cancelled():
            # a leader cut off or paused stops being a member within its lease; its answer
            # would come only when it is back, long after another node took over
            raise errors.LeaderAnswerLost(node_id, "it left the cluster before answering")
        try:
            answer = asking.result()
        except PeerAnswerLost as error:  # sent: the leader may have applied it
            raise errors.LeaderAnswerLost(node_id, error) from None
        except PeerUnavailable as error:
            raise errors.LeaderNotAvailable(reason=f"node {node_id}: {error}") from None
        except PeerRefused as refusal:
            raise errors.LeaderNotAvailable(reason=f"node {node_id}: {refusal}") from None
        return bytes(answer.body)

    def status(self) -> dict[str, Any]:
        partitions = []
        model = self.core.state.streams
        for key, state in sorted(self.partition_states.items()):
            stream = model.get(key[0])
            topic = stream.topics.get(key[1]) if stream is not None else None
            partition = topic.partitions.get(key[2]) if topic is not None else None
            entry: dict[str, Any] = {
                "stream_id": key[0], "topic_id": key[1], "partition_id": key[2],
                "stream": stream.name if stream else None, "topic": topic.name if topic else None,
                "leader": state.leader, "leader_epoch": state.leader_epoch,
                "replicas": list(state.replicas), "isr": list(state.isr),
                "offline": [n for n in state.replicas if n not in self.members]}
            if partition is not None:
                entry.update(role=partition.role, high_watermark=partition.high_watermark,
                             log_end=partition.log.next_offset)
            leader = self.leaders.get(key)
            if leader is not None:
                entry["followers"] = leader.lag()
            partitions.append(entry)
        counters = dict(self.counters)
        counters["leader_elections"] += self.controller.elections if self.controller else 0
        counters["under_replicated_partitions"] = sum(
            1 for key, state in self.partition_states.items()
            if key in self.leaders and len(state.isr) < len(state.replicas))
        return {"name": self.name, "node_id": self._node_id,
                "controller_id": self.controller_node,
                "members": [{"node_id": node.node_id,
                             "member_epoch": self.member_epochs.get(node.node_id, 0),
                             "listeners": {k: f"{h}:{p}" for k, (h, p) in node.listeners.items()}}
                            for node in self.nodes()],
                "partitions": partitions, "counters": counters}

    # -- start and stop ------------------------------------------------------------------------

    def attach(self) -> None:
        """Before the listeners start: the cluster catalog, every partition offline."""
        core = self.core
        core.state.store = self.catalog  # type: ignore[assignment]
        core.cluster = self
        self.catalog.follow(core.apply)
        core.consumer_groups.membership.share(self.roster)
        if core.access_tokens is not None:  # HTTP's tokens wait for the cluster's secret
            core.access_tokens.await_secret()
            core.access_tokens.share_revocations(self._publish_revocation)
        core.append_hooks.append(self._appended)
        for stream in core.state.streams.values():
            for topic in stream.topics.values():
                for partition in topic.partitions.values():
                    partition.placement = UNPLACED
                    partition.role = FOLLOWER

    async def start(self, listeners: dict[str, tuple[str, int]]) -> None:
        """Join: lease, member key, secret, state at R, watch from R + 1, campaign."""
        self.listeners = listeners
        self.secret = await self._secret()
        self.links.secret = self.secret
        if self.core.access_tokens is not None:
            self.core.access_tokens.use_secret(await self._jwt_secret())
        await self._register()
        snapshot = await self.coordinator.range(self.keys.root, prefix=True)
        await self._apply_snapshot(snapshot.kvs, snapshot.revision)
        self._tasks = [asyncio.create_task(self._watch(snapshot.revision + 1), name="cluster watch"),
                       asyncio.create_task(self._campaign(), name="cluster campaign"),
                       asyncio.create_task(self._check_isr(), name="cluster isr"),
                       asyncio.create_task(self._lease_lost(), name="cluster lease")]
        for _ in range(40):  # the start line names the controller: give the observer 2 s
            if self.controller_node is not None:
                break
            await asyncio.sleep(0.05)
        log.info("cluster %r: node %d joined (member epoch %d) with %d members",
                 self.name, self._node_id, self.member_epoch, len(self.members))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        for follower in list(self.followers.values()):
            await follower.stop()
        self.followers.clear()
        for leader in self.leaders.values():
            leader.step_down(None)
        self.checkpoint_high_watermarks()
        if self.lease is not None:
            await self.lease.stop(revoke=True)
        await self.links.close()
        await self.coordinator.close()

    async def _register(self) -> None:
        """A member lease and the member key under it (its revision: the member epoch)."""
        self.lease = LeaseKeeper(self.coordinator, max(1, round(self.settings.member_lease_ttl)),
                                 outlive_deadline=True)
        await self.lease.start()
        value = json.dumps({"node_id": self._node_id, "listeners": {
            name: f"{host}:{port}" for name, (host, port) in self.listeners.items()}}).encode()
        key = self.keys.member(self._node_id)
        result = await self.coordinator.txn([Compare.missing(key)],
                                            [Put(key, value, self.lease.lease)], [Get(key)])
        if not result.succeeded:
            await self.lease.stop(revoke=True)
            raise errors.ClusterUnavailable(reason=f"node id {self._node_id} is live elsewhere")
        self.member_epoch = result.revision

    async def _secret(self) -> bytes:
        made = secrets.token_hex(32).encode()
        result = await self.coordinator.txn([Compare.missing(self.keys.secret)],
                                            [Put(self.keys.secret, made)], [Get(self.keys.secret)])
        if result.succeeded:
            return made
        kvs = result.results[0]
        assert isinstance(kvs, tuple) and kvs
        return kvs[0].value

    async def _jwt_secret(self) -> bytes:
        """The cluster's HTTP token signing secret (``jwt-secret``): made by the first node
        that needs one (64 random bytes, as a standalone server's), then read by every node,
        so a token one node issued verifies on the others."""
        made = secrets.token_hex(64).encode()
        key = self.keys.jwt_secret
        result = await self.coordinator.txn([Compare.missing(key)], [Put(key, made)], [Get(key)])
        if result.succeeded:
            return bytes.fromhex(made.decode())
        kvs = result.results[0]
        assert isinstance(kvs, tuple) and kvs
        return bytes.fromhex(kvs[0].value.decode())

    def _publish_revocation(self, token_id: str, expiry: int) -> None:
        """An HTTP access token revoked here, put in etcd (``revoked/<id>``) for the other
        nodes, under a lease that ends once the token would have expired anyway (in the
        background: the revocation holds here at once)."""
        skew = int(self.core.config.http.jwt.clock_skew)
        ttl = max(1, min(expiry - int(time.time()) + skew + 1, MAX_LEASE_TTL))

        async def publish() -> None:
            try:
                grant = await self.coordinator.grant_lease(ttl)
                await self.coordinator.put(self.keys.revocation(token_id), str(expiry).encode(),
                                           grant.id)
            except CoordinatorError as error:
                log.warning("access token %s revoked on node %d only (etcd: %s)", token_id,
                            self._node_id, error)
        task = asyncio.ensure_future(publish())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def peer_proof(self, node_id: int) -> str | None:
        return proof(self.secret, node_id) if self.secret else None

    async def _lease_lost(self) -> None:
        """etcd ended this node's member lease (a pause or an isolation longer than its TTL):
        the controller has moved its partitions. It stops leading, then joins again as a new
        member (a new member epoch: back in the ISR only once caught up)."""
        while True:
            assert self.lease is not None
            await self.lease.lost.wait()
            log.error("cluster %r: node %d lost its member lease (%s): it stops leading and "
                      "joins again", self.name, self._node_id, self.lease.lost_reason)
            for key in list(self.leaders):
                self._stop_leading(key, None)
            while True:
                try:
                    await self._register()
                    break
                except (CoordinatorError, errors.RillError) as error:
                    log.warning("cluster %r: joining again: %s; retrying", self.name, error)
                    await asyncio.sleep(1.0)
            log.info("cluster %r: node %d joined again (member epoch %d)", self.name,
                     self._node_id, self.member_epoch)
            await self.roster.rejoin()
            self._elect.set()

    # -- applying etcd's state -----------------------------------------------------------------

    async def _apply_snapshot(self, kvs: tuple[KeyValue, ...], revision: int) -> None:
        streams: dict[int, dict[str, Any]] = {}
        topics: dict[tuple[int, int], dict[str, Any]] = {}
        others: list[KeyValue] = []
        members: list[KeyValue] = []
        claims: list[KeyValue] = []
        for kv in kvs:
            if kv.key.startswith(self.keys.group_members):
                members.append(kv)
            elif kv.key.startswith(self.keys.group_claims):
                claims.append(kv)
            elif kv.key.startswith(self.keys.streams):
                streams[int(kv.key[len(self.keys.streams):])] = json.loads(kv.value)
            elif kv.key.startswith(self.keys.topics):
                topics[ClusterKeys.numbers(kv.key, self.keys.topics)] = json.loads(kv.value)  # type: ignore[index]
            else:
                others.append(kv)
        model = self.core.state.streams
        # deleted while this node was away, or deleted and made again under the same id (its
        # row's creation time differs): another stream or topic, whose replicas must not be
        # taken for the old one's (the new one is made below, empty)
        for stream in list(model.values()):
            held = streams.get(stream.id)
            if held is None or held["row"]["created_at"] != stream.created_at:
                await self.catalog.apply_elsewhere(StreamDeleted(stream.id))
                continue
            for topic in list(stream.topics.values()):
                held = topics.get((stream.id, topic.id))
                if held is None or held["row"]["created_at"] != topic.created_at:
                    await self.catalog.apply_elsewhere(TopicDeleted(stream.id, topic.id))
        for stream_id in sorted(streams):
            await self._stream_put(streams[stream_id], own=False)
        for key in sorted(topics):
            await self._topic_put(topics[key], own=False)
        # partition states before stored positions: a replica emptied for a purge done while
        # this node was away loses its positions, then takes those stored since
        others.sort(key=lambda kv: not kv.key.startswith(self.keys.partitions))
        for kv in others:
            await self._apply_put(kv, snapshot=True)
        await self._forget_missing(others)
        self.roster.load_claims(claims)
        self.roster.load(members)
        self._set_applied(revision)
        self._elect.set()

    async def _forget_missing(self, kvs: list[KeyValue]) -> None:
        """Groups and tokens this node holds that etcd does not (deleted while it was away)."""
        keys = self.keys
        held = {kv.key for kv in kvs}
        groups = self.core.consumer_groups
        for (stream_id, topic_id), of_topic in list(groups.topics.items()):
            for group in list(of_topic.values()):
                if keys.group(stream_id, topic_id, group.id) not in held:
                    await self.catalog.apply_elsewhere(
                        GroupDeleted(stream_id, topic_id, group.id, group.key))
        for row in self.catalog.local.load_personal_access_tokens():
            if keys.token(row.user_id, row.name) not in held:
                await self.catalog.apply_elsewhere(TokenDeleted(row.user_id, row.name))

    async def _watch(self, start: int) -> None:
        while True:
            try:
                async for item in ResumingWatch(self.coordinator, self.keys.root, start):
                    if isinstance(item, Resync):
                        await self._apply_snapshot(item.kvs, item.revision)
                        start = item.revision + 1
                        continue
                    await self._apply_batch(item)
                    start = item.revision + 1 if item.events else start
            except asyncio.CancelledError:
                raise
            except (CoordinatorUnavailable, NoLeader) as error:
                log.warning("cluster watch: etcd unavailable (%s); retrying", error)
                await asyncio.sleep(1.0)
            except Exception:
                log.exception("cluster watch failed; resuming from revision %d", start)
                await asyncio.sleep(0.5)

    async def _apply_batch(self, batch: WatchBatch) -> None:
        if not batch.events:
            return
        # in revision order (a batch may span many: a watch resumed after a break); within one
        # revision (one transaction), a stream before its topics before their partitions
        order = {self.keys.streams: 0, self.keys.topics: 1}

        def place(event: Any) -> tuple[int, int]:
            if event.type != "put":
                return event.kv.mod_revision, 3
            return event.kv.mod_revision, next(
                (rank for prefix, rank in order.items() if event.kv.key.startswith(prefix)), 2)

        events = sorted(batch.events, key=place)
        for event in events:
            kv = event.kv
            if event.type == "delete":
                await self._apply_delete(kv)
            elif kv.key.startswith(self.keys.streams):
                await self._stream_put(json.loads(kv.value), own=True)
            elif kv.key.startswith(self.keys.topics):
                await self._topic_put(json.loads(kv.value), own=True)
            else:
                await self._apply_put(kv)
        self._set_applied(batch.revision)

    def _set_applied(self, revision: int) -> None:
        self.applied_revision = max(self.applied_revision, revision)

        async def notify() -> None:
            async with self._applied:
                self._applied.notify_all()
        asyncio.ensure_future(notify())

    async def applied(self, revision: int, timeout: float = 10.0) -> None:
        """Until this node's watch applied ``revision``."""
        async def until() -> None:
            async with self._applied:
                await self._applied.wait_for(lambda: self.applied_revision >= revision)
        try:
            async with asyncio.timeout(timeout):
                await until()
        except TimeoutError:
            raise errors.ClusterUnavailable(reason=(
                f"etcd confirmed the change at revision {revision} but this node's watch has "
                f"not delivered it in {timeout} s")) from None

    async def _stream_put(self, value: dict[str, Any], own: bool) -> None:
        if own and value.get("proposal") in self._own_proposals:
            return  # this node's own change: its catalog writes it (``ClusterCatalog``)
        row = StreamRow(**value["row"])
        if row.id not in self.core.state.streams:
            await self.catalog.apply_elsewhere(StreamCreated(row))

    async def _topic_put(self, value: dict[str, Any], own: bool) -> None:
        row = TopicRow(**value["row"])
        partitions = tuple(PartitionRow(**p) for p in value["partitions"])
        if own and value.get("proposal") in self._own_proposals:
            return
        stream = self.core.state.streams.get(row.stream_id)
        if stream is None:
            return
        topic = stream.topics.get(row.id)
        if topic is None:
            await self.catalog.apply_elsewhere(TopicCreated(row, partitions))
            self.place_topic(row.stream_id, row.id)
        elif len(topic.partitions) < len(partitions):  # partitions added elsewhere
            new = tuple(p for p in partitions if p.id not in topic.partitions)
            await self.catalog.apply_elsewhere(PartitionsCreated(new))
            self.place_topic(row.stream_id, row.id)

    async def _apply_put(self, kv: KeyValue, snapshot: bool = False) -> None:
        keys = self.keys
        if kv.key.startswith(keys.members):
            node_id = int(kv.key[len(keys.members):])
            try:
                listeners = {name: _address(text)
                             for name, text in json.loads(kv.value)["listeners"].items()}
            except (ValueError, KeyError, TypeError, AttributeError):
                log.warning("member key %s holds no listeners (%r): not a rill node's",
                            kv.key.decode(errors="replace"), kv.value[:200])
                listeners = {}
            self.members[node_id] = NodeInfo(node_id, listeners)
            self._left.pop(node_id, None)
            if self.member_epochs.get(node_id, kv.create_revision) != kv.create_revision:
                self._departed(node_id)  # it left and joined again: what it was sent is lost
            self.member_epochs[node_id] = kv.create_revision
            self._refresh_offline()
            self._elect.set()
        elif kv.key.startswith(keys.partitions):
            key = ClusterKeys.numbers(kv.key, keys.partitions)
            state = PartitionState.from_json(kv.value, kv.mod_revision, kv.create_revision)
            self.partition_states[key] = state  # type: ignore[index]
            await self._empty_earlier_incarnation(key, state)  # type: ignore[arg-type]
            self._place(key, state)  # type: ignore[arg-type]
            self._elect.set()
        elif kv.key.startswith(keys.controller):
            self._elect.set()
        elif kv.key.startswith(keys.users):
            value = json.loads(kv.value)
            if snapshot or value.get("proposal") not in self._own_proposals:
                await self.catalog.apply_elsewhere(UserCreated(user_row(value["row"])))
        elif kv.key.startswith(keys.offsets):
            value = json.loads(kv.value)
            # (this node applied its own, unless it starts: it may have stopped in between)
            if value.pop("origin", None) != self._node_id or snapshot:
                await self.catalog.apply_elsewhere(PositionStored(PositionRow(**value)))
        elif kv.key.startswith(keys.ids):
            self.id_blocks[kv.key[len(keys.ids):].decode()] = int(kv.value)
        elif kv.key.startswith(keys.group_members):
            self.roster.apply_put(kv)
        elif kv.key.startswith(keys.group_claims):
            self.roster.apply_claim_put(kv)
        elif kv.key.startswith(keys.revoked):
            if self.core.access_tokens is not None:
                self.core.access_tokens.apply_revoked(
                    unquote(kv.key[len(keys.revoked):].decode()), int(kv.value))
        elif kv.key.startswith(keys.groups):
            value = json.loads(kv.value)
            if snapshot or value.get("proposal") not in self._own_proposals:
                await self.catalog.apply_elsewhere(GroupCreated(ConsumerGroupRow(**value["row"])))
        elif kv.key.startswith(keys.tokens):
            value = json.loads(kv.value)
            if snapshot or value.get("proposal") not in self._own_proposals:
                await self.catalog.apply_elsewhere(
                    TokenStored(PersonalAccessTokenRow(**value["row"])))

    async def _apply_delete(self, kv: KeyValue) -> None:
        keys = self.keys
        if kv.key.startswith(keys.members):
            node_id = int(kv.key[len(keys.members):])
            info = self.members.pop(node_id, None)
            if info is not None:
                self._left[node_id] = (info, self.coordinator.clock())
            self.member_epochs.pop(node_id, None)
            self._departed(node_id)
            self._refresh_offline()
            self._elect.set()
        elif kv.key.startswith(keys.partitions):
            key = ClusterKeys.numbers(kv.key, keys.partitions)
            self.partition_states.pop(key, None)  # type: ignore[arg-type]
            self._stop_following(key)  # type: ignore[arg-type]
            self._stop_leading(key, None)  # type: ignore[arg-type]
        elif kv.key.startswith(keys.topics):
            stream_id, topic_id = ClusterKeys.numbers(kv.key, keys.topics)
            if self.core.state.streams.get(stream_id) is not None and \
                    self.core.state.streams[stream_id].topics.get(topic_id) is not None:
                await self.catalog.apply_elsewhere(TopicDeleted(stream_id, topic_id))
        elif kv.key.startswith(keys.streams):
            stream_id = int(kv.key[len(keys.streams):])
            if stream_id in self.core.state.streams:
                await self.catalog.apply_elsewhere(StreamDeleted(stream_id))
        elif kv.key.startswith(keys.users):
            if kv.key in self.own_deletions:
                self.own_deletions.discard(kv.key)
                return
            await self.catalog.apply_elsewhere(UserDeleted(int(kv.key[len(keys.users):])))
        elif kv.key.startswith(keys.controller):
            self._elect.set()
        elif kv.key.startswith(keys.group_members):
            self.roster.apply_delete(kv)
        elif kv.key.startswith(keys.group_claims):
            self.roster.apply_claim_delete(kv)
        elif kv.key.startswith(keys.groups) or kv.key.startswith(keys.tokens):
            if kv.key in self.own_deletions:
                self.own_deletions.discard(kv.key)
                return
            if kv.key.startswith(keys.groups):
                stream_id, topic_id, group_id = ClusterKeys.numbers(kv.key, keys.groups)
                position_name = self.core.consumer_groups.membership.position_name(group_id)
                await self.catalog.apply_elsewhere(
                    GroupDeleted(stream_id, topic_id, group_id, position_name))
            else:
                user_id, _, name = kv.key[len(keys.tokens):].partition(b"/")
                await self.catalog.apply_elsewhere(
                    TokenDeleted(int(user_id), unquote(name.decode())))

    def _refresh_offline(self) -> None:
        for key, state in self.partition_states.items():
            partition = self._partition(key)
            if partition is not None and partition.placement is not None:
                partition.placement = self._placement(state)

    def _appended(self, log_: Any) -> None:
        """An append on this node: a leader whose ISR is itself alone commits it at once."""
        leader = self._led_logs.get(log_)
        if leader is not None and len(leader.state.isr) <= 1:
            leader.advance()

    async def leaders_caught_up(self, stream_id: int, topic_id: int | None,
                                timeout: float = LEADERS_CATCH_UP) -> None:
        """After a purge this node applied: wait until the leader of every partition of the
        topic (``topic_id`` None: of the stream) leads the incarnation this node knows, so
        that a write sent once the purge has returned never lands in the emptied one. A leader
        that answers its incarnation's EPOCH_END has emptied its log (a partition with no
        leader takes no write). ``ClusterUnavailable`` when one has not within ``timeout``
        seconds."""
        deadline = time.monotonic() + timeout
        pending = [key for key in self.partition_states
                   if key[0] == stream_id and (topic_id is None or key[1] == topic_id)]
        while True:
            led = await asyncio.gather(*(self._leads_incarnation(key) for key in pending))
            pending = [key for key, done in zip(pending, led) if not done]
            if not pending:
                return
            if time.monotonic() > deadline:
                key = pending[0]
                raise errors.ClusterUnavailable(reason=(
                    f"the purge is done in etcd, but the leader of partition "
                    f"{'/'.join(map(str, key))} has not emptied its log within {timeout:g} s: "
                    f"writes it acknowledges meanwhile go with it"))
            await asyncio.sleep(0.02)

    async def _leads_incarnation(self, key: tuple[int, int, int]) -> bool:
        """Whether the partition's leader (as this node knows it) leads the incarnation this
        node knows (True with no leader: nothing is written there)."""
        state = self.partition_states.get(key)
        if state is None or state.leader is None:
            return True
        if state.leader == self._node_id:
            leader = self.leaders.get(key)
            return leader is not None and leader.state.incarnation == state.incarnation
        node = self.members.get(state.leader)  # type: ignore[arg-type]
        address = node.address("peer") if node is not None else None
        if address is None:
            return False
        try:
            await self.links.request(*address, codec.EPOCH_END, {
                "stream_id": key[0], "topic_id": key[1], "partition_id": key[2],
                "incarnation": state.incarnation, "leader_epoch": state.leader_epoch,
                "epoch": state.leader_epoch}, timeout=2.0)
        except (PeerRefused, PeerUnavailable, PeerAnswerLost):
            return False
        return True

    # -- placing partitions --------------------------------------------------------------------

    async def _empty_earlier_incarnation(self, key: tuple[int, int, int],
                                         state: PartitionState) -> None:
        """A replica of an earlier incarnation of the partition (purged since, maybe while this
        node was away) is emptied before it serves or copies this one: its roles end (an
        acks=all write still waiting is an unknown outcome), its log starts again at offset 0,
        its high watermark and consumer positions are gone, and the incarnation is stored with
        it (a log without one holds the partition's first)."""
        partition = self._partition(key)
        if partition is None:
            return  # (a partition made later starts empty)
        log_ = partition.log
        held = log_.incarnation or state.created
        if held >= state.incarnation:
            return
        self._stop_following(key)
        self._stop_leading(key, state.leader)
        partition.purge()  # (after the append in flight, if any)
        log_.store_incarnation(state.incarnation)
        self.core.state.space_freed()
        self.counters["replicas_emptied"] += 1
        log.info("partition %s: emptied for its incarnation %d (it held %d)",
                 "/".join(map(str, key)), state.incarnation, held)
        # the topic's stored positions, once per purge transaction (its partitions' new
        # states, up to 60 of them, share its revision and are applied one after the other)
        purge = (key[0], key[1], state.revision)
        if purge != self._positions_purged:
            self._positions_purged = purge
            await self.catalog.local.purge_topic(key[0], key[1])

    def _partition(self, key: tuple[int, int, int]) -> Partition | None:
        stream = self.core.state.streams.get(key[0])
        topic = stream.topics.get(key[1]) if stream is not None else None
        return topic.partitions.get(key[2]) if topic is not None else None

    def _placement(self, state: PartitionState) -> Placement:
        return Placement(state.leader, state.leader_epoch, state.replicas, state.isr,
                         state.min_isr,
                         tuple(node for node in state.replicas if node not in self.members))

    def place_later(self, stream_id: int, topic_id: int) -> None:
        """Place a topic's partitions once its creation here has put them in the model."""
        asyncio.get_running_loop().call_soon(self.place_topic, stream_id, topic_id)

    def place_topic(self, stream_id: int, topic_id: int) -> None:
        for key, state in list(self.partition_states.items()):
            if key[0] == stream_id and key[1] == topic_id:
                self._place(key, state)

    def _place(self, key: tuple[int, int, int], state: PartitionState) -> None:
        partition = self._partition(key)
        if partition is None:
            return  # placed when the topic reaches the model
        partition.placement = self._placement(state)
        me = self._node_id
        leader = self.leaders.get(key)
        if state.leader == me and leader is not None and leader.epoch == state.leader_epoch \
                and leader.partition is partition:
            leader.update(state)  # (an ISR change)
        elif state.leader == me and state.revision > self.member_epoch and (
                self.lease is None or self.lease.valid):
            self._start_leading(key, partition, state)
        else:
            if leader is not None:
                self._stop_leading(key, state.leader)
            partition.role = FOLLOWER
            if me in state.replicas and state.leader not in (None, me):
                follower = self.followers.get(key)
                if follower is None or follower.leader_id != state.leader or \
                        follower.leader_epoch != state.leader_epoch or \
                        follower.incarnation != state.incarnation or \
                        follower.partition is not partition:
                    self._stop_following(key)
                    self._start_following(key, partition, state)
            else:
                self._stop_following(key)

    def _start_leading(self, key: tuple[int, int, int], partition: Partition,
                       state: PartitionState) -> None:
        self._stop_following(key)
        log_ = partition.log
        if state.leader_epoch > log_.leader_epoch:
            log_.leader_epoch = state.leader_epoch
        if not partition.high_watermark_known:
            stored = log_.stored_high_watermark
            partition.high_watermark = stored if stored is not None else (
                log_.next_offset if state.leader_epoch == 1 else 0)
        old = self.leaders.pop(key, None)
        if old is not None:
            old.step_down(None)
        leader = self.leaders[key] = LeaderReplica(partition, state, self._node_id,
                                                   lambda p: self.core.appends.appended(p.log))
        self._led_logs[log_] = leader
        partition.role = LEADER
        log.info("partition %s: this node leads at epoch %d (log end %d, HW %d)",
                 "/".join(map(str, key)), state.leader_epoch, log_.next_offset,
                 partition.high_watermark)
        self.leaders[key].advance()

    def _stop_leading(self, key: tuple[int, int, int], leader: int | None) -> None:
        old = self.leaders.pop(key, None)
        if old is not None:
            self._led_logs.pop(old.partition.log, None)
            self.counters["fenced_requests"] += old.step_down(leader)
            old.partition.role = FOLLOWER
            partition = old.partition
            with contextlib.suppress(Exception):
                partition.log.store_high_watermark(partition.high_watermark)

    def _start_following(self, key: tuple[int, int, int], partition: Partition,
                         state: PartitionState) -> None:
        assert state.leader is not None
        leader_id = state.leader

        async def link() -> PeerLink:
            node = self.members.get(leader_id)
            address = node.address("peer") if node is not None else None
            if address is None:
                raise PeerUnavailable(f"node {leader_id} is not a live member")
            fresh = PeerLink(*address, self._node_id, self.secret)
            await fresh.open()
            return fresh

        follower = Follower(partition, leader_id, state.leader_epoch, state.incarnation, link,
                            self._node_id, lambda: self.member_epoch, self._elect.set)
        self.followers[key] = follower
        follower.start()

    def _stop_following(self, key: tuple[int, int, int]) -> None:
        follower = self.followers.pop(key, None)
        if follower is not None:
            follower.stop_soon()

    # -- the controller ------------------------------------------------------------------------

    async def _campaign(self) -> None:
        assert self.lease is not None
        election = Election(self.coordinator, self.keys.controller)
        observer = asyncio.create_task(self._observe(election))
        try:
            while True:
                if not self.lease.valid:
                    await asyncio.sleep(0.2)
                    continue
                try:
                    leadership = await election.campaign(self.lease.lease,
                                                         str(self._node_id).encode())
                except CoordinatorError as error:
                    log.warning("controller campaign: %s; retrying", error)
                    await asyncio.sleep(1.0)
                    continue
                self.controller = Controller(self, leadership)
                log.info("cluster %r: node %d is the controller (epoch %d)", self.name,
                         self._node_id, leadership.epoch)
                try:
                    await self._control()
                finally:
                    self.controller = None
        finally:
            observer.cancel()

    async def _observe(self, election: Election) -> None:
        while True:
            try:
                async for leader in election.observe():
                    self.controller_node = int(leader.value) if leader is not None else None
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log.info("controller observer: %s; retrying", error)
                await asyncio.sleep(1.0)

    async def _control(self) -> None:
        assert self.lease is not None and self.controller is not None
        controller = self.controller
        every = self.settings.preferred_leader_check
        balanced = time.monotonic()
        while self.lease.valid:
            self._elect.clear()
            try:
                await controller.elect_all()
                if every and time.monotonic() - balanced >= every:
                    balanced = time.monotonic()
                    await controller.balance()
            except CoordinatorError as error:
                log.warning("controller: elections wait for etcd: %s", error)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._elect.wait()
            if self.controller_node not in (None, self._node_id):
                return  # the election moved on (this node's key is gone)

    async def propose(self, op: str, args: dict[str, Any]) -> None:
        """Hand a catalog change to the controller; return once this node applied it."""
        proposal = f"{self._node_id}-{secrets.token_hex(8)}"
        args = {**args, "proposal": proposal}
        self._own_proposals.add(proposal)
        try:
            deadline = time.monotonic() + 10.0
            while True:
                controller = self.controller_node
                try:
                    if self.controller is not None:
                        answer = await self.controller.change(op, args)
                    elif controller is not None and controller in self.members:
                        address = self.members[controller].address("peer")
                        assert address is not None
                        reply = await self.links.request(*address, codec.CATALOG,
                                                          {"op": op, "args": args}, timeout=10.0)
                        answer = reply.header
                    else:
                        raise PeerUnavailable("no controller now")
                    break
                except (PeerUnavailable, CoordinatorError) as error:
                    if time.monotonic() > deadline:
                        raise errors.ClusterUnavailable(str(error)) from None
                    await asyncio.sleep(0.2)
                except PeerRefused as refusal:
                    if refusal.status == "not_controller" and time.monotonic() < deadline:
                        await asyncio.sleep(0.2)
                        continue
                    raise _refused_error(refusal) from None
            await self.applied(int(answer["revision"]))
        finally:
            asyncio.get_running_loop().call_later(30, self._own_proposals.discard, proposal)

    # -- ISR changes by the leader -------------------------------------------------------------

    def checkpoint_high_watermarks(self) -> None:
        """Store every replicated partition's high watermark beside its log (the floor no
        truncation goes below after a restart)."""
        for key in self.partition_states:
            partition = self._partition(key)
            if partition is not None and partition.high_watermark_known:
                mark = partition.high_watermark
                if mark != partition.log.stored_high_watermark:
                    with contextlib.suppress(Exception):
                        partition.log.store_high_watermark(mark)

    async def _check_isr(self) -> None:
        lag_max = self.settings.replica_lag_max
        rounds = 0
        while True:
            await asyncio.sleep(ISR_CHECK)
            rounds += 1
            if rounds % HW_CHECKPOINT_ROUNDS == 0:
                self.checkpoint_high_watermarks()
            if self.lease is None or not self.lease.valid:
                continue
            live = set(self.members)
            for key, leader in list(self.leaders.items()):
                state = leader.state
                new = None
                out = leader.lagging(lag_max)
                if out and len(state.isr) > 1:
                    new = shrink(state, out)
                    kind = "isr_shrinks"
                else:
                    back = leader.caught_up(live)
                    if back:
                        leader.returning.add(back[0])  # counted in the HW from now on
                        new = expand(state, back[0])
                        kind = "isr_expands"
                if new is None:
                    continue
                try:
                    result = await self.coordinator.txn(
                        [Compare.mod_revision(self.keys.partition(*key), "==", state.revision)],
                        [Put(self.keys.partition(*key), new.to_json())])
                except CoordinatorError as error:
                    log.info("partition %s: ISR change waits for etcd: %s",
                             "/".join(map(str, key)), error)
                    continue
                if result.succeeded:
                    self.counters[kind] += 1
                    log.info("partition %s: ISR %s -> %s", "/".join(map(str, key)),
                             list(state.isr), list(new.isr))
                else:
                    self.counters["fenced_requests"] += 1

    # -- peer requests -------------------------------------------------------------------------

    async def serve_peer(self, node_id: int, message: Message) -> Message:
        kind, header = message.kind, message.header
        try:
            if kind == codec.FETCH:
                return await self._serve_fetch(node_id, message)
            if kind == codec.EPOCH_END:
                key = (header["stream_id"], header["topic_id"], header["partition_id"])
                leader = self._leading(key, header["leader_epoch"], header["incarnation"])
                found = leader.partition.log.epoch_end(int(header["epoch"]))
                if found is None:
                    return codec.answer(message, {"epoch": None,
                                                  "end_offset": leader.partition.log.first_offset})
                return codec.answer(message, {"epoch": found[0], "end_offset": found[1]})
            if kind == codec.CATALOG:
                if self.controller is None:
                    return codec.refusal(message, "not_controller",
                                         f"node {self._node_id} is not the controller")
                return codec.answer(message, await self.controller.change(header["op"],
                                                                          header["args"]))
            if kind == codec.FORWARD:
                run = self.core.broker.forwarded.get(header["protocol"])
                if run is None:
                    return codec.refusal(message, "feature_unavailable",
                                         f"nothing runs forwarded {header['protocol']} requests")
                return codec.answer(message, body=await run(int(header["user_id"]),
                                                            bytes(message.body)))
        except errors.RillError as error:
            return codec.refusal(message, error.name, error.reason)
        except CoordinatorError as error:
            return codec.refusal(message, "cluster_unavailable", str(error))
        except (KeyError, TypeError, ValueError) as error:
            return codec.refusal(message, "invalid_command", f"malformed peer request: {error}")
        return codec.refusal(message, "invalid_command", f"unknown peer request kind {kind}")

    def _leading(self, key: Any, epoch: Any, incarnation: Any) -> LeaderReplica:
        """The partition this node leads at ``epoch``, of that ``incarnation`` (a follower of a
        partition deleted and made again under the same ids is refused like one of no
        partition: its log is another partition's)."""
        key = tuple(int(part) for part in key)
        leader = self.leaders.get(key)  # type: ignore[arg-type]
        state = self.partition_states.get(key)  # type: ignore[arg-type]
        if leader is None or int(incarnation) != leader.state.incarnation:
            self.counters["fenced_requests"] += 1
            raise errors.NotLeaderForPartition(key[2], key[1], state.leader if state else "none")
        if int(epoch) < leader.epoch:
            self.counters["fenced_requests"] += 1
            raise errors.FencedLeaderEpoch(epoch, leader.epoch)
        if int(epoch) > leader.epoch:
            raise errors.UnknownLeaderEpoch(epoch, leader.epoch)
        return leader

    async def _serve_fetch(self, node_id: int, message: Message) -> Message:
        header = message.header
        key = (header["stream_id"], header["topic_id"], header["partition_id"])
        leader = self._leading(key, header["leader_epoch"], header["incarnation"])
        if int(header["member_epoch"]) != self.member_epochs.get(int(header["replica_id"])):
            self.counters["fenced_requests"] += 1
            return codec.refusal(message, "fenced_member", (
                f"member epoch {header['member_epoch']} of node {header['replica_id']} is not "
                f"the one etcd holds ({self.member_epochs.get(int(header['replica_id']))})"))
        offset = int(header["fetch_offset"])
        log_ = leader.partition.log
        if offset > log_.next_offset:
            return codec.refusal(message, "invalid_offset",
                                 f"fetch offset {offset} is past the leader's end {log_.next_offset}")
        leader.fetched(int(header["replica_id"]), offset)
        wait = min(int(header.get("max_wait_ms", 0)), 5000) / 1000
        if offset >= log_.next_offset and wait > 0:
            await self._wait_append(leader, offset, wait)
            leader = self._leading(key, header["leader_epoch"], header["incarnation"])
        fields, chunks = answer_fetch(leader, header, regions=True)
        return codec.answer(message, fields, chunks=chunks)

    async def _wait_append(self, leader: LeaderReplica, offset: int, wait: float) -> None:
        log_ = leader.partition.log
        deadline = time.monotonic() + wait
        while log_.next_offset <= offset and not leader.stepped_down:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            await self.core.appends.next_append(log_, min(remaining, 0.25))


def _refused_error(refusal: PeerRefused) -> errors.RillError:
    """The RillError another node answered with (by its name), or ClusterUnavailable."""
    try:
        return errors.error_by_name(refusal.status)(reason=refusal.message)
    except KeyError:
        return errors.ClusterUnavailable(reason=str(refusal))
