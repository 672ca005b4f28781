"""What the TANK listener tells clients in a cluster (issue 30 items 5-6; tank-wire-reference
§5.3, §6.3, §8.6), on a real in-process server (node 1) whose cluster view is set by hand with
two more members: produce and consume of a partition another node leads answer 0xfc and that
leader's TANK address, 0xfd when none does; a produce to a replicated partition waits for the
ISR whatever ``required_acks`` says (0x04 below the minimum ISR, 0x03 when not copied in time);
DiscoverTopology lists the members, DiscoverTopics is cluster-aware."""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest

from cluster_servers import start_cluster
from rill.client.tank import Batch, TankClient, produce_request
from rill.protocol.tank.errors import ConsumeFlag, CreateTopicError, ProduceError
from rill.server.core.cluster_view import NodeInfo

NODE_2 = NodeInfo(2, {"tank": ("127.0.0.2", 11012), "kafka": ("127.0.0.2", 19092)})
NODE_3 = NodeInfo(3, {"kafka": ("127.0.0.3", 29092)})  # no TANK listener


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    [server] = start_cluster(tmp_path_factory.mktemp("tank-cluster"), 1, controller_id=1,
                             extra_nodes=(NODE_2, NODE_3))
    yield server
    server.stop()


def run(node, work):
    async def main():
        async with TankClient(*node.tank_address) as client:
            return await work(client)

    return asyncio.run(main())


def new_topic(node, partitions: int = 1) -> str:
    name = "t" + uuid.uuid4().hex[:12]
    assert run(node, lambda c: c.create_topic(name, partitions)) == CreateTopicError.OK
    return name


def place(node, topic, index, leader, epoch=1, replicas=(1, 2, 3), isr=None, min_isr=2):
    node.place(node.config.tank_stream, topic, index + 1, leader,
               epoch, replicas, isr, min_isr)


def produce_bytes(node, topic: str, partitions: list[int], ack_timeout: int = 0) -> bytes:
    """The produce answer's error bytes as on the wire."""

    async def work(client):
        request = produce_request(1, [Batch(topic, p, [b"v"]) for p in partitions])
        request = type(request)(request.request_id, request.topics,
                                ack_timeout=ack_timeout, required_acks=1)
        return (await client._call(request)).errors

    return bytes(run(node, work))


def log_end(node, topic, index=0) -> int:
    stream = node.config.tank_stream
    return node.call(lambda: node.partition(stream, topic, index + 1).log.next_offset)


def test_produce_to_a_partition_led_elsewhere_names_the_leader(node):
    topic = new_topic(node, partitions=4)
    place(node, topic, 0, leader=1, isr=(1,), min_isr=1)
    place(node, topic, 1, leader=2)
    place(node, topic, 2, leader=None)
    place(node, topic, 3, leader=3)  # a leader with no TANK listener: no leader to TANK
    node.commit(node.config.tank_stream, topic, 1, 1)  # (an ISR of one commits at once)
    answer = produce_bytes(node, topic, [0, 1, 2, 3])
    assert answer == (bytes([ProduceError.OK, ProduceError.OTHER_LEADER]) + bytes([127, 0, 0, 2])
                      + struct.pack("<H", 11012)
                      + bytes([ProduceError.NO_LEADER, ProduceError.NO_LEADER]))
    assert [log_end(node, topic, i) for i in range(4)] == [1, 0, 0, 0]


def test_consume_of_a_partition_led_elsewhere_names_the_leader(node):
    topic = new_topic(node, partitions=3)
    place(node, topic, 0, leader=1, isr=(1,), min_isr=1)
    place(node, topic, 1, leader=2)
    place(node, topic, 2, leader=None)
    response = run(node, lambda c: c.consume_raw([(topic, 0, 0), (topic, 1, 0), (topic, 2, 0)],
                                                 max_wait_ms=10_000))
    parts = response.topics[0].partitions
    assert [p.flag for p in parts] == [ConsumeFlag.OK, ConsumeFlag.OTHER_LEADER,
                                       ConsumeFlag.NO_LEADER]
    assert parts[1].endpoint == ("127.0.0.2", 11012)


def test_a_node_unsure_of_its_lease_never_answers_a_seq_out_of_bounds(node):
    """A leader past its member lease's local deadline answers a consume beyond its log
    NO_LEADER (ask again), never BOUNDARY_CHECK, on which a client resets its position; what
    it holds it still serves."""
    topic = new_topic(node)
    place(node, topic, 0, leader=1, isr=(1,), min_isr=1)
    produce_bytes(node, topic, [0], ack_timeout=200)  # (not committed in 0.2 s: 0x03)
    node.commit(node.config.tank_stream, topic, 1, 1)
    assert log_end(node, topic) == 1

    def flag(seq: int):
        response = run(node, lambda c: c.consume_raw([(topic, 0, seq)], max_wait_ms=0))
        return response.topics[0].partitions[0].flag

    assert flag(9) == ConsumeFlag.BOUNDARY_CHECK
    node.call(setattr, node.view, "certain", False)
    try:
        assert flag(9) == ConsumeFlag.NO_LEADER
        assert flag(1) == ConsumeFlag.OK
    finally:
        node.call(setattr, node.view, "certain", True)


