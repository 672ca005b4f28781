"""The checks a node makes before it starts in a cluster.

Owns: ``check_node_can_join`` (etcd reachable and the node id not live elsewhere) and the
one-line refusal it raises (``ClusterStartRefused``; the app prints it as "rill: cannot start:
..."). A node id is live when its member key exists under a lease that has time left: that
key exists only while the node holding it renews the lease (``keys.ClusterKeys.member``).
"""

from __future__ import annotations

import json

from rill.server.cluster.coordinator import (
    Coordinator,
    CoordinatorUnavailable,
    NoLeader,
)
from rill.server.cluster.keys import ClusterKeys


class ClusterStartRefused(Exception):
    """A cluster node cannot start; the message is the one line that says why."""


async def check_node_id_free(coordinator: Coordinator, cluster_name: str, node_id: int,
                             where: str = "etcd") -> None:
    """Raise ``ClusterStartRefused`` when the coordinator cannot be reached (``where`` names it)
    or ``node_id``'s member key is held by a live lease."""
    key = ClusterKeys(cluster_name).member(node_id)
    try:
        member = await coordinator.get(key)
        remaining = await coordinator.lease_time_to_live(member.lease) if member and member.lease else -1
    except NoLeader:
        raise ClusterStartRefused(f"{where} has no leader (a majority of its members is "
                                  f"unreachable): cannot join cluster {cluster_name!r}") from None
    except CoordinatorUnavailable:
        raise ClusterStartRefused(f"{where} is unreachable: cannot join cluster "
                                  f"{cluster_name!r} ([cluster] etcd_endpoints, "
                                  f"RILL_CLUSTER_ETCD_ENDPOINTS)") from None
    if member is None or remaining <= 0:
        return
    try:
        address = json.loads(member.value).get("peer_address", "")
    except (ValueError, AttributeError):
        address = ""
    at = f" at {address}" if address else ""
    raise ClusterStartRefused(
        f"node id {node_id} is live elsewhere{at}: its member key {key.decode()} is held by "
        f"lease {member.lease:x} ({remaining} s left); give this node another [cluster] "
        f"node_id (RILL_CLUSTER_NODE_ID), or stop the other one")


async def check_node_can_join(endpoints: list[str], cluster_name: str, node_id: int) -> None:
    """``check_node_id_free`` on the etcd cluster at ``endpoints``."""
    from rill.server.cluster.etcd_gateway import EtcdGateway

    coordinator = EtcdGateway(endpoints)
    try:
        await check_node_id_free(coordinator, cluster_name, node_id,
                                 where=f"etcd at {', '.join(endpoints)}")
    finally:
        await coordinator.close()
