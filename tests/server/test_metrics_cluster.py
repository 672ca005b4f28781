"""The cluster's metrics in ``/metrics`` (server/metrics.py ``cluster_lines``): none on a
standalone server; on a cluster node, read from its view at each scrape: members,
under-replicated partitions, the ISR/election/fencing counters and each follower's lag on
the partitions the node leads."""

from __future__ import annotations

import httpx
import pytest

from cluster_servers import ClusterServer, cluster_of, create_topic, place


@pytest.fixture
def node(tmp_path):
    server = ClusterServer(tmp_path / "data", 1).start()
    yield server
    server.stop()


def scrape(node) -> str:
    answer = httpx.get(f"{node.http_url}/metrics")
    assert answer.status_code == 200
    return answer.text


def samples(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def test_a_standalone_server_has_no_cluster_metrics(node):
    assert "rill_cluster_" not in scrape(node)


def test_cluster_metrics_follow_the_views_status_at_each_scrape(node):
    create_topic(node, "orders", "eu", 2)
    [view] = cluster_of([node])
    place([node], "orders", "eu", 1, 1, 3, (1, 2, 3), (1, 2))
    place([node], "orders", "eu", 2, 2, 5, (2, 1))  # led elsewhere: no lag here
    view.followers[(1, 1, 1)] = [
        {"node_id": 2, "fetch_offset": 40, "lag_messages": 2, "lag_seconds": 0.25},
        {"node_id": 3, "fetch_offset": 0, "lag_messages": 42, "lag_seconds": 9.5}]
    view.counters.update(under_replicated_partitions=1, isr_shrinks=4, isr_expands=3,
                         leader_elections=2, fenced_requests=7, replicas_emptied=5)
    text = scrape(node)
    for name, kind in (("rill_cluster_under_replicated_partitions", "gauge"),
                       ("rill_cluster_isr_shrinks_total", "counter"),
                       ("rill_cluster_replica_lag_messages", "gauge")):
        assert f"# TYPE {name} {kind}" in text
    found = samples(text)
    assert found["rill_cluster_members"] == 1
    assert found["rill_cluster_under_replicated_partitions"] == 1
    assert found["rill_cluster_isr_shrinks_total"] == 4
    assert found["rill_cluster_isr_expands_total"] == 3
    assert found["rill_cluster_leader_elections_total"] == 2
    assert found["rill_cluster_fenced_requests_total"] == 7
    assert found["rill_cluster_replicas_emptied_total"] == 5
    labels = 'stream="orders",topic="eu",partition="1",follower="{}"'
    assert found["rill_cluster_replica_lag_messages{%s}" % labels.format(2)] == 2
    assert found["rill_cluster_replica_lag_messages{%s}" % labels.format(3)] == 42
    assert found["rill_cluster_replica_lag_seconds{%s}" % labels.format(3)] == 9.5
    assert not any('partition="2"' in name for name in found if name.startswith("rill_cluster"))
    view.counters["isr_expands"] = 4  # read again at the next scrape
    assert samples(scrape(node))["rill_cluster_isr_expands_total"] == 4
