"""The SDK over QUIC (rill.client.quic) against real servers: the same scenario gives the same
results as over TCP; concurrency on one connection, big payloads, certificates, reconnects."""

from __future__ import annotations

import asyncio
import dataclasses
import ssl

import pytest

from rill import errors
from rill.bench.ports import free_port
from rill.client import (
    AsyncClient,
    Client,
    Consumer,
    Message,
    Partitioning,
    PolledMessages,
    PollingStrategy,
)
from rill.client.quic import QuicTransport
from rill.client.transport import transport_factory
from rill.server.auth.certificates import generate_self_signed

VOLATILE = {"created_at", "timestamp"}  # differ between two runs whatever the transport


def normalize(value):
    """Plain data for comparing two runs: dataclasses as dicts without their clock fields."""
    if isinstance(value, PolledMessages):
        return {"partition_id": value.partition_id, "current_offset": value.current_offset,
                "count": value.count, "messages": [normalize(m) for m in value.messages]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: normalize(getattr(value, field.name))
            for field in dataclasses.fields(value)
            if field.name not in VOLATILE
        }
    if isinstance(value, dict):
        return {key: normalize(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize(item) for item in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


async def scenario(client: AsyncClient) -> dict:
    """Streams, topics, send/poll, offsets, consumer groups and a few errors."""
    out: dict = {}
    out["login"] = await client.login_user("iggy", "iggy")
    out["stream"] = await client.create_stream("orders", stream_id=1)
    out["topic"] = await client.create_topic(1, "eu", partitions_count=3)
    for partition in (1, 2):
        batch = [Message(f"p{partition}-m{i}".encode() * (i + 1), id=partition * 100 + i) for i in range(10)]
        await client.send_messages(1, "eu", batch, partitioning=Partitioning.partition_id(partition))
    out["poll"] = await client.poll_messages(1, "eu", consumer=1, partition_id=1,
                                             strategy=PollingStrategy.offset(3), count=4)
    out["poll_last"] = await client.poll_messages(1, "eu", consumer=1, partition_id=2,
                                                  strategy=PollingStrategy.last(), count=2)
    await client.store_consumer_offset(1, "eu", 5, consumer=1, partition_id=1)
    out["offset"] = await client.get_consumer_offset(1, "eu", consumer=1, partition_id=1)
    out["no_offset"] = await client.get_consumer_offset(1, "eu", consumer=9, partition_id=2)
    out["group"] = await client.create_consumer_group(1, "eu", "workers", group_id=1)
    await client.join_consumer_group(1, "eu", 1)
    group = await client.get_consumer_group(1, "eu", 1)
    out["group_members"] = [sorted(member.partitions) for member in group.members]
    out["group_poll"] = await client.poll_messages(1, "eu", consumer=Consumer.group(1), partition_id=None,
                                                   strategy=PollingStrategy.next(), count=3,
                                                   auto_commit=True)
    out["group_poll_again"] = await client.poll_messages(1, "eu", consumer=Consumer.group(1),
                                                         partition_id=None,
                                                         strategy=PollingStrategy.next(), count=3,
                                                         auto_commit=True)
    await client.leave_consumer_group(1, "eu", 1)
    out["groups"] = await client.get_consumer_groups(1, "eu")
    out["streams"] = await client.get_streams()
    out["stream_details"] = await client.get_stream(1)
    out["topic_details"] = await client.get_topic(1, "eu")
    out["missing_stream"] = await client.get_stream(99)
    for name, call in (
        ("duplicate_stream", client.create_stream("orders", stream_id=1)),
        ("missing_topic", client.delete_topic(1, 42)),
        ("bad_name", client.create_stream("", stream_id=5)),
    ):
        try:
            await call
            out[name] = "no error"
        except errors.RillError as error:
            out[name] = (type(error).__name__, error.code)
    await client.delete_stream(1)
    out["final_streams"] = await client.get_streams()
    return normalize(out)


def run(coroutine):
    return asyncio.run(coroutine)


def quic_address(server) -> str:
    host, port = server.quic_address
    return f"{host}:{port}"


def test_same_results_as_tcp(rill_factory):
    tcp_server = rill_factory().start()
    quic_server = rill_factory().start()

    async def both():
        async with AsyncClient(tcp_server.address) as tcp:
            over_tcp = await scenario(tcp)
            me_tcp = await tcp.get_me()
        async with AsyncClient(quic_address(quic_server), transport="quic",
                               ca_file=quic_server.certificate) as quic:
            over_quic = await scenario(quic)
            me_quic = await quic.get_me()
        return over_tcp, over_quic, me_tcp, me_quic

    over_tcp, over_quic, me_tcp, me_quic = run(both())
    assert over_quic == over_tcp
    assert over_quic["poll"]["count"] == 4 and over_quic["group_members"] == [[1, 2, 3]]
    assert (me_tcp.client.transport, me_quic.client.transport) == (1, 2)


def test_many_requests_in_flight_on_one_connection(rill_server):
    async def main():
        async with AsyncClient(quic_address(rill_server), transport="quic",
                               ca_file=rill_server.certificate) as client:
            await client.login_user("iggy", "iggy")
            await asyncio.gather(*(client.create_stream(f"s{i}", stream_id=i) for i in range(1, 31)))
            found = await asyncio.gather(*(client.get_stream(i) for i in range(1, 31)))
            pings = await asyncio.gather(*(client.ping() for _ in range(100)))
            assert client.transport.in_flight == 0
        return [details.stream.name for details in found], pings

    names, pings = run(main())
    assert names == [f"s{i}" for i in range(1, 31)]
    assert pings == [None] * 100


def test_big_payloads_round_trip(rill_server):
    payloads = [bytes([i]) * 200_000 for i in range(30)]  # 6 MB in all, 1.2 MB per request

    async def main():
        async with AsyncClient(quic_address(rill_server), transport="quic",
                               ca_file=rill_server.certificate) as client:
            await client.login_user("iggy", "iggy")
            await client.create_stream("big", stream_id=1)
            await client.create_topic(1, "t", partitions_count=1)
            for start in range(0, len(payloads), 6):
                await client.send_messages(1, 1, payloads[start:start + 6], partitioning=1)
            return await client.poll_messages(1, 1, consumer=1, partition_id=1,
                                              strategy=PollingStrategy.first(), count=100)

    polled = run(main())
    assert [m.payload for m in polled.messages] == payloads


def test_blocking_client_over_quic(rill_server):
    with Client(quic_address(rill_server), transport="quic", ca_file=rill_server.certificate) as client:
        client.login_user("iggy", "iggy")
        assert [c.transport for c in client.get_clients()] == [2]


def test_oversize_request_raises_command_length_error_and_the_link_stays(rill_factory):
    server = rill_factory({"RILL_QUIC_MAX_REQUEST_SIZE": "2 KB"}).start()

    async def main():
        async with AsyncClient(quic_address(server), transport="quic", ca_file=server.certificate) as client:
            await client.login_user("iggy", "iggy")
            with pytest.raises(errors.CommandLengthError):
                await client.send_messages(1, 1, [b"z" * 5000], partitioning=1)
            await client.ping()
            return client.is_connected

    assert run(main()) is True


def test_certificates_are_verified_by_default(rill_server, tmp_path):
    other_pem, _ = generate_self_signed()
    (tmp_path / "other.pem").write_bytes(other_pem)
    address = quic_address(rill_server)

    async def main():
        async with AsyncClient(address, transport="quic", ca_file=rill_server.certificate) as client:
            await client.ping()  # its own certificate, given as the CA
        async with AsyncClient(address, transport="quic", verify_certificate=False) as client:
            await client.ping()  # the explicit opt-out
        for untrusted in (AsyncClient(address, transport="quic", reconnect=False),  # the default
                          AsyncClient(address, transport="quic", reconnect=True,
                                      ca_file=str(tmp_path / "other.pem"))):  # another CA
            started = asyncio.get_running_loop().time()
            with pytest.raises(errors.InvalidTlsCertificate,
                               match="not trusted.*ca_file.*verify_certificate=False"):
                await untrusted.connect()
            assert asyncio.get_running_loop().time() - started < 5  # not retried

    run(main())


def test_nobody_listening_is_a_connection_failure():
    port = free_port()  # a UDP port nobody listens on

    async def main():
        client = AsyncClient(f"127.0.0.1:{port}", transport="quic", reconnect=False, connect_timeout=5)
        with pytest.raises(errors.CannotEstablishConnection):
            await client.connect()

    run(main())


def test_reconnects_and_logs_in_again_after_a_server_restart(rill_factory):
    server = rill_factory().start()

    async def main():
        client = AsyncClient(quic_address(server), transport="quic", reconnect_interval=0.2,
                             max_reconnect_attempts=50, ca_file=server.certificate)
        async with client:
            await client.login_user("iggy", "iggy")
            await client.create_stream("s", stream_id=1)
            await client.create_topic(1, "t")
            await client.send_messages(1, 1, [b"before"], partitioning=1)
            await asyncio.to_thread(server.restart)  # a clean stop closes the QUIC connection
            await client.send_messages(1, 1, [b"after"], partitioning=1)  # reconnect + re-login
            polled = await client.poll_messages(1, 1, partition_id=1, strategy=PollingStrategy.first())
            return [m.payload for m in polled.messages]

    assert run(main()) == [b"before", b"after"]


def test_transport_registry_and_state():
    assert transport_factory("QUIC") is QuicTransport
    transport = QuicTransport("example.org")
    assert (transport.host, transport.port, transport.verify) == ("example.org", 8080, True)
    assert not transport.is_connected
    assert not QuicTransport("h:1", verify=False).verify
    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE
    assert not QuicTransport("h:1", ssl=unverified).verify

    async def main():
        with pytest.raises(errors.NotConnected):
            await transport.request(1)
        await transport.close()  # idempotent when never connected

    run(main())
