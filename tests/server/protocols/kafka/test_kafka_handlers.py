"""Kafka's handler table (``dispatch.HANDLERS``) is declared, not assembled by imports: whichever
API module a process imports first, the table names every API served, each by its module's
coroutine (the modules import ``common``, never the table: pyproject's import contract)."""

from __future__ import annotations

import subprocess
import sys

import pytest

MODULES = ("data", "group_apis", "configs", "producers", "sasl", "common", "dispatch", "handler")

CHECK = """
import importlib, inspect, sys
first = importlib.import_module("rill.server.protocols.kafka." + sys.argv[1])
from rill.protocol.kafka import apis
from rill.server.protocols.kafka import dispatch, sasl
assert set(dispatch.CLUSTER_SERVED) == set(dispatch.HANDLERS) | sasl.APIS, dispatch.SERVED
assert set(dispatch.SERVED) == set(dispatch.CLUSTER_SERVED) - dispatch.CLUSTER_ONLY
assert not set(dispatch.HANDLERS) & sasl.APIS
for key, handler in sorted(dispatch.HANDLERS.items()):
    assert inspect.iscoroutinefunction(handler), key
    print(key, apis.api_name(key), handler.__module__.rpartition(".")[2])
"""


def table(first: str) -> str:
    done = subprocess.run([sys.executable, "-c", CHECK, first], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("first", MODULES)
def test_the_table_is_whole_whichever_module_is_imported_first(first):
    assert table(first) == table("handler")


def test_each_api_is_served_by_the_module_of_its_family():
    rows = dict((name, module) for _, name, module in
                (line.split() for line in table("handler").splitlines()))
    assert rows["Produce"] == rows["Fetch"] == rows["ListOffsets"] == "data"
    assert rows["JoinGroup"] == rows["OffsetCommit"] == "group_apis"
    assert rows["DescribeConfigs"] == "configs" and rows["InitProducerId"] == "producers"
    assert rows["Metadata"] == rows["CreateTopics"] == rows["ApiVersions"] == "dispatch"
