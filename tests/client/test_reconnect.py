"""Reconnect with re-login against a real server that restarts on the same port."""

from __future__ import annotations

import pytest

from rill import errors
from rill.client import Client, PollingStrategy


def test_client_reconnects_and_logs_in_again_after_a_server_restart(rill_factory):
    server = rill_factory().start()
    with Client(server.address, reconnect_interval=0.2, max_reconnect_attempts=50) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("s", stream_id=1)
        client.create_topic(1, "t")
        client.send_messages(1, 1, [b"before"], partitioning=1)
        server.kill()
        server.restart()
        # the next call reconnects and re-sends LOGIN_USER before it: no explicit login needed
        client.send_messages(1, 1, [b"after"], partitioning=1)
        polled = client.poll_messages(1, 1, partition_id=1, strategy=PollingStrategy.first())
        assert [m.payload for m in polled.messages] == [b"before", b"after"]


def test_no_reconnect_when_disabled(rill_factory):
    server = rill_factory().start()
    with Client(server.address, reconnect=False) as client:
        client.ping()
        server.kill()
        with pytest.raises((errors.Disconnected, errors.NotConnected)):
            client.ping()
        with pytest.raises((errors.Disconnected, errors.NotConnected)):
            client.ping()
