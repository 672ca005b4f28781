"""Fixtures for the HTTP API tests: a real server subprocess and httpx clients against it.

``http_server`` is shared by a module (tests use their own stream names); ``api`` is an httpx
client logged in as root; ``stream`` makes a fresh stream with a topic.
"""

from __future__ import annotations

from typing import Iterator

import httpx
import pytest
from http_helpers import bearer, unique

from server_process import RillProcess


@pytest.fixture(scope="module")
def http_server(tmp_path_factory) -> Iterator[RillProcess]:
    server = RillProcess(tmp_path_factory.mktemp("http") / "data").start()
    yield server
    server.kill()


@pytest.fixture
def api(http_server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=http_server.http_url, headers=bearer(http_server.http_url),
                      timeout=30) as client:
        yield client


@pytest.fixture
def anonymous(http_server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=http_server.http_url, timeout=30) as client:
        yield client


@pytest.fixture
def stream(api) -> dict:
    """A fresh stream with one 3-partition topic named "t"."""
    created = api.post("/streams", json={"name": unique("stream")})
    assert created.status_code == 200, created.text
    stream = created.json()
    topic = api.post(f"/streams/{stream['id']}/topics", json={"name": "t", "partitions_count": 3})
    assert topic.status_code == 200, topic.text
    return stream
