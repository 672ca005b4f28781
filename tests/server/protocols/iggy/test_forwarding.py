"""Iggy clients in a cluster (issue 30 items 5-6; ``protocols.iggy.forwarding``): two real
in-process servers (nodes 1 and 2) in a cluster set by hand, their ``forward`` wired to each
other's ``Broker.forwarded["iggy"]`` as the peer link does. A client of node 1 sends, polls and
stores and reads offsets of a partition node 2 leads: node 1 proxies each request to node 2
(a balanced SEND with the partition chosen on node 1), which stores and answers; a replicated
partition's SEND waits for the ISR; CREATE_TOPIC's replication factor reaches the topic."""

from __future__ import annotations

import asyncio

import pytest

from cluster_servers import start_cluster
from rill import errors
from rill.client import AsyncClient, Message, PollingStrategy
from rill.protocol.iggy.primitives import Partitioning

STREAM, TOPIC = "s", "t"


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    servers = start_cluster(tmp_path_factory.mktemp("iggy-cluster"), 2, controller_id=1)
    yield servers
    for server in servers:
        server.stop()


def client_of(server) -> AsyncClient:
    return AsyncClient("%s:%d" % server.tcp_address)


def run(server, work):
    async def main():
        client = client_of(server)
        await client.connect()
        try:
            await client.login_user("iggy", "iggy")
            return await work(client)
        finally:
            await client.close()

    return asyncio.run(main())


def same_topic_on_both(nodes, topic: str, partitions: int, factor: int = 0) -> None:
    """The catalog a cluster replicates: the same stream and topic on every node."""
    for server in nodes:
        async def create(client):
            try:
                await client.create_stream(STREAM, 1)
            except errors.StreamNameAlreadyExists:
                pass
            return await client.create_topic(STREAM, topic, partitions,
                                             replication_factor=factor)
        run(server, create)


def place(nodes, topic, partition_id, leader, replicas=(1, 2), isr=None, min_isr=1):
    for server in nodes:
        server.place(STREAM, topic, partition_id, leader, 1, replicas, isr, min_isr)


def stored(server, topic, partition_id) -> int:
    return server.call(lambda: server.partition(STREAM, topic, partition_id).log.next_offset)


def test_a_send_to_a_partition_led_elsewhere_is_proxied_to_the_leader(nodes):
    one, two = nodes
    same_topic_on_both(nodes, "sends", 1)
    place(nodes, "sends", 1, leader=2, replicas=(2,))

    async def work(client):
        await client.send_messages(STREAM, "sends", [Message(b"a"), Message(b"b")], 1)

    run(one, work)
    assert (stored(one, "sends", 1), stored(two, "sends", 1)) == (0, 2)


def test_a_balanced_send_is_chosen_here_then_proxied(nodes):
    one, two = nodes
    same_topic_on_both(nodes, "balanced", 2)
    place(nodes, "balanced", 1, leader=1, replicas=(1,))
    place(nodes, "balanced", 2, leader=2, replicas=(2,))

    async def work(client):
        for value in (b"1", b"2", b"3", b"4"):
            await client.send_messages(STREAM, "balanced", [Message(value)],
                                       Partitioning.balanced())

    run(one, work)
    # round robin on node 1: partitions 1, 2, 1, 2; those of partition 2 stored on node 2
    assert [stored(one, "balanced", 1), stored(one, "balanced", 2)] == [2, 0]
    assert [stored(two, "balanced", 1), stored(two, "balanced", 2)] == [0, 2]


def test_polls_and_offsets_of_a_partition_led_elsewhere_are_proxied(nodes):
    one, two = nodes
    same_topic_on_both(nodes, "reads", 1)
    place(nodes, "reads", 1, leader=2, replicas=(2,))
    run(two, lambda c: c.send_messages(STREAM, "reads", [Message(b"x"), Message(b"y")], 1))
    two.commit(STREAM, "reads", 1, 2)  # (the leader's high watermark: what an ISR of one has)

    async def work(client):
        polled = await client.poll_messages(STREAM, "reads", 7, 1, PollingStrategy.first(), 10)
        await client.store_consumer_offset(STREAM, "reads", 0, 7, 1)
        offset = await client.get_consumer_offset(STREAM, "reads", 7, 1)
        return [m.payload for m in polled.messages], offset

    payloads, offset = run(one, work)
    assert payloads == [b"x", b"y"]
    assert offset.stored_offset == 0 and offset.current_offset == 1
    # stored on the leader, not here
    assert run(two, lambda c: c.get_consumer_offset(STREAM, "reads", 7, 1)).stored_offset == 0
    assert stored(one, "reads", 1) == 0


