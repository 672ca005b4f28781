"""How a node applies what its etcd watch delivers (``ClusterNode._apply_batch``), with a
stand-in core (this module's unit test): a batch may span many revisions (a watch resumed
after a break), and a key deleted then put again must end up put."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

from rill.server.cluster.coordinator import KeyValue, WatchBatch, WatchEvent
from rill.server.cluster.memory_coordinator import MemoryCoordinator
from rill.server.cluster.node import ClusterNode
from rill.server.config import ClusterConfig
from rill.server.core.memory_catalog import MemoryCatalog


def node() -> ClusterNode:
    core = SimpleNamespace(state=SimpleNamespace(store=MemoryCatalog(), streams={}))
    settings = ClusterConfig(etcd_endpoints="http://x:1", node_id=2, name="w")
    return ClusterNode(settings, core, MemoryCoordinator())  # type: ignore[arg-type]


def member(cluster: ClusterNode, node_id: int, revision: int) -> KeyValue:
    value = json.dumps({"node_id": node_id, "listeners": {"peer": "127.0.0.1:1"}}).encode()
    return KeyValue(cluster.keys.member(node_id), value, revision, revision, 1, 7)


def test_a_member_that_left_and_joined_again_in_one_batch_is_a_member() -> None:
    cluster = node()
    joined = member(cluster, 3, 10)
    left = KeyValue(cluster.keys.member(3), b"", 0, 20)
    again = member(cluster, 3, 30)

    async def apply() -> None:
        await cluster._apply_batch(WatchBatch((WatchEvent("put", joined),), 10))
        await cluster._apply_batch(WatchBatch((WatchEvent("delete", left),
                                               WatchEvent("put", again)), 30))

    asyncio.run(apply())
    assert 3 in cluster.members and cluster.member_epochs[3] == 30
