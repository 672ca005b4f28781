"""Shared fixtures: a real rill server on port 0 in a temporary data directory."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# Hypothesis' per-example deadline (200 ms) is a timed assertion: on a loaded 2-core machine a
# correct example can take longer, which failed runs for nothing. The properties stay; the
# clock goes. (A test may still set its own settings.)
settings.register_profile("rill", deadline=None)
settings.load_profile("rill")

sys.path.insert(0, str(Path(__file__).parent))

# pytest-xdist's workers set COLUMNS and LINES (80 x 24); the CLIs the tests start would size
# their tables by them, unlike under a plain pytest run: the same output either way.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

from server_process import RillProcess  # noqa: E402

SPARK_TESTS = Path(__file__).parent / "spark"


def pytest_collection_modifyitems(config, items):
    """``./run test`` runs the suite on two pytest-xdist workers (``--dist loadgroup``). The
    Spark tests share one Spark session and build one jar, so they stay together on one worker;
    they go first, so that their ten minutes overlap the rest instead of ending the run alone."""
    spark = [item for item in items if SPARK_TESTS in Path(str(item.fspath)).parents]
    if not spark:
        return
    for item in spark:
        item.add_marker(pytest.mark.xdist_group("spark"))
    chosen = set(map(id, spark))
    items[:] = spark + [item for item in items if id(item) not in chosen]


@pytest.fixture
def rill_server(tmp_path):
    """A running server (fsync interval), stopped after the test."""
    server = RillProcess(tmp_path / "data").start()
    yield server
    server.kill()


@pytest.fixture
def rill_factory(tmp_path):
    """Build servers with extra environment (e.g. RILL_SYSTEM_FSYNC=always); all killed after."""
    servers: list[RillProcess] = []

    def make(env: dict[str, str] | None = None, data_dir: Path | None = None) -> RillProcess:
        server = RillProcess(data_dir or tmp_path / f"data{len(servers)}", env=env)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.kill()
