"""``rill cluster status`` (cli/cluster.py) against two in-process nodes with hand-set cluster
views: members with the controller marked, every partition's leader, epoch, replicas and ISR,
and each follower's lag asked of the partition's leader; a member that does not answer, a
node that does not answer, and a standalone server are each one error line."""

from __future__ import annotations


import pytest

from cluster_servers import ClusterServer, cluster_of, create_topic, place
from rill.bench.ports import free_port
from rill.server.core.cluster_view import NodeInfo

from .helpers import Cli, assert_error_line

LOGIN = {"RILL_USERNAME": "iggy", "RILL_PASSWORD": "iggy"}  # the same user on every node


@pytest.fixture
def nodes(tmp_path):
    started = [ClusterServer(tmp_path / f"node{index}", index).start() for index in (1, 2)]
    yield started
    for node in started:
        node.stop()


def set_up(nodes, others=()):
    for node in nodes:
        create_topic(node, "orders", "eu", 2)
    views = cluster_of(nodes, controller_id=2, name="prod", extra_nodes=others)
    place(nodes, "orders", "eu", 1, 1, 4, (1, 2), (1, 2))
    place(nodes, "orders", "eu", 2, 2, 9, (2, 1), (2,))
    views[0].followers[(1, 1, 1)] = [{"node_id": 2, "fetch_offset": 10, "lag_messages": 3,
                                      "lag_seconds": 0.5}]
    views[1].followers[(1, 1, 2)] = [{"node_id": 1, "fetch_offset": 2, "lag_messages": 7,
                                      "lag_seconds": 2.0}]
    return views


def test_status_as_json_takes_each_followers_lag_from_the_partitions_leader(nodes, tmp_path):
    set_up(nodes)
    cli = Cli(nodes[0].endpoint("tcp"), tmp_path / "home")
    status = cli.run("--json", "cluster", "status", "--http", nodes[0].endpoint("http"),
                     login=False, **LOGIN).json()
    assert (status["name"], status["node_id"], status["controller_id"]) == ("prod", 1, 2)
    assert [member["node_id"] for member in status["members"]] == [1, 2]
    rows = {row["partition_id"]: row for row in status["partitions"]}
    assert (rows[1]["leader"], rows[1]["leader_epoch"], rows[1]["replicas"], rows[1]["isr"]) == (
        1, 4, [1, 2], [1, 2])
    assert (rows[2]["leader"], rows[2]["leader_epoch"], rows[2]["isr"]) == (2, 9, [2])
    assert rows[1]["followers"] == [{"node_id": 2, "fetch_offset": 10, "lag_messages": 3,
                                     "lag_seconds": 0.5}]
    # known only on node 2, which leads partition 2: asked there
    assert rows[2]["followers"] == [{"node_id": 1, "fetch_offset": 2, "lag_messages": 7,
                                     "lag_seconds": 2.0}]
    assert status["unreachable"] == []


def test_status_as_tables_over_the_http_transport(nodes, tmp_path):
    set_up(nodes)
    cli = Cli(nodes[1].endpoint("http"), tmp_path / "home")
    out = cli.run("--transport", "http", "cluster", "status", login=False, **LOGIN,
                  COLUMNS="160").stdout
    assert "prod" in out and "node 2 at " + nodes[1].endpoint("http") in out
    assert "2 (controller)" in out
    lines = [line for line in out.splitlines() if "orders" in line]
    assert len(lines) == 2
    assert "1:7 (2.0s)" in lines[1] and "2:3 (0.5s)" in lines[0]
    assert [cell.strip() for cell in lines[1].split("│")[1:-1]][:7] == [
        "orders", "eu", "2", "2", "9", "2,1", "2"]


def test_a_member_that_does_not_answer_is_one_line_and_its_lag_unknown(nodes, tmp_path):
    silent = NodeInfo(3, {"http": ("127.0.0.1", free_port())})
    set_up(nodes, others=(silent,))
    cli = Cli(nodes[0].endpoint("tcp"), tmp_path / "home")
    result = cli.run("--json", "cluster", "status", "--http", nodes[0].endpoint("http"),
                     login=False, ok=False, **LOGIN)
    assert_error_line(result, "node 3 at 127.0.0.1:", exit_code=1)
    assert "did not answer" in result.error_lines[0]
    import json

    status = json.loads(result.stdout)
    assert [node["node_id"] for node in status["unreachable"]] == [3]
    assert len(status["partitions"]) == 2


def test_a_node_that_does_not_answer_and_a_standalone_server_are_one_line(nodes, tmp_path):
    cli = Cli(nodes[0].endpoint("tcp"), tmp_path / "home")
    down = cli.run("cluster", "status", "--http", f"127.0.0.1:{free_port()}", login=False,
                   ok=False, **LOGIN)
    assert_error_line(down, "127.0.0.1", exit_code=3)
    standalone = cli.run("cluster", "status", "--http", nodes[0].endpoint("http"), login=False,
                         ok=False, **LOGIN)
    assert_error_line(standalone, "runs standalone", exit_code=1)


def test_the_http_api_asked_is_the_option_else_the_http_address_else_port_3000():
    from rill.cli.cluster import http_address

    tcp = {"address": "10.0.0.7:8090", "transport": "tcp"}
    assert http_address(tcp, "10.0.0.9:3005") == "10.0.0.9:3005"
    assert http_address(tcp, None) == "10.0.0.7:3000"
    assert http_address({"address": "10.0.0.7:3001", "transport": "http"}, None) == "10.0.0.7:3001"


def test_a_partition_whose_topic_the_node_has_not_applied_yet_shows_its_ids():
    from rill.cli.cluster import _name

    row = {"stream_id": 3, "topic_id": 7, "stream": None, "topic": None}
    assert (_name(row, "stream"), _name(row, "topic")) == (3, 7)
    assert _name({**row, "stream": "orders"}, "stream") == "orders"
