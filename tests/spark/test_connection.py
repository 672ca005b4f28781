"""Connections from Spark processes: the pool, failover along the 'servers' list, and the
messages that name the option to fix."""

from __future__ import annotations

import pytest

from pyspark_rill.connection import RillConnectionError, close_all, connect
from pyspark_rill.options import ConnectionOptions, RillOptionError


def test_the_first_server_that_answers_is_used_and_pooled(rill) -> None:
    options = ConnectionOptions(f"127.0.0.1:1,{rill.address}", "tcp", "iggy", "iggy", None)
    client = connect(options)
    assert client.get_stream("no such stream") is None  # logged in
    assert connect(options) is client
    close_all()
    assert connect(options) is not client
    close_all()


def test_unreachable_servers_and_bad_credentials_name_the_option(rill) -> None:
    with pytest.raises(RillConnectionError, match="option 'servers': cannot reach a rill "
                                                  "server at 127.0.0.1:1,127.0.0.1:2"):
        connect(ConnectionOptions("127.0.0.1:1,127.0.0.1:2", "tcp", "iggy", "iggy", None))
    with pytest.raises(RillOptionError, match="'username'/'password' or 'token'"):
        connect(ConnectionOptions(rill.address, "tcp", "iggy", "wrong", None))
