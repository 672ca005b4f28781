"""``GET /cluster`` (routes/cluster.py) on an in-process server: the standalone answer, the
server-read rule, and a hand-set cluster view's members and partitions as JSON."""

from __future__ import annotations

import httpx
import pytest
from http_helpers import bearer

from cluster_servers import ClusterServer, StatusView, create_topic
from rill.server.core.cluster_view import NodeInfo


@pytest.fixture
def node(tmp_path):
    server = ClusterServer(tmp_path / "data", 1).start()
    yield server
    server.stop()


def test_a_standalone_server_says_so_with_empty_members_and_partitions(node):
    answer = httpx.get(f"{node.http_url}/cluster", headers=bearer(node.http_url))
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"mode": "standalone", "name": None, "node_id": None,
                             "controller_id": None, "members": [], "partitions": [],
                             "counters": None}


def test_the_cluster_needs_a_login_and_the_server_read_rule(node):
    root = bearer(node.http_url)
    assert httpx.get(f"{node.http_url}/cluster").status_code == 401
    made = httpx.post(f"{node.http_url}/users", headers=root,
                      json={"username": "plain", "password": "secret-1", "status": "active"})
    assert made.status_code in (200, 201), made.text
    plain = bearer(node.http_url, "plain", "secret-1")
    refused = httpx.get(f"{node.http_url}/cluster", headers=plain)
    assert refused.status_code == 403, refused.text
    reader = httpx.post(f"{node.http_url}/users", headers=root, json={
        "username": "reader", "password": "secret-1", "status": "active",
        "permissions": {"global": {"read_servers": True}}})
    assert reader.status_code in (200, 201), reader.text
    allowed = httpx.get(f"{node.http_url}/cluster", headers=bearer(node.http_url, "reader", "secret-1"))
    assert allowed.status_code == 200 and allowed.json()["mode"] == "standalone"


def test_a_cluster_node_answers_its_views_status(node):
    create_topic(node, "orders", "eu", 2)
    view = node.join([node.node_info(), NodeInfo(2, {"http": ("127.0.0.1", 9)})],
                     controller_id=2, name="prod", view=StatusView)
    node.place("orders", "eu", 1, 1, 4, (1, 2, 3), (1, 2))
    node.place("orders", "eu", 2, 2, 7, (2, 1), (2, 1))

    def lag_and_counters() -> None:
        view.followers[(1, 1, 1)] = [{"node_id": 2, "fetch_offset": 0, "lag_messages": 0,
                                      "lag_seconds": 0.0}]
        view.counters["isr_shrinks"] = 3

    node.call(lag_and_counters)
    status = httpx.get(f"{node.http_url}/cluster", headers=bearer(node.http_url)).json()
    assert (status["mode"], status["name"], status["node_id"], status["controller_id"]) == (
        "cluster", "prod", 1, 2)
    assert [member["node_id"] for member in status["members"]] == [1, 2]
    assert status["members"][0]["listeners"] == {
        "iggy_tcp": node.endpoint("tcp"), "http": node.endpoint("http"),
        "kafka": node.endpoint("kafka"), "tank": node.endpoint("tank")}
    assert status["members"][1]["listeners"] == {"http": "127.0.0.1:9"}
    first, second = status["partitions"]
    assert (first["stream"], first["topic"], first["partition_id"], first["leader"],
            first["leader_epoch"], first["replicas"], first["isr"], first["offline"],
            first["role"]) == ("orders", "eu", 1, 1, 4, [1, 2, 3], [1, 2], [3], "leader")
    assert first["followers"] == [{"node_id": 2, "fetch_offset": 0, "lag_messages": 0,
                                   "lag_seconds": 0.0}]
    assert (second["leader"], second["role"], "followers" in second) == (2, "follower", False)
    assert status["counters"]["isr_shrinks"] == 3
