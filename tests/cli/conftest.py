"""The ``cli`` fixture: a live server (``rill_server``) and a private RILL_HOME (see helpers)."""

from __future__ import annotations

import pytest

from .helpers import Cli


@pytest.fixture
def cli(rill_server, tmp_path) -> Cli:
    return Cli(rill_server.address, tmp_path / "rill-home")
