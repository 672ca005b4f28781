"""Fixtures of the fault harness's tests, and the ``cluster_runtime`` marker: tests that need
a real replicated cluster (the cluster runtime of issue 30) run only when
``RILL_CLUSTER_RUNTIME=1``; otherwise they are deselected (listed as such, never failing)."""

from __future__ import annotations

import os

import pytest

from cluster.harness import LocalCluster

RUNTIME_READY = os.environ.get("RILL_CLUSTER_RUNTIME", "").strip().lower() in ("1", "true", "yes", "on")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "cluster_runtime: needs nodes that replicate (issue 30's runtime); runs with "
                   "RILL_CLUSTER_RUNTIME=1")


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__) + os.sep
    mine = [item for item in items if str(item.fspath).startswith(here)]
    for item in mine:  # one worker: the etcd members and namespaces of these tests are heavy
        item.add_marker(pytest.mark.xdist_group("etcd"))
    if RUNTIME_READY:
        return
    waiting = [item for item in mine if item.get_closest_marker("cluster_runtime")]
    if waiting:
        config.hook.pytest_deselected(items=waiting)
        chosen = set(map(id, waiting))
        items[:] = [item for item in items if id(item) not in chosen]


@pytest.fixture
def local_cluster(tmp_path):
    """``local_cluster(size=3, mode="loopback", cluster=True, ...)`` -> a started LocalCluster;
    every one made is closed (processes killed by pid, namespaces removed) however the test ends."""
    made: list[LocalCluster] = []

    def make(**options) -> LocalCluster:
        cluster = LocalCluster(tmp_path / f"cluster{len(made)}", **options)
        made.append(cluster)
        return cluster.start()

    yield make
    for cluster in made:
        cluster.close()
