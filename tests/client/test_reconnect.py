"""Connecting and reconnecting: re-login after a restart on the same port; giving up in time."""

from __future__ import annotations

import asyncio
import time

import pytest

from rill import errors
from rill.bench.ports import free_port
from rill.client import AsyncClient, Client, PollingStrategy


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


# --- giving up (issue 11): connect() fails at once, reconnects are bounded -------------------


def _closed_address(transport: str) -> str:
    return f"127.0.0.1:{free_port()}"  # nobody listens there, on TCP or UDP


@pytest.mark.parametrize("transport", ["tcp", "quic", "http"])
def test_blocking_connect_to_a_closed_port_fails_at_once(transport):
    address = _closed_address(transport)
    started = time.monotonic()
    with pytest.raises(errors.CannotEstablishConnection) as caught:
        with Client(address, transport=transport, verify_certificate=False):
            pass
    assert time.monotonic() - started < 10  # a bound, not a figure: it used to retry for ever
    assert str(caught.value) == f"Cannot establish connection to {address}: connection refused (1 attempt)"


@pytest.mark.parametrize("transport", ["tcp", "quic", "http"])
def test_async_connect_to_a_closed_port_fails_at_once(transport):
    address = _closed_address(transport)

    async def main():
        client = AsyncClient(address, transport=transport, verify_certificate=False)
        started = time.monotonic()
        with pytest.raises(errors.CannotEstablishConnection) as caught:
            await client.connect()
        assert time.monotonic() - started < 10
        assert address in str(caught.value)
        await client.close()

    asyncio.run(main())


def test_reconnects_are_bounded_by_default():
    client = AsyncClient()
    assert client.connect_attempts == 1
    assert client.max_reconnect_attempts is not None and client.reconnect_interval > 0


def test_client_gives_up_after_the_configured_reconnect_attempts(rill_factory):
    server = rill_factory().start()
    address = server.address
    with Client(address, reconnect_interval=0.05, max_reconnect_attempts=3) as client:
        client.ping()
        server.kill()
        with pytest.raises(errors.RillError):  # the request that finds the link gone
            client.ping()
        started = time.monotonic()
        with pytest.raises(errors.CannotEstablishConnection) as caught:
            client.ping()
        assert time.monotonic() - started < 10
        assert address in str(caught.value) and "3 attempts" in str(caught.value)


def test_client_with_default_settings_carries_on_after_a_quick_restart(rill_factory):
    server = rill_factory().start()
    with Client(server.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("s", stream_id=1)
        server.kill()
        server.restart()
        assert client.get_stream(1).name == "s"  # reconnected and logged in again
