"""The SDK over HTTP (``transport="http"``) against a real server: the same calls give exactly the
same results as over TCP, tokens are kept, refreshed and dropped, errors are the same classes,
and what HTTP cannot do says so."""

from __future__ import annotations

import asyncio
import time

import pytest

from rill import errors
from rill.client import (
    AsyncClient, Client, Consumer, HeaderKind, HeaderValue, HttpTransport, Message, Partitioning,
    Permissions, PollingStrategy, UserStatus,
)
from rill.client.http import _payload
from rill.protocol.permissions import GlobalPermissions, StreamPermissions, TopicPermissions
from rill.protocol.iggy.responses.messages import PolledMessages
from rill.protocol.iggy.responses.streams import Stream

from server_process import RillProcess

from .fake_server import run


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = RillProcess(tmp_path_factory.mktemp("sdk-http") / "data").start()
    yield process
    process.kill()


def http_address(server: RillProcess) -> str:
    host, port = server.http_address
    return f"{host}:{port}"


def test_transport_is_registered_and_parses_addresses():
    client = AsyncClient("http://127.0.0.1:3001", transport="http")
    assert isinstance(client.transport, HttpTransport)
    assert (client.transport.host, client.transport.port) == ("127.0.0.1", 3001)
    assert HttpTransport("example.org").port == 3000
    assert HttpTransport("https://example.org:8443")._ssl is not None


def test_same_results_as_tcp(server):
    async def body() -> None:
        async with AsyncClient(http_address(server), transport="http") as http, \
                AsyncClient(server.address) as tcp:
            assert (await http.login_user("iggy", "iggy")).user_id == 1
            await tcp.login_user("iggy", "iggy")
            await http.ping()
            created = await http.create_stream("same", stream_id=77)
            assert created == await tcp.get_stream(77)
            topic = await http.create_topic(77, "orders", partitions_count=3, compression="gzip",
                                            message_expiry=10_000_000)
            assert topic == await tcp.get_topic(77, "orders")
            batch = [Message(b"one", id=2**127 + 5, headers={"k": HeaderValue.string("v"),
                                                           "n": HeaderValue.int(HeaderKind.INT64, -3)}),
                     Message(b"two"), b"three"]
            await http.send_messages(77, "orders", batch, partitioning=2)
            await tcp.send_messages(77, "orders", [b"four"], partitioning=Partitioning.messages_key("k"))
            for strategy in (PollingStrategy.first(), PollingStrategy.last(), PollingStrategy.offset(1)):
                over_http = await http.poll_messages(77, "orders", partition_id=2, strategy=strategy, count=10)
                over_tcp = await tcp.poll_messages(77, "orders", partition_id=2, strategy=strategy, count=10)
                assert over_http == over_tcp and over_http.messages == over_tcp.messages
            assert [m.payload for m in over_http.messages] == [b"two", b"three"]
            await http.store_consumer_offset(77, "orders", 1, consumer="reader", partition_id=2)
            assert await http.get_consumer_offset(77, "orders", "reader", 2) == \
                await tcp.get_consumer_offset(77, "orders", "reader", 2)
            # nothing stored: the 0.4.95 record with stored_offset 0 on both transports
            nobody = await http.get_consumer_offset(77, "orders", "nobody", 2)
            assert nobody == await tcp.get_consumer_offset(77, "orders", "nobody", 2)
            assert nobody.stored_offset == 0
            assert await http.get_consumer_offset(77, "nowhere", "nobody", 2) is None
            assert await http.get_streams() == await tcp.get_streams()
            assert await http.get_topics(77) == await tcp.get_topics(77)
            assert await http.get_stream(12345) is None and await tcp.get_stream(12345) is None
            group = await http.create_consumer_group(77, "orders", "workers")
            assert group == await tcp.get_consumer_group(77, "orders", "workers")
            assert await http.get_consumer_groups(77, "orders") == await tcp.get_consumer_groups(77, "orders")
            await http.update_topic(77, "orders", "orders2", compression="none")
            await http.create_partitions(77, "orders2", 2)
            await http.delete_partitions(77, "orders2", 1)
            assert await http.get_topic(77, "orders2") == await tcp.get_topic(77, "orders2")
            await http.flush_unsaved_buffer(77, "orders2", 1, fsync=True)
            await http.purge_topic(77, "orders2")
            await http.purge_stream(77)
            await http.update_stream(77, "renamed")
            assert await http.get_stream("renamed") == await tcp.get_stream(77)
            stats = await http.get_stats()
            assert stats.streams_count == (await tcp.get_stats()).streams_count
            assert await http.get_clients() == await tcp.get_clients()  # HTTP callers are not clients
            await http.delete_consumer_group(77, "orders2", "workers")
            await http.delete_stream(77)
            assert await tcp.get_stream(77) is None

    run(body())


