"""Fixtures of the Kafka listener tests: ``server``, one rill process per test module with the
Kafka listener on (the module's ``SERVER_ENV``, else ``kafka_link.KAFKA_ENV``; a module that
needs another start defines its own ``server``), and ``raw``, one plain socket to it."""

from __future__ import annotations

import pytest

from kafka_link import KAFKA_ENV, Raw
from server_process import RillProcess


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    env = getattr(request.module, "SERVER_ENV", KAFKA_ENV)
    name = request.module.__name__.rpartition(".")[2]
    process = RillProcess(tmp_path_factory.mktemp(name) / "data", env=env).start()
    yield process
    process.kill()


@pytest.fixture
def raw(server):
    link = Raw(server)
    yield link
    link.close()
