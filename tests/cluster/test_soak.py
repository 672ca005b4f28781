"""The soak's nemesis loop: its whole pipeline (topic, load, fault, failover time, recovery,
final read, replica dump, checker) on one standalone node, where "failover" is the same node
answering again; and the bounded soak on a real 3-node cluster (a kill, a pause and an
isolation of a leader: the checker finds nothing)."""

from __future__ import annotations

import pytest

from cluster.soak import run_soak


def test_the_soak_loop_runs_its_pipeline_on_one_standalone_node(local_cluster, tmp_path):
    cluster = local_cluster(size=1, cluster=False)
    result = run_soak(cluster, tmp_path / "soak", ["kill", "pause"], pause_seconds=1, settle=0.5,
                      failover_limit=3)
    print("\n".join(result.lines()))
    assert [(cycle.kind, cycle.victim, cycle.partitions) for cycle in result.cycles] == \
        [("kill", cycle.victim, [0, 1, 2]) for cycle in result.cycles[:1]] + \
        [("pause", result.cycles[1].victim, [0, 1, 2])]
    assert all(cycle.failover is not None for cycle in result.cycles)
    assert result.cycles[0].failover >= 3  # no other node: the restarted one acknowledged
    assert result.cycles[1].failover >= 1  # nothing acknowledged while it was stopped
    assert result.report is not None and result.report.valid, result.report.summary()
    assert result.client_errors == []
    assert result.report.acknowledged > 50
    for name in ("history.jsonl", "final.json", "replicas.json", "report.json"):
        assert (tmp_path / "soak" / name).stat().st_size > 0


@pytest.mark.slow
def test_a_bounded_soak_on_three_nodes_loses_nothing(local_cluster, tmp_path):
    cluster = local_cluster(size=3)
    result = run_soak(cluster, tmp_path / "soak", ["kill", "pause", "kill-controller", "kill-machine"])
    print("\n".join(result.lines()))
    assert result.report is not None and result.report.valid, result.report.summary()
    assert result.client_errors == []
    assert all(cycle.failover is not None for cycle in result.cycles), result.lines()
    assert all(cycle.victim for cycle in result.cycles)


@pytest.mark.slow
def test_a_bounded_soak_with_an_isolated_leader_loses_nothing(local_cluster, tmp_path):
    cluster = local_cluster(size=3, mode="namespaces")
    result = run_soak(cluster, tmp_path / "soak", ["isolate", "kill"])
    print("\n".join(result.lines()))
    assert result.report is not None and result.report.valid, result.report.summary()
    assert result.client_errors == []
    assert all(cycle.failover is not None for cycle in result.cycles), result.lines()
