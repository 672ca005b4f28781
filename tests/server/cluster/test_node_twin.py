"""Three cluster nodes in this process on the coordinator's memory twin (``cluster.node``):
leases expire only when the test moves the twin's clock, so who leads, and when a leader loses
its lease, is the test's choice. Each node reaches the twin through a link the test can cut
(a node cut off from etcd: its watch and keepalives fail, its peer link still works).

The named scenario: a stale leader resumed (Jepsen's paused or isolated leader). A leader cut
off from etcd past its lease is replaced by the controller at the next epoch; still believing
it leads, it takes a write, which never commits (the ISR follows the new leader); when its
link comes back it steps down, refuses that write, cuts it from its log and copies the new
leader's, byte for byte."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from rill import errors
from rill.protocol.iggy.messages import encode_messages
from rill.protocol.peer import codec
from rill.server.app import Server
from rill.server.cluster.coordinator import (
    Compare,
    Coordinator,
    CoordinatorUnavailable,
    LeaseGrant,
    Operation,
    RangeResult,
    TxnResult,
    WatchBatch,
)
from rill.server.cluster.memory_coordinator import MemoryCoordinator
from rill.server.config import ServerConfig
from rill.server.core.cluster_view import ACKS_ALL
from rill.server.core.model import LEADER
from rill.server.core.broker import PartitionRef, TopicRef
from rill.server.core.types import TopicSpec


class Link(Coordinator):
    """One node's way to the shared twin; ``cut`` makes every call fail as an unreachable
    etcd does (and ends its open watches); ``deliver`` cleared holds back what its watches
    deliver (a node that applies changes late) until it is set again."""

    def __init__(self, twin: MemoryCoordinator) -> None:
        self.twin = twin
        self.cut = False
        self._broken = asyncio.Event()
        self.deliver = asyncio.Event()
        self.deliver.set()

    def _check(self) -> None:
        if self.cut:
            raise CoordinatorUnavailable("cut off from etcd (test)")

    def set_cut(self, cut: bool) -> None:
        self.cut = cut
        if cut:
            self._broken.set()
        else:
            self._broken = asyncio.Event()

    async def range(self, key: bytes, prefix: bool = False) -> RangeResult:
        self._check()
        return await self.twin.range(key, prefix)

    async def txn(self, compares: Sequence[Compare], success: Sequence[Operation] = (),
                  failure: Sequence[Operation] = ()) -> TxnResult:
        self._check()
        return await self.twin.txn(compares, success, failure)

    async def compact(self, revision: int) -> None:
        self._check()
        await self.twin.compact(revision)

    async def grant_lease(self, ttl: int) -> LeaseGrant:
        self._check()
        return await self.twin.grant_lease(ttl)

    async def keepalive(self, lease: int) -> int:
        self._check()
        return await self.twin.keepalive(lease)

    async def revoke_lease(self, lease: int) -> None:
        self._check()
        await self.twin.revoke_lease(lease)

    async def lease_time_to_live(self, lease: int) -> int:
        self._check()
        return await self.twin.lease_time_to_live(lease)

    async def watch(self, key: bytes, start_revision: int = 0,
                    prefix: bool = True) -> AsyncIterator[WatchBatch]:
        self._check()
        broken = self._broken
        source = self.twin.watch(key, start_revision, prefix).__aiter__()
        while True:
            step = asyncio.ensure_future(source.__anext__())
            cut = asyncio.ensure_future(broken.wait())
            done, _ = await asyncio.wait({step, cut}, return_when=asyncio.FIRST_COMPLETED)
            if cut in done:
                step.cancel()
                raise CoordinatorUnavailable("cut off from etcd (test)")
            cut.cancel()
            await self.deliver.wait()
            yield step.result()

    def clock(self) -> float:
        return self.twin.clock()

    async def sleep(self, seconds: float) -> None:
        await self.twin.sleep(seconds)

    async def close(self) -> None:
        pass


def node_config(directory: Path, node_id: int) -> ServerConfig:
    config = ServerConfig()
    config.system.path = str(directory / f"node{node_id}")
    config.root.password_hash_cost = 4
    config.tcp.address = config.http.address = "127.0.0.1:0"
    config.quic.enabled = False
    config.cluster.etcd_endpoints = "http://twin.invalid:1"  # (the twin is given instead)
    config.cluster.node_id = node_id
    config.cluster.peer_address = "127.0.0.1:0"
    config.cluster.name = "twin"
    return config


async def until(check, what: str, timeout: float = 15.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (found := check()):
        assert loop.time() < deadline, f"{what} did not happen in {timeout} s"
        await asyncio.sleep(0.02)
    return found


async def three_nodes(tmp_path: Path, twin: MemoryCoordinator, **cluster_settings: float
                      ) -> tuple[dict[int, Link], dict[int, Server]]:
    """Nodes 1-3 on ``twin`` (``cluster_settings``: ``[cluster]`` values), started, with a
    controller elected."""
    links = {n: Link(twin) for n in (1, 2, 3)}
    configs = {n: node_config(tmp_path, n) for n in (1, 2, 3)}
    for config in configs.values():
        for name, value in cluster_settings.items():
            setattr(config.cluster, name, value)
    servers = {n: Server(configs[n], coordinator=links[n]) for n in (1, 2, 3)}
    try:
        for server in servers.values():
            await server.start()
        await until(lambda: all(s.cluster.controller_id for s in servers.values()),
                    "a controller")
    except BaseException:
        for server in servers.values():
            await server.stop()
        raise
    return links, servers


async def replicated_topic(server: Server) -> None:
    """Stream 1 "s" with topic 1 "t" of one partition, replicated on 3 nodes."""
    core = server.core
    session = core.broker.connect("127.0.0.1:1", "tcp")
    core.broker.authenticate_as(session, 1)
    await core.broker.create_namespace(session, "s")
    await core.broker.create_topic(session, 1, TopicSpec("t", partitions_count=1,
                                                         replication_factor=3))


def logged_in(server: Server, address: str):
    """A session of ``server``'s broker logged in as root."""
    session = server.core.broker.connect(address, "tcp")
    server.core.broker.authenticate_as(session, 1)
    return session


