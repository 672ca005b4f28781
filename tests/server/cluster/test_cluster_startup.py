"""A cluster node's start-up check: etcd must answer and the node id must not be live
elsewhere (a member key held by a live lease); ``rill serve`` refuses in one line otherwise."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys

import pytest

from rill.bench.ports import free_ports
from rill.server.cluster.etcd_gateway import EtcdGateway
from rill.server.cluster.keys import ClusterKeys
from rill.server.cluster.memory_coordinator import MemoryCoordinator
from rill.server.cluster.startup import (
    ClusterStartRefused,
    check_node_can_join,
    check_node_id_free,
)

_names = itertools.count()


def cluster_name() -> str:
    return f"startup-{os.getpid()}-{next(_names)}"


def test_a_node_id_held_by_a_live_lease_is_refused(coordinated):
    async def body(env):
        client, name = env.client(), cluster_name()
        await check_node_id_free(client, name, 7)
        grant = await client.grant_lease(10)
        member = ClusterKeys(name).member(7)
        await client.put(member, json.dumps({"peer_address": "127.0.0.1:18093"}).encode(), grant.id)
        with pytest.raises(ClusterStartRefused) as refused:
            await check_node_id_free(client, name, 7)
        assert str(refused.value).startswith(
            f"node id 7 is live elsewhere at 127.0.0.1:18093: its member key /rill/{name}/members/7 "
            f"is held by lease {grant.id:x} (")
        await check_node_id_free(client, name, 8)
        await check_node_id_free(client, cluster_name(), 7)  # another cluster's node 7
        await client.revoke_lease(grant.id)
        await check_node_id_free(client, name, 7)
        await client.put(member, b"{}")  # a member key under no lease is nobody's
        await check_node_id_free(client, name, 7)

    coordinated(body)


def test_etcd_unreachable_or_without_a_leader_is_refused():
    endpoint = f"http://127.0.0.1:{free_ports(1)[0]}"  # nothing listens there
    with pytest.raises(ClusterStartRefused, match=(
            rf"^etcd at {endpoint} is unreachable: cannot join cluster 'c' \(\[cluster\] "
            rf"etcd_endpoints, RILL_CLUSTER_ETCD_ENDPOINTS\)$")):
        asyncio.run(check_node_can_join([endpoint], "c", 1))

    async def leaderless():
        twin = MemoryCoordinator()
        twin.set_leader(False)
        await check_node_id_free(twin, "c", 1)

    with pytest.raises(ClusterStartRefused, match=r"^etcd has no leader \(a majority"):
        asyncio.run(leaderless())


def serve(tmp_path, endpoints: str, node_id: int) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, RILL_QUIC_ENABLED="false", RILL_HTTP_ENABLED="false",
               RILL_CLUSTER_ETCD_ENDPOINTS=endpoints, RILL_CLUSTER_NODE_ID=str(node_id))
    return subprocess.run([sys.executable, "-m", "rill", "serve", "--data-dir", str(tmp_path / "data"),
                           "--tcp-address", "127.0.0.1:0"],
                          check=False, capture_output=True, text=True, env=env, timeout=60)


def test_rill_serve_refuses_to_start_when_etcd_is_unreachable(tmp_path):
    endpoint = f"http://127.0.0.1:{free_ports(1)[0]}"
    refused = serve(tmp_path, endpoint, 1)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        f"rill: cannot start: etcd at {endpoint} is unreachable: cannot join cluster 'rill' "
        f"([cluster] etcd_endpoints, RILL_CLUSTER_ETCD_ENDPOINTS)")
    assert not (tmp_path / "data").exists()  # refused before the data directory is touched


def test_rill_serve_refuses_a_node_id_live_elsewhere_and_starts_with_a_free_one(etcd, tmp_path,
                                                                             rill_factory):
    endpoints = ",".join(etcd.endpoints)

    async def hold_member_key() -> int:
        client = EtcdGateway(etcd.endpoints)
        try:
            grant = await client.grant_lease(30)
            await client.put(ClusterKeys("rill").member(1), b'{"peer_address": "127.0.0.1:8093"}',
                             grant.id)
            return grant.id
        finally:
            await client.close()

    async def revoke(lease: int) -> None:
        client = EtcdGateway(etcd.endpoints)
        try:
            await client.revoke_lease(lease)
        finally:
            await client.close()

    lease = asyncio.run(hold_member_key())
    try:
        refused = serve(tmp_path, endpoints, 1)
        assert refused.returncode == 1
        assert refused.stderr.strip().splitlines()[-1].startswith(
            "rill: cannot start: node id 1 is live elsewhere at 127.0.0.1:8093: its member key "
            f"/rill/rill/members/1 is held by lease {lease:x} (")
        server = rill_factory({"RILL_CLUSTER_ETCD_ENDPOINTS": endpoints,
                               "RILL_CLUSTER_NODE_ID": "2"}).start()
        assert server.process.poll() is None
    finally:
        asyncio.run(revoke(lease))
