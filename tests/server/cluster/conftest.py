"""Fixtures of the cluster tests: one real 3-member etcd cluster per test session (started on
first use, stopped by pid at the end; tests that break members heal it afterwards), and
``coordinated``: one test body run on the memory twin and on etcd."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from etcd_cluster import EtcdCluster

from rill.server.cluster.coordinator import Coordinator
from rill.server.cluster.etcd_gateway import EtcdGateway
from rill.server.cluster.memory_coordinator import MemoryCoordinator

_prefixes = itertools.count()


@pytest.fixture(scope="session")
def etcd_cluster(tmp_path_factory):
    cluster = EtcdCluster(tmp_path_factory.mktemp("etcd")).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def etcd(etcd_cluster):
    """The session's etcd cluster, whole and with a leader when the test starts and ends."""
    etcd_cluster.heal()
    yield etcd_cluster
    etcd_cluster.heal()


@pytest.fixture
def cluster(etcd, tmp_path, request):
    """Three real rill nodes on the session's etcd, under a cluster name of their own (the test
    module's and a count), stopped by pid at the end."""
    from rill_cluster import RillCluster

    name = request.module.__name__.rpartition(".")[2].removeprefix("test_").replace("_", "-")
    nodes = RillCluster(etcd, tmp_path, f"{name}-{next(_prefixes)}-{time.time_ns()}")
    nodes.start()
    yield nodes
    nodes.stop()


@dataclass
class Env:
    """What a test body needs, the same on both implementations."""

    kind: str  # "memory" | "etcd"
    prefix: bytes  # unique to the test: its keys live under it
    cluster: EtcdCluster | None = None
    twin: MemoryCoordinator | None = None
    opened: list[Coordinator] = field(default_factory=list)

    def client(self, endpoints: list[str] | None = None) -> Coordinator:
        """A coordinator (etcd: a new client; the twin: the one store every client shares)."""
        if self.twin is not None:
            return self.twin
        assert self.cluster is not None
        client = EtcdGateway(endpoints or self.cluster.endpoints)
        self.opened.append(client)
        return client

    async def pass_time(self, seconds: float) -> None:
        """Let ``seconds`` go by (the twin: its clock moves; etcd: real time)."""
        if self.twin is not None:
            await self.twin.advance(seconds)
        else:
            await asyncio.sleep(seconds)

    async def close(self) -> None:
        for client in self.opened:
            await client.close()


Body = Callable[[Env], Awaitable[None]]


@pytest.fixture(params=["memory", "etcd"])
def coordinated(request) -> Callable[[Body], None]:
    """``coordinated(body)`` runs ``body(env)`` in a new event loop on the twin or on etcd."""
    kind = request.param
    cluster = request.getfixturevalue("etcd") if kind == "etcd" else None
    prefix = f"/test/{os.getpid()}/{next(_prefixes)}/".encode()

    def run(body: Body) -> None:
        async def main() -> None:
            env = Env(kind, prefix, cluster, MemoryCoordinator() if kind == "memory" else None)
            try:
                await body(env)
            finally:
                await env.close()

        asyncio.run(main())

    return run


def pytest_collection_modifyitems(config, items):
    """One worker runs every test of this directory: the session's etcd cluster starts once."""
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here + os.sep):
            item.add_marker(pytest.mark.xdist_group("etcd"))