async def filled_topic(servers: dict[int, Server], records: int, label: bytes):
    """``replicated_topic`` made on node 1, then ``records`` records ``<label>-<n>`` appended
    acks=all on its leader: (the partition's state then, the leader's session)."""
    await replicated_topic(servers[1])
    state = await until(lambda: (found := servers[1].cluster.partition_states.get(
        (1, 1, 1))) and found.created and found, "the partition's state")
    session = logged_in(servers[state.leader], "127.0.0.1:2")
    for n in range(records):
        await servers[state.leader].core.broker.append(
            session, PartitionRef(1, 1, 1), encode_messages([b"%s-%d" % (label, n)]),
            acks=ACKS_ALL, ack_timeout=10)
    return state, session


def stored(server: Server) -> bytes:
    log = server.core.state.streams[1].topics[1].partitions[1].log
    _, chunks = log.read(log.first_offset, log.next_offset - log.first_offset)
    return b"".join(bytes(chunk) for chunk in chunks)


def test_a_leader_cut_off_past_its_lease_is_replaced_and_its_late_write_never_commits(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        twin = MemoryCoordinator()
        links, servers = await three_nodes(tmp_path, twin)
        try:
            await replicated_topic(servers[1])

            def leader() -> int | None:
                for n, server in servers.items():
                    partition = server.core.state.streams.get(1) and \
                        server.core.state.streams[1].topics.get(1)
                    if partition and partition.partitions[1].role == LEADER \
                            and not links[n].cut:
                        return n
                return None

            old = await until(leader, "a leader")
            broker = servers[old].core.broker
            session = broker.connect("127.0.0.1:2", "tcp")
            broker.authenticate_as(session, 1)
            ref = PartitionRef(1, 1, 1)
            for n in range(5):
                await broker.append(session, ref, encode_messages([b"committed-%d" % n]),
                                    acks=ACKS_ALL, ack_timeout=10)
            epoch = servers[old].cluster.partition_states[(1, 1, 1)].leader_epoch

            links[old].set_cut(True)  # cut off from etcd: its lease will not be renewed
            for _ in range(8):  # 4 s of the twin's clock: the others renew, it cannot
                await twin.advance(0.5)
            new = await until(lambda: next(
                (n for n in (1, 2, 3) if n != old and servers[n].core.state.streams[1]
                 .topics[1].partitions[1].role == LEADER), None), "a new leader")
            state = servers[new].cluster.partition_states[(1, 1, 1)]
            assert state.leader == new and state.leader_epoch == epoch + 1
            assert old not in state.isr

            # the old leader still believes it leads: it takes a write that cannot commit
            assert servers[old].core.state.streams[1].topics[1].partitions[1].role == LEADER
            late = asyncio.ensure_future(broker.append(
                session, ref, encode_messages([b"late"]), acks=ACKS_ALL, ack_timeout=30))
            await asyncio.sleep(0.5)
            assert not late.done()  # no ISR member fetches from it any more

            links[old].set_cut(False)  # back: its watch (retrying on the twin's clock) resumes
            for _ in range(100):
                if late.done():
                    break
                await twin.advance(0.2)
                await asyncio.sleep(0.05)
            with pytest.raises(errors.LeaderSteppedDown, match="stopped leading"):
                await late
            assert servers[old].cluster.counters["fenced_requests"] >= 1
            for _ in range(100):  # its lease is gone: it joins again, a follower of the new
                if stored(servers[old]) == stored(servers[new]):
                    break
                await twin.advance(0.2)
                await asyncio.sleep(0.05)
            assert stored(servers[old]) == stored(servers[new])
            assert b"late" not in stored(servers[new])
            assert stored(servers[new]).count(b"committed-") == 5
        finally:
            for server in servers.values():
                await server.stop()

    asyncio.run(scenario())


def test_leadership_returns_to_the_preferred_replica_once_it_is_back_in_sync(
        tmp_path: Path) -> None:
    """The preferred leader (the assignment's first replica) loses its lease and is replaced;
    when it is back and in the ISR again the controller hands leadership back to it at a new
    epoch, and what was committed meanwhile is all there."""
    async def scenario() -> None:
        twin = MemoryCoordinator()
        links, servers = await three_nodes(tmp_path, twin, preferred_leader_check=0.2)
        try:
            await replicated_topic(servers[1])

            first = await until(lambda: servers[1].cluster.partition_states.get((1, 1, 1)),
                                "the partition's state")
            preferred = first.replicas[0]
            observer = servers[next(n for n in (1, 2, 3) if n != preferred)]

            def state():  # etcd's state, as a node never cut off sees it
                return observer.cluster.partition_states.get((1, 1, 1))

            assert first.leader == preferred
            links[preferred].set_cut(True)
            for _ in range(8):
                await twin.advance(0.5)
            await until(lambda: (found := state()) is not None and found.leader not in (
                None, preferred), "a failover")
            acting = state().leader
            broker = servers[acting].core.broker
            writer = broker.connect("127.0.0.1:2", "tcp")
            broker.authenticate_as(writer, 1)
            for n in range(3):
                await broker.append(writer, PartitionRef(1, 1, 1),
                                    encode_messages([b"meanwhile-%d" % n]), acks=ACKS_ALL,
                                    ack_timeout=10)
            links[preferred].set_cut(False)
            for _ in range(200):
                found = state()
                if found is not None and found.leader == preferred:
                    break
                await twin.advance(0.2)
                await asyncio.sleep(0.05)
            back = state()
            assert back.leader == preferred and back.leader_epoch > first.leader_epoch + 1
            assert preferred in back.isr
            await until(lambda: servers[preferred].core.state.streams[1].topics[1]
                        .partitions[1].role == LEADER, "the preferred replica leading")
            assert stored(servers[preferred]).count(b"meanwhile-") == 3
        finally:
            for server in servers.values():
                await server.stop()

    asyncio.run(scenario())


def test_a_partition_made_again_under_the_same_ids_serves_no_replica_of_the_old_one(
        tmp_path: Path) -> None:
    """A topic deleted and created again with the same ids is another partition (another
    incarnation: its etcd key's create_revision) even at the same leader epoch: no follower of
    the old one is left, and a fetch naming the old incarnation is refused (a stale follower
    that were answered would report its old log end as this partition's progress)."""
    async def scenario() -> None:
        twin = MemoryCoordinator()
        _, servers = await three_nodes(tmp_path, twin)
        try:
            old, _ = await filled_topic(servers, 3, b"old")
            admin = logged_in(servers[1], "127.0.0.1:3")
            await servers[1].core.broker.delete_topic(admin, TopicRef(1, 1))
            await servers[1].core.broker.create_topic(admin, 1, TopicSpec(
                "t", partitions_count=1, topic_id=1, replication_factor=3))

            def made_again() -> bool:
                return all((state := server.cluster.partition_states.get((1, 1, 1)))
                           is not None and state.created > old.created
                           for server in servers.values())

            await until(made_again, "the new partition's state on every node")
            new = servers[1].cluster.partition_states[(1, 1, 1)]
            assert new.leader_epoch == old.leader_epoch  # the epoch cannot tell them apart
            leader = servers[new.leader]
            await until(lambda: (1, 1, 1) in leader.cluster.leaders, "the new leader leading")
            for n, server in servers.items():  # every follower is the new partition's
                if n != new.leader:
                    follower = await until(lambda: server.cluster.followers.get((1, 1, 1)),
                                           f"node {n} following")
                    assert follower.incarnation == new.created

            follower_id = next(n for n in (1, 2, 3) if n != new.leader)

            def fetch(incarnation: int) -> codec.Message:
                return codec.Message(codec.FETCH, 1, {
                    "stream_id": 1, "topic_id": 1, "partition_id": 1,
                    "incarnation": incarnation, "replica_id": follower_id,
                    "member_epoch": leader.cluster.member_epochs[follower_id],
                    "leader_epoch": new.leader_epoch, "fetch_offset": 0, "max_wait_ms": 0,
                    "max_bytes": 1024})

            fenced = leader.cluster.counters["fenced_requests"]
            stale = await leader.cluster.serve_peer(follower_id, fetch(old.created))
            assert stale.header["status"] == "not_leader_for_partition"
            assert leader.cluster.counters["fenced_requests"] == fenced + 1
            current = await leader.cluster.serve_peer(follower_id, fetch(new.created))
            assert current.header["status"] == codec.OK
        finally:
            for server in servers.values():
                await server.stop()

    asyncio.run(scenario())


def test_an_acks_all_wait_begun_after_this_node_stopped_leading_is_an_unknown_outcome(
        tmp_path: Path) -> None:
    """The acks=all wait starts after the local append, which may await (a worker thread's
    write, an fsync): a node that stopped leading meanwhile answers LeaderSteppedDown (Iggy
    and HTTP ``replication_timed_out``), never "not the leader", which the Iggy proxy, an HTTP
    redirect or a TANK client would take for "not written" and send again."""
    async def scenario() -> None:
        twin = MemoryCoordinator()
        _, servers = await three_nodes(tmp_path, twin)
        try:
            await replicated_topic(servers[1])
            state = await until(lambda: servers[1].cluster.partition_states.get((1, 1, 1)),
                                "the partition's state")
            follower = next(n for n in (1, 2, 3) if n != state.leader)
            partition = await until(lambda: servers[follower].core.state.streams.get(1) and (
                servers[follower].core.state.streams[1].topics[1].partitions[1]),
                "the partition on a follower")
            with pytest.raises(errors.LeaderSteppedDown,
                               match=f"node {follower} stopped leading partition 1 "
                                     f"\\(its leader is now {state.leader}\\)"):
                await servers[follower].cluster.replicated(partition, 0, 1.0)
        finally:
            for server in servers.values():
                await server.stop()

    asyncio.run(scenario())


def test_a_purge_empties_every_replica_even_one_away_and_offsets_start_again_at_0(
        tmp_path: Path) -> None:
    """A topic purged from a node that does not lead it: every live replica empties its log
    (offsets start again at 0, the stored position is gone), the next writes replicate as
    usual, and a replica that was stopped meanwhile empties itself when it returns, then
    copies the new records -- none of the old ones comes back anywhere -- and takes the
    position stored since, not its own from before."""
    async def scenario() -> None:
        twin = MemoryCoordinator()
        links, servers = await three_nodes(tmp_path, twin)
        try:
            old, session = await filled_topic(servers, 5, b"old")
            leader = servers[old.leader]
            await leader.core.broker.commit_offset(session, "reader", PartitionRef(1, 1, 1), 3)
            await until(lambda: all(s.core.state.streams[1].topics[1].partitions[1]
                                    .positions.get("reader") == 3 for s in servers.values()),
                        "the position on every node")
            away, purger = [n for n in (1, 2, 3) if n != old.leader]
            await until(lambda: stored(servers[away]).count(b"old-") == 5, "the old copies")
            await servers[away].stop()
            await until(lambda: away not in servers[old.leader].cluster.partition_states[
                (1, 1, 1)].isr, "the stopped node out of the ISR")

            admin = logged_in(servers[purger], "127.0.0.1:3")
            await servers[purger].core.topics.purge_topic(admin, 1, 1)

            live = {n: servers[n] for n in (old.leader, purger)}

            def emptied() -> bool:
                return all((state := server.cluster.partition_states.get((1, 1, 1)))
                           and state.incarnation > old.incarnation
                           and server.core.state.streams[1].topics[1].partitions[1]
                           .log.next_offset == 0 for server in live.values())

            await until(emptied, "every live replica emptied")
            new = servers[purger].cluster.partition_states[(1, 1, 1)]
            assert new.leader_epoch == old.leader_epoch + 1 and new.leader == old.leader
            for server in live.values():
                partition = server.core.state.streams[1].topics[1].partitions[1]
                assert partition.log.incarnation == new.incarnation
                assert partition.high_watermark == 0 and "reader" not in partition.positions
                assert server.cluster.counters["replicas_emptied"] == 1
            await until(lambda: (1, 1, 1) in leader.cluster.leaders
                        and leader.cluster.leaders[(1, 1, 1)].epoch == new.leader_epoch,
                        "the leader leading the new incarnation")
            for n in range(3):
                await leader.core.broker.append(session, PartitionRef(1, 1, 1),
                                                encode_messages([b"new-%d" % n]),
                                                acks=ACKS_ALL, ack_timeout=10)
            partition = leader.core.state.streams[1].topics[1].partitions[1]
            assert (partition.log.first_offset, partition.log.next_offset) == (0, 3)
            await leader.core.broker.commit_offset(session, "reader", PartitionRef(1, 1, 1), 1)
            await until(lambda: all(s.core.state.streams[1].topics[1].partitions[1]
                                    .positions.get("reader") == 1 for s in live.values()),
                        "the new position on every live node")

            servers[away] = Server(node_config(tmp_path, away), coordinator=links[away])
            await servers[away].start()
            await until(lambda: len({stored(s) for s in servers.values()}) == 1,
                        "every replica holding the same records")
            assert servers[away].cluster.counters["replicas_emptied"] == 1
            for server in servers.values():
                records = stored(server)
                assert records.count(b"new-") == 3 and b"old-" not in records
            await until(lambda: servers[away].core.state.streams[1].topics[1].partitions[1]
                        .positions.get("reader") == 1, "the new position on the returned node")
        finally:
            for server in servers.values():
                await server.stop()

    asyncio.run(scenario())


def test_a_node_away_while_its_topic_was_made_again_keeps_none_of_the_old_records(
        tmp_path: Path) -> None:
    """A topic deleted and created again under the same ids while a replica's node was
    stopped (the new one on the live nodes): when that node returns, its old log is not taken
    for the new partition's (same ids, same leader epoch 1: only the topic's creation tells
    them apart): the old records are gone from it, and the new topic is there, empty."""
    async def scenario() -> None:
        twin = MemoryCoordinator()
        links, servers = await three_nodes(tmp_path, twin)
        try:
            old, _ = await filled_topic(servers, 5, b"old")
            away, admin_node = [n for n in (1, 2, 3) if n != old.leader]
            await until(lambda: stored(servers[away]).count(b"old-") == 5, "the old copies")
            await servers[away].stop()
            await until(lambda: away not in servers[admin_node].cluster.members,
                        "the stopped node gone from the members")

            admin = logged_in(servers[admin_node], "127.0.0.1:3")
            await servers[admin_node].core.broker.delete_topic(admin, TopicRef(1, 1))
            await servers[admin_node].core.broker.create_topic(admin, 1, TopicSpec(
                "t", partitions_count=1, topic_id=1, replication_factor=2))
            new = await until(lambda: (found := servers[admin_node].cluster.partition_states
                                       .get((1, 1, 1))) and found.created > old.created
                              and found, "the new partition's state")
            assert away not in new.replicas

            servers[away] = Server(node_config(tmp_path, away), coordinator=links[away])
            await servers[away].start()
            await until(lambda: servers[away].cluster.partition_states.get((1, 1, 1)) == new,
                        "the new partition's state on the returned node")
            topic = servers[away].core.state.streams[1].topics[1]
            assert topic.partitions[1].log.next_offset == 0 and b"old-" not in stored(
                servers[away])
            assert topic.created_at == servers[admin_node].core.state.streams[1].topics[1] \
                .created_at
        finally:
            for server in servers.values():
                await server.stop()

    asyncio.run(scenario())


def test_a_purge_returns_only_once_the_leader_has_emptied_its_log(tmp_path: Path) -> None:
    """The leader applies changes late (its watch held back): a purge sent to another node is
    done in etcd and applied there, but does not return until the leader has emptied its log
    and leads the new incarnation, so no write sent after the purge returned can land in the
    emptied one."""
    async def scenario() -> None:
        twin = MemoryCoordinator()
        links, servers = await three_nodes(tmp_path, twin)
        try:
            old, _ = await filled_topic(servers, 3, b"old")
            purger = next(n for n in (1, 2, 3) if n != old.leader)
            leader_log = servers[old.leader].core.state.streams[1].topics[1].partitions[1].log
            links[old.leader].deliver.clear()
            purge = asyncio.ensure_future(servers[purger].core.topics.purge_topic(
                logged_in(servers[purger], "127.0.0.1:3"), 1, 1))
            await until(lambda: servers[purger].cluster.partition_states[(1, 1, 1)]
                        .incarnation > old.incarnation, "the purge applied on its node")
            await asyncio.sleep(0.5)
            assert not purge.done() and leader_log.next_offset == 3
            links[old.leader].deliver.set()
            await asyncio.wait_for(purge, 15)
            partition = servers[old.leader].core.state.streams[1].topics[1].partitions[1]
            assert partition.log.next_offset == 0
            assert servers[old.leader].cluster.leaders[(1, 1, 1)].state.incarnation > \
                old.incarnation
        finally:
            for server in servers.values():
                await server.stop()

    asyncio.run(scenario())


def test_a_node_that_left_the_members_is_listed_to_clients_for_30_s(tmp_path: Path) -> None:
    """``listed_nodes`` (Kafka Metadata's brokers): a node cut off past its lease leaves the
    members at once but stays listed for 30 s of the clock, then goes; back, it is both. The
    node itself is not sure of its leaderships (``leadership_certain``) from its lease's
    local deadline until it has joined again."""
    async def scenario() -> None:
        twin = MemoryCoordinator()
        links, servers = await three_nodes(tmp_path, twin)
        try:
            cluster = servers[1].cluster

            def ids(nodes) -> list[int]:
                return [node.node_id for node in nodes]

            assert servers[3].cluster.leadership_certain()
            links[3].set_cut(True)
            for _ in range(8):  # 4 s: its lease ends
                await twin.advance(0.5)
            await until(lambda: 3 not in cluster.members, "node 3 left the members")
            assert not servers[3].cluster.leadership_certain()
            assert ids(cluster.nodes()) == [1, 2] and ids(cluster.listed_nodes()) == [1, 2, 3]
            for _ in range(50):  # 25 s of the 30
                await twin.advance(0.5)
            assert ids(cluster.listed_nodes()) == [1, 2, 3]
            for _ in range(12):
                await twin.advance(0.5)
            assert ids(cluster.listed_nodes()) == [1, 2]
            links[3].set_cut(False)
            for _ in range(100):  # its watch and lease retry on the twin's clock
                if 3 in cluster.members:
                    break
                await twin.advance(0.2)
                await asyncio.sleep(0.05)
            assert ids(cluster.nodes()) == [1, 2, 3] == ids(cluster.listed_nodes())
            await until(servers[3].cluster.leadership_certain, "node 3 sure of its lease")
        finally:
            for n, server in servers.items():
                links[n].set_cut(False)
                await server.stop()

    asyncio.run(scenario())
