"""Where the cluster's facts live in etcd: every key is built here.

Layout (``shared/spec/cluster-design.md`` §2.3), under ``/rill/<cluster name>/``:
``members/<node id>`` (a node's address, under its member lease; its create_revision is the
member epoch), ``controller/`` (the controller's election: one key per candidate, under its
lease; the oldest leads; its create_revision is the controller epoch).
"""

from __future__ import annotations


class ClusterKeys:
    def __init__(self, cluster_name: str) -> None:
        self.root = f"/rill/{cluster_name}/".encode()
        self.members = self.root + b"members/"
        self.controller = self.root + b"controller/"

    def member(self, node_id: int) -> bytes:
        return self.members + str(node_id).encode()
