"""Shared fixtures of the core tests: ``root`` is a session as the root user on the module's
own ``server`` fixture (each module starts the server with the settings it needs)."""

from __future__ import annotations

import pytest

from server_process import session


@pytest.fixture
def root(server):
    with session(server) as client:
        yield client
