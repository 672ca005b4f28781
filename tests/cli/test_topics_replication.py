"""``rill topic create --replication-factor N`` and the HTTP create-topic body's
``replication_factor``: the number reaches the core's ``TopicSpec.replication_factor`` (what a
cluster places replicas by) and comes back in the topic's details."""

from __future__ import annotations

import httpx
import pytest

from cluster_servers import ClusterServer
from rill.server.core.types import TopicSpec

from .helpers import Cli

LOGIN = {"RILL_USERNAME": "iggy", "RILL_PASSWORD": "iggy"}


@pytest.fixture
def node(tmp_path):
    server = ClusterServer(tmp_path / "data", 1).start()
    specs: list[TopicSpec] = []
    catalog = server.core.broker.catalog
    create_topic = catalog.create_topic

    async def noting(session, stream, spec):
        specs.append(spec)
        return await create_topic(session, stream, spec)

    catalog.create_topic = noting
    server.specs = specs
    yield server
    server.stop()


def test_the_cli_option_reaches_the_topic_spec(node, tmp_path):
    cli = Cli(node.endpoint("tcp"), tmp_path / "home")
    cli.run("stream", "create", "orders", login=False, **LOGIN)
    created = cli.run("--json", "topic", "create", "orders", "eu", "--partitions", "3",
                      "--replication-factor", "3", login=False, **LOGIN).json()
    assert [spec.replication_factor for spec in node.specs] == [3]
    assert created["replication_factor"] == 3
    shown = cli.run("--json", "topic", "get", "orders", "eu", login=False, **LOGIN).json()
    assert shown["replication_factor"] == 3
    cli.run("topic", "create", "orders", "us", login=False, **LOGIN)  # not given: 0, the default
    assert node.specs[-1].replication_factor == 0


def test_the_http_body_field_reaches_the_topic_spec(node):
    login = httpx.post(f"{node.http_url}/users/login", json={"username": "iggy", "password": "iggy"})
    headers = {"Authorization": f"Bearer {login.json()['access_token']['token']}"}
    stream = httpx.post(f"{node.http_url}/streams", headers=headers, json={"name": "orders"}).json()
    answer = httpx.post(f"{node.http_url}/streams/{stream['id']}/topics", headers=headers,
                        json={"name": "eu", "partitions_count": 2, "replication_factor": 2})
    assert answer.status_code == 200, answer.text
    assert [spec.replication_factor for spec in node.specs] == [2]
    assert answer.json()["replication_factor"] == 2
