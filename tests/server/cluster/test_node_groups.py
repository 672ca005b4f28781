"""Iggy consumer groups across three real rill nodes over a real etcd cluster, driven by rill's
SDK (issue 30 item 7; iggy-py 0.4.0 has no consumer-group commands): a group made on one node
exists on every node with the same id; members connected to different nodes are dealt
disjoint partitions covering the topic, and every node lists them all; their polls read
through the partitions' leaders and commit the group's offsets to etcd, seen from another
node; when a node is killed (-9) its member leaves with its lease and the survivors take its
partitions; a LEAVE is seen everywhere; a member's claims go with it."""

from __future__ import annotations

from test_node import wait_for

from rill import errors
from rill.client import PollingStrategy
from rill.protocol.iggy.primitives import Consumer

PARTITIONS = 6
GROUP = Consumer.group(1)


def polled_partitions(client, rounds: int = 2) -> set[int]:
    """The partitions a member's group polls (no partition id) are dealt, over ``rounds``
    turns of the whole topic (a member's polls go round its partitions)."""
    seen = set()
    for _ in range(rounds * PARTITIONS):
        polled = client.poll_messages(1, 1, GROUP, strategy=PollingStrategy.next(), count=5,
                                      auto_commit=True)
        if polled.partition_id:
            seen.add(polled.partition_id)
    return seen


def test_members_on_different_nodes_share_the_partitions_and_survive_a_killed_node(
        cluster) -> None:
    clients = {n: cluster.client(n) for n in (1, 2, 3)}
    clients[1].create_stream("s", 1)
    clients[1].create_topic(1, "t", partitions_count=PARTITIONS, replication_factor=3)
    for partition_id in range(1, PARTITIONS + 1):
        wait_for(lambda partition_id=partition_id: cluster.leader_of(1, 1, partition_id), what="a leader")
        clients[2].send_messages(1, 1, [f"p{partition_id}-{n}" for n in range(20)],
                                 partitioning=partition_id)  # (proxied to the leader)
    made = clients[1].create_consumer_group(1, 1, "workers")
    assert made.group.id == 1
    for n in (2, 3):  # the same id on every node
        group = wait_for(lambda n=n: clients[n].get_consumer_group(1, 1, 1), what=f"group on {n}")
        assert group.group.name == "workers" and group.group.partitions_count == PARTITIONS

    for n in (1, 2, 3):
        clients[n].join_consumer_group(1, 1, 1)

    def dealt(nodes) -> dict[int, set[int]] | None:
        """Each node's member's partitions, once they are disjoint and cover the topic."""
        try:
            seen = {n: polled_partitions(clients[n]) for n in nodes}
        except (errors.LeaderNotAvailable, errors.NotLeaderForPartition):
            return None  # a dead node's partitions before their election
        union = set().union(*seen.values())
        if union != set(range(1, PARTITIONS + 1)) or sum(map(len, seen.values())) != PARTITIONS:
            return None
        return seen

    seen = wait_for(lambda: dealt((1, 2, 3)), what="disjoint partitions covering the topic")
    assert all(len(partitions) == 2 for partitions in seen.values()), seen
    for n in (1, 2, 3):  # every node lists the three members with the same partitions
        details = clients[n].get_consumer_group(1, 1, 1)
        assert details.group.members_count == 3
        assert sorted(p for m in details.members for p in m.partitions) == list(
            range(1, PARTITIONS + 1))
        assert sorted(set(m.partitions) for m in details.members) == sorted(seen.values())

    # the group's offsets, committed by node 1's member through each partition's leader,
    # read from node 3 (etcd holds them)
    mine = min(seen[1])
    while clients[1].poll_messages(1, 1, GROUP, partition_id=mine,
                                   strategy=PollingStrategy.next(), count=5,
                                   auto_commit=True).count:
        pass
    wait_for(lambda: (offset := clients[3].get_consumer_offset(
        1, 1, GROUP, partition_id=mine)) is not None and offset.stored_offset == 19,
        what="node 1's member's commit seen on node 3")

    # node 3 dies: its member leaves with its lease, nodes 1 and 2 take its partitions
    cluster.kill(3)
    clients.pop(3).close()
    seen = wait_for(lambda: dealt((1, 2)), timeout=30,
                    what="the survivors covering the dead node's partitions")
    assert sorted(map(len, seen.values())) == [3, 3], seen
    assert wait_for(lambda: clients[1].get_consumer_group(1, 1, 1).group.members_count == 2)

    # a LEAVE on node 2: node 1's member reads every partition
    clients[2].leave_consumer_group(1, 1, 1)
    wait_for(lambda: polled_partitions(clients[1]) == set(range(1, PARTITIONS + 1)),
             what="node 1's member taking every partition")
    assert clients[2].get_consumer_group(1, 1, 1).group.members_count == 1

    # a group deleted on node 2 is gone on node 1, with its committed offsets
    clients[2].delete_consumer_group(1, 1, 1)
    wait_for(lambda: clients[1].get_consumer_group(1, 1, 1) is None, what="group gone on 1")
    assert not cluster.read(cluster.keys.groups) and not cluster.read(cluster.keys.group_members)
    assert not cluster.read(cluster.keys.group_claims)
    assert not [key for key, _ in cluster.read(cluster.keys.offsets) if b"iggy-group" in key]
    for client in clients.values():
        client.close()


def test_a_disconnected_member_leaves_on_every_node(cluster) -> None:
    with cluster.client(1) as admin:
        admin.create_stream("s", 1)
        admin.create_topic(1, "t", partitions_count=2, replication_factor=1)
        admin.create_consumer_group(1, 1, "g")
    member = cluster.client(2)
    wait_for(lambda: member.get_consumer_group(1, 1, 1), what="the group on node 2")
    member.join_consumer_group(1, 1, 1)
    with cluster.client(3) as watcher:
        wait_for(lambda: watcher.get_consumer_group(1, 1, 1).group.members_count == 1,
                 what="node 3 listing node 2's member")
        member.close()
        wait_for(lambda: watcher.get_consumer_group(1, 1, 1).group.members_count == 0,
                 what="node 3 dropping the disconnected member")
    assert not cluster.read(cluster.keys.group_members)
    wait_for(lambda: not cluster.read(cluster.keys.group_claims),
             what="the member's claims let go")