def test_users_and_tokens_same_as_tcp(server):
    async def body() -> None:
        async with AsyncClient(http_address(server), transport="http") as http, \
                AsyncClient(server.address) as tcp:
            await http.login_user("iggy", "iggy")
            await tcp.login_user("iggy", "iggy")
            permissions = Permissions(GlobalPermissions(read_streams=True), {
                3: StreamPermissions(poll_messages=True, topics={4: TopicPermissions(read_topic=True)})})
            created = await http.create_user("alice", "secret1", UserStatus.ACTIVE, permissions)
            assert created == await tcp.get_user("alice") and created.permissions == permissions
            assert await http.get_users() == await tcp.get_users()
            await http.update_permissions("alice", None)
            await http.update_user("alice", username="alice2")
            await http.change_password("alice2", "secret1", "secret2")
            assert await http.get_user(created.id) == await tcp.get_user(created.id)
            raw = await http.create_personal_access_token("laptop", expiry=3_600_000_000)
            assert isinstance(raw, str) and len(raw) > 20
            assert await http.get_personal_access_tokens() == await tcp.get_personal_access_tokens()
            async with AsyncClient(http_address(server), transport="http") as by_token:
                assert (await by_token.login_with_personal_access_token(raw)).user_id == 1
                assert await by_token.get_streams() == await tcp.get_streams()
            async with AsyncClient(http_address(server), transport="http") as alice:
                await alice.login_user("alice2", "secret2")
                with pytest.raises(errors.Unauthorized):
                    await alice.create_stream("nope")
                assert await alice.get_user(1) is None  # get-single: nothing, like over TCP
                await alice.logout_user()
                with pytest.raises(errors.Unauthenticated):
                    await alice.get_streams()
                await alice.logout_user()  # not logged in: still OK, as on the binary wire
            await http.delete_personal_access_token("laptop")
            assert await http.get_personal_access_tokens() == []
            await http.delete_user("alice2")
            with pytest.raises(errors.InvalidCredentials):
                await http.login_user("alice2", "secret2")

    run(body())


def test_errors_are_the_server_classes(server):
    async def body() -> None:
        async with AsyncClient(http_address(server), transport="http") as http:
            with pytest.raises(errors.Unauthenticated):
                await http.get_streams()
            await http.login_user("iggy", "iggy")
            with pytest.raises(errors.StreamIdNotFound) as caught:
                await http.delete_stream(999)
            assert caught.value.code == 1009 and caught.value.http_status == 404
            with pytest.raises(errors.InvalidStreamName):
                await http.create_stream("bad/name")

    run(body())


@pytest.mark.parametrize("call", [
    lambda c: c.get_me(),
    lambda c: c.join_consumer_group(1, 1, 1),
    lambda c: c.leave_consumer_group(1, 1, 1),
    lambda c: c.poll_messages(1, 1, consumer=Consumer.group(1)),
    lambda c: c.store_consumer_offset(1, 1, 0, consumer=Consumer.group(1)),
])
def test_what_http_cannot_do_is_feature_unavailable(server, call):
    async def body() -> None:
        async with AsyncClient(http_address(server), transport="http") as http:
            await http.login_user("iggy", "iggy")
            with pytest.raises(errors.FeatureUnavailable) as caught:
                await call(http)
            assert "TCP" in caught.value.reason

    run(body())


def test_blocking_client_over_http(server):
    with Client(http_address(server), transport="http") as client:
        client.login_user("iggy", "iggy")
        client.create_stream("blocking", stream_id=88)
        client.create_topic(88, "t")
        client.send_messages(88, "t", [b"a", b"b"], partitioning=1)
        polled = client.poll_messages(88, "t", partition_id=1, strategy=PollingStrategy.first())
        assert [m.payload for m in polled.messages] == [b"a", b"b"]
        client.delete_stream(88)


