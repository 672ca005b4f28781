"""``MessageService.append`` on a partition of a cluster (``core.messages``), on a real
in-process server whose cluster view is set by hand (``cluster_servers``): an append that
waited for another one in flight is checked against the leadership after that wait, so a
step-down meanwhile refuses it and writes nothing (it would land in a follower's log, among
the new leader's records)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading

import pytest

from cluster_servers import start_cluster
from rill import errors
from rill.protocol.iggy.messages import encode_messages
from rill.server.core.broker import PartitionRef
from rill.server.core.cluster_view import ACKS_LEADER, NodeInfo
from rill.server.core.types import TopicSpec
from rill.server.storage import durability

NODE_2 = NodeInfo(2, {"kafka": ("127.0.0.2", 19092)})


@pytest.fixture
def node(tmp_path):
    [server] = start_cluster(tmp_path, 1, controller_id=1, extra_nodes=(NODE_2,))
    yield server
    server.stop()


def test_an_append_queued_behind_one_in_flight_is_refused_if_this_node_stepped_down_meanwhile(
        node) -> None:
    broker = node.server.core.broker

    async def create() -> None:
        session = broker.connect("127.0.0.1:1", "tcp")
        broker.authenticate_as(session, 1)
        await broker.create_namespace(session, "s")
        await broker.create_topic(session, 1, TopicSpec("t", partitions_count=1))

    node.run(create())
    node.place("s", "t", 1, 1, 1, (1, 2), (1,), 1)
    partition = node.partition("s", "t", 1)
    log = partition.log
    log.settings = dataclasses.replace(log.settings, append_threads="always",
                                       append_thread_min_size=1)  # every append in a worker
    release = threading.Event()

    async def scenario() -> tuple[object, BaseException | None]:
        session = broker.connect("127.0.0.1:2", "tcp")
        broker.authenticate_as(session, 1)
        ref = PartitionRef("s", "t", 1)
        # hold every append worker, so that the first append stays in flight
        executor = log._durability.append_executor()
        held = [executor.submit(release.wait, 30) for _ in range(durability.APPEND_THREADS)]
        first = asyncio.ensure_future(broker.append(session, ref, encode_messages([b"first"]),
                                                    acks=ACKS_LEADER))
        for _ in range(50):
            await asyncio.sleep(0)
        second = asyncio.ensure_future(broker.append(session, ref, encode_messages([b"second"]),
                                                     acks=ACKS_LEADER))
        for _ in range(50):
            await asyncio.sleep(0)
        assert not first.done() and not second.done()
        node.view.place(partition, 2, 2, (1, 2), (1, 2), 1)  # node 2 leads now
        release.set()
        for future in held:
            await asyncio.wrap_future(future)
        result = await first  # started while this node led: written
        try:
            await second
        except BaseException as error:  # noqa: BLE001 -- the assertion below names it
            return result, error
        return result, None

    try:
        first, refused = node.run(scenario())
    finally:
        release.set()
    assert (first.first_offset, first.last_offset) == (0, 0)
    assert isinstance(refused, errors.NotLeaderForPartition), refused
    assert log.next_offset == 1  # the refused append wrote nothing
