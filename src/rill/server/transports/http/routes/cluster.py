"""``GET /cluster``: the cluster as this node sees it (a rill extension of the HTTP API), what
``rill cluster status``, the web console's Cluster page and the SDK's leader routing read.

Owns: the route and the standalone answer. Needs the server-read rule (global ``read_servers``
or ``manage_servers``: it names every node's addresses). In a cluster the answer is
``{"mode": "cluster"}`` joined to ``ClusterView.status()`` (``core.cluster_view``: name, this
node's id, the controller, the live members with their listeners, every partition's leader,
epoch, replicas, ISR and offline replicas, the follower lag of the partitions this node leads,
and the counters). A standalone server answers the same keys, empty::

    {"mode": "standalone", "name": null, "node_id": null, "controller_id": null,
     "members": [], "partitions": [], "counters": null}

so a reader tells the two apart by ``mode`` and routes everything to the one node it knows.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from rill.server.transports.http.auth import session_of
from rill.server.transports.http.routes.common import SECURED, context, replies

router = APIRouter(tags=["cluster"], dependencies=SECURED)

STANDALONE: dict[str, Any] = {"mode": "standalone", "name": None, "node_id": None,
                              "controller_id": None, "members": [], "partitions": [],
                              "counters": None}


def cluster_status(core: Any) -> dict[str, Any]:
    """The body of ``GET /cluster`` (no permission check)."""
    cluster = core.broker.cluster
    if cluster is None:
        return {key: (list(value) if isinstance(value, list) else value)
                for key, value in STANDALONE.items()}
    return {"mode": "cluster", **cluster.status()}


@router.get("/cluster", summary="Members, controller and every partition's leader, epoch, ISR "
                                "and follower lag; standalone: mode \"standalone\" "
                                "(read_servers; rill extension)",
            responses=replies(body=False))
async def get_cluster(request: Request) -> dict[str, Any]:
    core = context(request).core
    core.broker.check_server_access(session_of(request))
    return cluster_status(core)