def test_concurrent_requests_share_a_pool(server):
    async def body() -> None:
        async with AsyncClient(http_address(server), transport="http") as http:
            await http.login_user("iggy", "iggy")
            await http.create_stream("pool", stream_id=99)
            await http.create_topic(99, "t")
            await asyncio.gather(*(http.send_messages(99, "t", [str(i)], partitioning=1) for i in range(40)))
            polled = await http.poll_messages(99, "t", partition_id=1, strategy=PollingStrategy.first(), count=100)
            assert sorted(int(m.payload) for m in polled.messages) == list(range(40))
            await http.delete_stream(99)

    run(body())


def test_token_is_refreshed_before_it_expires(rill_factory):
    server = rill_factory({"RILL_HTTP_JWT_ACCESS_TOKEN_EXPIRY": "3 s",
                           "RILL_HTTP_JWT_CLOCK_SKEW": "0 s"}).start()

    async def body() -> None:
        async with AsyncClient(http_address(server), transport="http") as http:
            await http.login_user("iggy", "iggy")
            transport = http.transport
            first = transport._token
            transport._token_lifetime = 100.0  # make the refresh margin cover the whole life
            await http.get_streams()
            assert transport._token != first
            deadline = time.monotonic() + 15
            while time.time() < transport._token_expiry + 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            transport._token_lifetime = 0.0  # no refresh now: the expired token is refused
            with pytest.raises(errors.Unauthenticated):
                await http.get_streams()

    run(body())


def test_server_down_is_a_connection_error(tmp_path):
    async def body() -> None:
        client = AsyncClient("127.0.0.1:9", transport="http", max_reconnect_attempts=1,
                             reconnect_interval=0.01)
        with pytest.raises(errors.CannotEstablishConnection):
            await client.connect()

    run(body())


def test_results_become_the_binary_payloads():
    assert _payload(None) == b""
    assert _payload([Stream(1, 2, 0, 0, 0, "s")]) == Stream(1, 2, 0, 0, 0, "s").to_bytes()
    polled = PolledMessages(1, 0, 0, b"")
    assert _payload(polled) == polled.prefix()
    assert _payload("tok") == b"\x03tok"


def test_the_record_format_is_chosen_at_creation_over_tcp_and_http(server):
    """``create_topic(..., record_format=...)`` (CREATE_TOPIC_WITH_FORMAT over TCP, the create
    body over HTTP) and ``get_topic_record_formats`` answer alike on both transports; a bad
    name is refused by the SDK before sending, and by the server (status 4) when sent raw."""
    from rill.protocol.iggy.commands.topics import CreateTopicWithFormat
    from rill.protocol.primitives import CompressionAlgorithm
    from rill.protocol.iggy.primitives import Identifier

    async def body() -> None:
        async with AsyncClient(http_address(server), transport="http") as http, \
                AsyncClient(server.address) as tcp:
            await http.login_user("iggy", "iggy")
            await tcp.login_user("iggy", "iggy")
            await tcp.create_stream("formats")
            await tcp.create_topic("formats", "k-tcp", record_format="kafka")
            await http.create_topic("formats", "k-http", record_format="kafka")
            await tcp.create_topic("formats", "i-tcp", record_format="iggy")
            await http.create_topic("formats", "plain-http")
            over_tcp = await tcp.get_topic_record_formats("formats")
            assert over_tcp == await http.get_topic_record_formats("formats")
            assert [(f.topic_id, f.record_format) for f in over_tcp] == [
                (1, "kafka"), (2, "kafka"), (3, "iggy"), (4, "iggy")]
            for client in (tcp, http):
                with pytest.raises(errors.InvalidFormat, match="record_format must be one of "
                                   "iggy, kafka, not 'avro'"):
                    await client.create_topic("formats", "bad", record_format="avro")
            with pytest.raises(errors.InvalidFormat):
                await tcp.execute(CreateTopicWithFormat(
                    Identifier.of("formats"), 0, 1, CompressionAlgorithm.NONE, 0, 0, 0, "bad",
                    "avro"))
            assert len(await tcp.get_topics("formats")) == 4

    run(body())