def test_a_partition_with_no_leader_or_an_unreachable_one_is_refused(nodes):
    one, _two = nodes
    same_topic_on_both(nodes, "leaderless", 2)
    place(nodes, "leaderless", 1, leader=None, replicas=(1, 2))
    place(nodes, "leaderless", 2, leader=3, replicas=(3,))  # node 3: no link to it

    async def work(client):
        for partition_id in (1, 2):
            with pytest.raises(errors.LeaderNotAvailable):
                await client.send_messages(STREAM, "leaderless", [Message(b"a")],
                                           partition_id)

    run(one, work)


def test_a_send_to_a_replicated_partition_waits_for_the_isr(nodes):
    one, _two = nodes
    same_topic_on_both(nodes, "acks", 1)
    place(nodes, "acks", 1, leader=1, replicas=(1, 2), isr=(1,), min_isr=2)

    async def refused(client):
        with pytest.raises(errors.NotEnoughReplicas):
            await client.send_messages(STREAM, "acks", [Message(b"a")], 1)

    run(one, refused)
    assert stored(one, "acks", 1) == 0
    place(nodes, "acks", 1, leader=1, replicas=(1, 2), isr=(1, 2), min_isr=2)

    async def waits(client):
        send = asyncio.ensure_future(client.send_messages(STREAM, "acks", [Message(b"a")], 1))
        while stored(one, "acks", 1) < 1:
            await asyncio.sleep(0.01)
        assert not send.done()  # stored on the leader, not yet on the follower
        one.commit(STREAM, "acks", 1, 1)
        await send

    run(one, waits)


def test_a_send_whose_leader_steps_down_meanwhile_is_never_proxied(nodes):
    one, two = nodes
    same_topic_on_both(nodes, "stepdown", 1)
    place(nodes, "stepdown", 1, leader=1, replicas=(1, 2), isr=(1, 2), min_isr=2)

    async def work(client):
        send = asyncio.ensure_future(client.send_messages(STREAM, "stepdown",
                                                          [Message(b"a")], 1))
        while stored(one, "stepdown", 1) < 1:
            await asyncio.sleep(0.01)
        place(nodes, "stepdown", 1, leader=2, replicas=(1, 2), isr=(1, 2), min_isr=2)
        # appended on node 1, which node 2 may have copied: an unknown outcome; proxied to
        # node 2 it would be stored a second time there (the wire carries only the code)
        with pytest.raises(errors.ReplicationTimedOut):
            await send

    run(one, work)
    assert (stored(one, "stepdown", 1), stored(two, "stepdown", 1)) == (1, 0)


def test_a_proxied_send_whose_answer_is_lost_is_unknown_and_a_poll_may_be_retried(nodes):
    one, two = nodes
    same_topic_on_both(nodes, "lost", 1)
    place(nodes, "lost", 1, leader=2, replicas=(2,))
    two.commit(STREAM, "lost", 1, 0)
    reach_two = one.view.peers[2]

    async def applied_then_lost(protocol: str, user_id: int, frame: bytes) -> bytes:
        await reach_two(protocol, user_id, frame)  # node 2 runs it; its answer never comes
        raise errors.LeaderAnswerLost(2, "peer 127.0.0.1:1: link closed")

    one.view.peers[2] = applied_then_lost
    try:
        async def work(client):
            # stored on node 2 and maybe acknowledged there: "leader not available" would have
            # the client (rill's SDK does) send it again and store it twice
            with pytest.raises(errors.ReplicationTimedOut):
                await client.send_messages(STREAM, "lost", [Message(b"a")], 1)
            with pytest.raises(errors.LeaderNotAvailable):  # a read: safe to send again
                await client.poll_messages(STREAM, "lost", 7, 1, PollingStrategy.first(), 10)

        run(one, work)
    finally:
        one.view.peers[2] = reach_two
    assert stored(two, "lost", 1) == 1


def test_create_topic_takes_the_replication_factor(nodes):
    one, _two = nodes
    same_topic_on_both(nodes, "factor", 1, factor=2)
    topic = one.call(lambda: one.server.core.state.find_topic(STREAM, "factor"))
    assert topic.replication_factor == 2


def test_a_forwarded_request_is_never_forwarded_again(nodes):
    """A stale placement on the leader (it thinks node 1 leads) answers the refusal instead
    of bouncing the request back."""
    one, two = nodes
    same_topic_on_both(nodes, "stale", 1)
    one.place(STREAM, "stale", 1, 2, 1, (1, 2), None, 1)
    two.place(STREAM, "stale", 1, 1, 1, (1, 2), None, 1)

    async def work(client):
        with pytest.raises(errors.NotLeaderForPartition):
            await client.send_messages(STREAM, "stale", [Message(b"a")], 1)

    run(one, work)
