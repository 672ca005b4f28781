"""Fixtures of the fault harness's tests (every test here runs on one worker: etcd members and
namespaces are heavy)."""

from __future__ import annotations

import os

import pytest

from cluster.harness import LocalCluster

def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__) + os.sep
    mine = [item for item in items if str(item.fspath).startswith(here)]
    for item in mine:  # one worker: the etcd members and namespaces of these tests are heavy
        item.add_marker(pytest.mark.xdist_group("etcd"))


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
