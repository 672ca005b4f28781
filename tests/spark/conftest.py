"""Fixtures of the Spark connector tests: one rill server and one local SparkSession per run.

Spark is expensive to start (about 10 s on 2 cores), so the whole ``tests/spark`` package
shares one session, ``local[2,3]`` (two cores; up to three attempts per task, so task retries
happen as on a cluster), and one rill server; each test works in its own stream. Python
workers run this very interpreter (``PYSPARK_PYTHON``), where rill and pyspark_rill are
installed; the ``rill`` format is found by Spark's discovery of ``pyspark_*`` modules.

The session is built with ``pyspark_rill.configure``, so the JVM implementation (built from
its sources here when needed) is on it; tests that take the ``implementation`` fixture run on
both implementations.

Java 17 or newer must be installed (README, "Spark connector"); without it these tests fail
with that message. Deselect them with ``-m "not spark"``.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pyspark_rill
from pyspark_rill.session import JAR
from rill.client import Client

sys.path.insert(0, str(Path(__file__).parent.parent))

from server_process import RillProcess  # noqa: E402

_names = itertools.count(1)


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java") or (home and Path(home, "bin", "java").exists()))


@pytest.fixture(scope="session")
def rill(tmp_path_factory):
    """A rill server for the whole Spark test session."""
    server = RillProcess(tmp_path_factory.mktemp("rill-spark") / "data").start()
    yield server
    server.kill()


@pytest.fixture(scope="session")
def spark():
    assert java_available(), (
        "the Spark connector tests need Java 17+ (java on PATH or JAVA_HOME): see README, "
        "'Spark connector'; or deselect them with -m 'not spark'")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # the JVM implementation, built from the sources under test (a no-op when up to date)
    subprocess.run([str(JAR.parent.parent / "java" / "build.sh"), sys.executable], check=True)
    from pyspark.sql import SparkSession

    session = (
        pyspark_rill.configure(SparkSession.builder.master("local[2,3]"))
        .appName("rill-connector-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")  # nothing listens beyond loopback
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(params=["python", "jvm"])
def implementation(request, spark) -> dict[str, str]:
    """The option that picks the implementation of a read or a write: the tests that take it
    run on both."""
    if request.param == "jvm":
        assert JAR.is_file(), (
            f"the JVM connector was not built ({JAR}): it needs a JDK's javac (see README, "
            "'Spark connector')")
    return {"implementation": request.param}


def scan_of(df) -> str:
    """Which implementation a DataFrame's batch scan runs on (from Spark's physical plan)."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return "jvm" if "rill (JVM reader)" in plan else "python"


def writer_of(spark) -> str:
    """Which implementation wrote in the session's last batch write (from its physical plan)."""
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    for index in range(executions.size() - 1, -1, -1):
        plan = executions.apply(index).physicalPlanDescription()
        if "AppendData" in plan:
            return "jvm" if "rill (JVM writer)" in plan else "python"
    raise AssertionError("no write in this session")


@pytest.fixture
def admin(rill):
    with Client(rill.address) as client:
        client.login_user("iggy", "iggy")
        yield client


@pytest.fixture
def stream(admin) -> str:
    """A fresh stream name for this test (the session's server is shared)."""
    name = f"test{next(_names)}"
    admin.create_stream(name)
    return name


@pytest.fixture
def options(rill, stream) -> dict[str, str]:
    """Connection options plus this test's stream."""
    return {"servers": rill.address, "username": "iggy", "password": "iggy", "stream": stream}
