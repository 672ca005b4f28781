"""The SDK's leader routing (client/cluster.py, ``cluster=ClusterRouting(...)``) between two
in-process nodes whose hand-set views agree on who leads what: SEND and POLL of a partition go
to its leader's own Iggy TCP listener (one connection per node, logged in as the client is);
a leader change is found by the old leader's NotLeaderForPartition and a new read of
``GET /cluster``; a leader that went away is found by the dropped link; without the option a
node refuses what it does not lead."""

from __future__ import annotations

import asyncio

import pytest

from cluster_servers import ClusterServer, cluster_of, create_topic, place
from rill import errors
from rill.client import AsyncClient, Client, ClusterRouting, Message, PollingStrategy


@pytest.fixture
def nodes(tmp_path):
    started = [ClusterServer(tmp_path / f"node{index}", index).start() for index in (1, 2)]
    for node in started:
        create_topic(node, "orders", "eu", 2)
    for view in cluster_of(started):
        view.instant_followers = True  # (should SEND wait for the ISR)
    place(started, "orders", "eu", 1, 1, 1, (1, 2))
    place(started, "orders", "eu", 2, 2, 1, (2, 1))
    yield started
    for node in started:
        node.stop()  # (nothing for a node a test stopped)


def stored(node, partition_id: int) -> int:
    return node.call(lambda: node.partition("orders", "eu", partition_id).log.next_offset)


def routed(node) -> AsyncClient:
    return AsyncClient(node.endpoint("tcp"), cluster=ClusterRouting(node.endpoint("http")))


def test_without_routing_a_node_refuses_a_partition_it_does_not_lead(nodes):
    first, _second = nodes
    with Client(first.endpoint("tcp")) as client:
        client.login_user("iggy", "iggy")
        with pytest.raises((errors.NotLeaderForPartition, errors.LeaderNotAvailable)):
            client.send_messages("orders", "eu", [Message(b"x")], partitioning=2)


def commit(node, partition_id: int) -> None:
    """The partition's high watermark to its log end, as the ISR's fetches would move it."""
    node.commit("orders", "eu", partition_id)


def test_sends_and_polls_go_to_each_partitions_leader(nodes):
    first, second = nodes

    async def main() -> None:
        async with routed(first) as client:
            await client.login_user("iggy", "iggy")
            await client.send_messages("orders", "eu", [Message(b"one")], partitioning=1)
            await client.send_messages("orders", "eu", [Message(b"two"), Message(b"three")],
                                       partitioning=2)
            commit(second, 2)
            polled = await client.poll_messages("orders", "eu", partition_id=2, consumer=1,
                                                strategy=PollingStrategy.first(), count=10)
            assert [m.payload for m in polled.messages] == [b"two", b"three"]
            # one extra connection: to node 2; node 1's partitions use the client's own
            assert sorted(client.cluster_router.clients) == [2]
            assert client.cluster_router.refreshes == 1

    asyncio.run(main())
    assert (stored(first, 1), stored(first, 2)) == (1, 0)
    assert (stored(second, 1), stored(second, 2)) == (0, 2)


def test_a_new_leader_is_found_by_the_old_ones_refusal(nodes):
    first, second = nodes

    async def main() -> None:
        async with routed(first) as client:
            await client.login_user("iggy", "iggy")
            await client.send_messages("orders", "eu", [Message(b"a")], partitioning=2)
            place([first, second], "orders", "eu", 2, 1, 2, (1, 2))  # node 1 leads now
            await client.send_messages("orders", "eu", [Message(b"b")], partitioning=2)
            assert client.cluster_router.refreshes == 2

    asyncio.run(main())
    assert (stored(first, 2), stored(second, 2)) == (1, 1)


@pytest.mark.parametrize("map_from", [0, 1], ids=["map-from-a-live-node", "map-from-the-gone-node"])
def test_a_leader_gone_is_found_by_the_dropped_link(nodes, map_from):
    """(With the map read from the node that went away, it is read from another member's
    http listener the last map named.)"""
    first, second = nodes
    client = Client(first.endpoint("tcp"), cluster=ClusterRouting(nodes[map_from].endpoint("http")))
    try:
        client.connect()
        client.login_user("iggy", "iggy")
        client.send_messages("orders", "eu", [Message(b"a")], partitioning=2)
        second.stop()
        place([first], "orders", "eu", 2, 1, 2, (1, 2))  # node 1 took over
        # the request on the dropped link may have been applied: it is raised, never re-sent
        with pytest.raises((errors.Disconnected, errors.NotConnected)):
            client.send_messages("orders", "eu", [Message(b"b")], partitioning=2)
        client.send_messages("orders", "eu", [Message(b"c")], partitioning=2)
    finally:
        client.close()
    assert stored(first, 2) == 1


def test_concurrent_sends_share_one_connection_per_node_and_one_map_read(nodes):
    first, second = nodes

    async def main() -> None:
        async with routed(first) as client:
            await client.login_user("iggy", "iggy")
            await asyncio.gather(*(client.send_messages("orders", "eu", [Message(b"%d" % n)],
                                                        partitioning=2) for n in range(20)))
            assert list(client.cluster_router.clients) == [2]
            assert second.call(lambda: len(second.server.supervisor.connections)) == 1
            assert client.cluster_router.refreshes == 1
            place([first, second], "orders", "eu", 2, 1, 2, (1, 2))  # node 1 leads now
            await asyncio.gather(*(client.send_messages("orders", "eu", [Message(b"%d" % n)],
                                                        partitioning=2) for n in range(20)))
            assert client.cluster_router.refreshes == 2  # every refusal saw the one new map

    asyncio.run(main())
    assert (stored(first, 2), stored(second, 2)) == (20, 20)


def test_the_map_names_partitions_by_id_and_by_name_once_known():
    from rill.client.cluster import ClusterMap

    cluster_map = ClusterMap.from_status({"mode": "cluster", "members": [
        {"node_id": 1, "listeners": {"iggy_tcp": "127.0.0.1:8091"}}], "partitions": [
        {"stream_id": 1, "topic_id": 2, "stream": "orders", "topic": "eu", "partition_id": 3,
         "leader": 1},
        {"stream_id": 1, "topic_id": 4, "stream": None, "topic": None, "partition_id": 1,
         "leader": 2}]})
    assert cluster_map.leader_of(("1", "2", 3)) == cluster_map.leader_of(("name:orders", "name:eu", 3)) == 1
    assert cluster_map.leader_of(("1", "name:eu", 3)) == 1
    assert cluster_map.leader_of(("1", "4", 1)) == 2
    assert cluster_map.leader_of(("name:None", "name:None", 1)) is None
    assert cluster_map.address(1, "iggy_tcp") == "127.0.0.1:8091" and cluster_map.address(2, "iggy_tcp") is None