def test_a_replicated_produce_waits_for_the_isr(node):
    topic = new_topic(node, partitions=2)
    place(node, topic, 0, leader=1, replicas=(1, 2, 3), isr=(1,), min_isr=2)
    place(node, topic, 1, leader=1, replicas=(1, 2), isr=(1, 2))
    assert produce_bytes(node, topic, [0]) == bytes([ProduceError.INSUFFICIENT_REPLICAS])
    assert log_end(node, topic, 0) == 0
    # required_acks 1 still waits for the ISR: the follower never fetches here
    assert produce_bytes(node, topic, [1], ack_timeout=50) == bytes(
        [ProduceError.REPLICA_ACK_TIMEOUT])
    assert log_end(node, topic, 1) == 1  # written on the leader: may still commit


def test_a_replicated_produce_is_answered_once_committed(node):
    topic = new_topic(node)
    place(node, topic, 0, leader=1, replicas=(1, 2), isr=(1, 2))
    stream = node.config.tank_stream

    async def work(client):
        request = produce_request(1, [Batch(topic, 0, [b"v"])])
        answer = asyncio.ensure_future(client._call(request))
        while log_end(node, topic) < 1:
            await asyncio.sleep(0.01)
        assert not answer.done()
        node.commit(stream, topic, 1, 1)
        return (await answer).errors

    assert bytes(run(node, work)) == bytes([ProduceError.OK])


def test_a_replicated_produce_whose_leader_steps_down_meanwhile_is_an_ack_timeout(node):
    topic = new_topic(node)
    place(node, topic, 0, leader=1, replicas=(1, 2), isr=(1, 2))

    async def work(client):
        answer = asyncio.ensure_future(client._call(produce_request(1, [Batch(topic, 0, [b"v"])])))
        while log_end(node, topic) < 1:
            await asyncio.sleep(0.01)
        place(node, topic, 0, leader=2, epoch=2, replicas=(1, 2), isr=(1, 2))
        return (await answer).errors

    # appended here and maybe held by node 2: 0x03 (outcome unknown), never 0xfc naming node
    # 2, which a TANK client takes for "not written, send it there"
    assert bytes(run(node, work)) == bytes([ProduceError.REPLICA_ACK_TIMEOUT])


def test_discover_topology_lists_the_members(node):
    topic = new_topic(node, partitions=3)
    place(node, topic, 0, leader=1)
    place(node, topic, 1, leader=2)
    place(node, topic, 2, leader=2)
    answer = run(node, lambda c: c.discover_topology())
    assert answer.cluster_name == node.view.name
    nodes = {n.id: n for n in answer.nodes}
    assert sorted(nodes) == [1, 2, 3]
    assert nodes[1].endpoint == node.tank_address and nodes[1].flags == 3
    assert nodes[2].endpoint == ("127.0.0.2", 11012) and nodes[2].flags == 3
    assert nodes[3].endpoint is None and nodes[3].flags == 2
    assert nodes[2].partitions >= 2

    def led() -> dict[int, int]:
        counts: dict[int, int] = {}
        stream = node.server.core.state.find_stream(node.config.tank_stream)
        for found in stream.topics.values():
            for partition in found.partitions.values():
                if partition.placement is not None and partition.placement.leader is not None:
                    leader = partition.placement.leader
                    counts[leader] = counts.get(leader, 0) + 1
        return counts

    counts = node.call(led)
    assert {n.id: n.partitions for n in answer.nodes} == {i: counts.get(i, 0) for i in (1, 2, 3)}


def test_discover_topology_lists_a_node_that_just_left_as_unavailable(node):
    """A node that left the members a moment ago (``listed_nodes``) is listed with its
    endpoint and without the available flag, so a client keeps knowing of it."""
    left = NodeInfo(4, {"tank": ("127.0.0.4", 11014)})
    node.call(setattr, node.view, "left", [left])
    try:
        answer = run(node, lambda c: c.discover_topology())
    finally:
        node.call(setattr, node.view, "left", [])
    nodes = {n.id: n for n in answer.nodes}
    assert sorted(nodes) == [1, 2, 3, 4]
    assert nodes[4].endpoint == ("127.0.0.4", 11014) and nodes[4].flags == 1
    assert nodes[2].flags == 3 and nodes[3].flags == 2


def test_discover_topics_is_cluster_aware(node):
    topic = new_topic(node)
    answer = run(node, lambda c: c.discover_topics())
    assert answer.cluster_aware
    found = {t.name: t for t in answer.topics}
    model = node.call(lambda: node.server.core.state.find_topic(node.config.tank_stream, topic))
    assert found[topic].replication_factor == model.replication_factor >= 1


def test_discover_partitions_names_the_leaders(node):
    topic = new_topic(node, partitions=3)
    place(node, topic, 0, leader=1, isr=(1,), min_isr=1)
    place(node, topic, 1, leader=2)
    place(node, topic, 2, leader=None)
    answer = run(node, lambda c: c.discover_partitions(topic))
    first, second, third = answer.partitions
    assert (first.first_available, first.hwm, first.reason) == (0, 0, None)
    assert (second.reason, second.endpoint) == (0xFC, ("127.0.0.2", 11012))
    assert (third.reason, third.endpoint) == (0xFD, None)
    listed = run(node, lambda c: c.discover_partitions(topic, [1]))
    assert [p.reason for p in listed.partitions] == [0xFC]
