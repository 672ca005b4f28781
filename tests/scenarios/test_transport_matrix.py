"""Every integration scenario over every transport (tcp, quic, http) against ONE real server.

One scenario body per resource, parametrised by transport: the same SDK calls must give the
same results whichever transport carries them. Each (scenario, transport) pair works in its
own stream id range so the pairs never see each other's data. Over HTTP, what the HTTP
surface does not have (consumer-group membership and group polls, GET_ME — wire §8.4) is
checked to fail with feature_unavailable instead.
"""

from __future__ import annotations

import zipfile
import io

import pytest

from rill import errors
from rill.client import Client, Consumer, HeaderKind, HeaderValue, Message, Partitioning
from rill.client import PollingStrategy
from rill.protocol.permissions import GlobalPermissions, Permissions
from server_process import RillProcess

TRANSPORTS = ("tcp", "quic", "http")
BASE_STREAM = {"tcp": 100, "quic": 200, "http": 300}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = RillProcess(tmp_path_factory.mktemp("matrix") / "data").start()
    yield process
    process.kill()


def trust(server, transport: str) -> dict[str, str]:
    """QUIC verifies the server's certificate: trust the server's own self-signed one."""
    return {"ca_file": server.certificate} if transport == "quic" else {}


def address_of(server: RillProcess, transport: str) -> str:
    host, port = {"tcp": server.tcp_address, "quic": server.quic_address,
                  "http": server.http_address}[transport]
    return f"{host}:{port}"


@pytest.fixture(params=TRANSPORTS)
def transport(request):
    return request.param


@pytest.fixture
def client(server, transport):
    with Client(address_of(server, transport), transport=transport, **trust(server, transport)) as client:
        client.login_user("iggy", "iggy")
        yield client


def test_streams(client, transport):
    base = BASE_STREAM[transport]
    created = client.create_stream(f"Streams {transport}", stream_id=base + 1)
    assert (created.id, created.name) == (base + 1, f"streams.{transport}")
    assert client.get_stream(f"streams.{transport}").id == base + 1
    client.update_stream(base + 1, f"renamed-{transport}")
    assert client.get_stream(base + 1).name == f"renamed-{transport}"
    assert base + 1 in [s.id for s in client.get_streams()]
    with pytest.raises(errors.StreamIdAlreadyExists):
        client.create_stream("other", stream_id=base + 1)
    client.delete_stream(base + 1)
    assert client.get_stream(base + 1) is None
    with pytest.raises(errors.StreamIdNotFound):
        client.delete_stream(base + 1)


def test_topics_and_partitions(client, transport):
    stream = BASE_STREAM[transport] + 2
    client.create_stream(f"topics-{transport}", stream_id=stream)
    topic = client.create_topic(stream, "orders", partitions_count=2, message_expiry=60_000_000)
    assert topic.topic.message_expiry == 60_000_000 and len(topic.partitions) == 2
    client.create_partitions(stream, "orders", 3)
    assert [p.id for p in client.get_topic(stream, "orders").partitions] == [1, 2, 3, 4, 5]
    client.delete_partitions(stream, "orders", 4)
    assert [p.id for p in client.get_topic(stream, 1).partitions] == [1]
    client.update_topic(stream, 1, "orders-v2")
    assert [t.name for t in client.get_topics(stream)] == ["orders-v2"]
    with pytest.raises(errors.TopicNameAlreadyExists):
        client.create_topic(stream, "orders-v2")
    client.purge_topic(stream, 1)
    client.delete_topic(stream, 1)
    assert client.get_topic(stream, 1) is None


def test_messages_and_offsets(client, transport):
    stream = BASE_STREAM[transport] + 3
    client.create_stream(f"messages-{transport}", stream_id=stream)
    client.create_topic(stream, "t", partitions_count=3)
    headers = {"trace": HeaderValue.string("abc"), "n": HeaderValue.int(HeaderKind.UINT64, 7)}
    client.send_messages(stream, "t", [Message(b"with-headers", id=42, headers=headers)]
                         + [f"m{i}".encode() for i in range(9)], partitioning=1)
    client.send_messages(stream, "t", [b"keyed"], partitioning=Partitioning.messages_key(b"abc"))
    assert client.get_topic(stream, "t").partitions[2].messages_count == 1  # xxh32("abc") -> 3
    polled = client.poll_messages(stream, "t", consumer=7, partition_id=1,
                                  strategy=PollingStrategy.first(), count=3)
    assert [m.offset for m in polled.messages] == [0, 1, 2]
    first = polled.messages[0]
    assert (first.id, first.payload, first.headers) == (42, b"with-headers", headers)
    last = client.poll_messages(stream, "t", consumer=7, partition_id=1,
                                strategy=PollingStrategy.last(), count=2)
    assert [m.payload for m in last.messages] == [b"m7", b"m8"]
    nxt = client.poll_messages(stream, "t", consumer=7, partition_id=1,
                               strategy=PollingStrategy.next(), count=4, auto_commit=True)
    assert [m.offset for m in nxt.messages] == [0, 1, 2, 3]
    assert client.get_consumer_offset(stream, "t", consumer=7, partition_id=1).stored_offset == 3
    client.store_consumer_offset(stream, "t", 8, consumer=7, partition_id=1)
    after = client.poll_messages(stream, "t", consumer=7, partition_id=1,
                                 strategy=PollingStrategy.next(), count=4)
    assert [m.offset for m in after.messages] == [9]
    with pytest.raises(errors.InvalidOffset):
        client.store_consumer_offset(stream, "t", 99, consumer=7, partition_id=1)
    with pytest.raises(errors.PartitionNotFound):
        client.send_messages(stream, "t", [b"x"], partitioning=9)


def test_consumer_groups(client, transport, server):
    stream = BASE_STREAM[transport] + 4
    client.create_stream(f"groups-{transport}", stream_id=stream)
    client.create_topic(stream, "t", partitions_count=2)
    group = client.create_consumer_group(stream, "t", "workers", group_id=3)
    assert (group.id, group.name) == (3, "workers")
    assert [g.name for g in client.get_consumer_groups(stream, "t")] == ["workers"]
    client.send_messages(stream, "t", [b"a", b"b"], partitioning=1)
    if transport == "http":  # no membership over HTTP (wire §8.4)
        with pytest.raises(errors.FeatureUnavailable):
            client.join_consumer_group(stream, "t", 3)
    else:
        client.join_consumer_group(stream, "t", 3)
        details = client.get_consumer_group(stream, "t", 3)
        assert details.group.members_count == 1 and len(details.members) == 1
        polled = client.poll_messages(stream, "t", consumer=Consumer.group(3),
                                      strategy=PollingStrategy.next(), count=10, auto_commit=True)
        assert polled.partition_id in (1, 2)
        client.leave_consumer_group(stream, "t", 3)
        assert client.get_consumer_group(stream, "t", 3).group.members_count == 0
    with pytest.raises(errors.ConsumerGroupIdAlreadyExists):
        client.create_consumer_group(stream, "t", "other", group_id=3)
    client.delete_consumer_group(stream, "t", 3)
    assert client.get_consumer_group(stream, "t", 3) is None


def test_users_and_tokens(client, transport, server):
    name = f"user-{transport}"
    created = client.create_user(name, "secret-1", permissions=Permissions(
        GlobalPermissions(read_streams=True), None))
    assert created.username == name
    token = client.create_personal_access_token(f"token-{transport}")
    assert len(token) == 68
    assert [t.name for t in client.get_personal_access_tokens()].count(f"token-{transport}") == 1
    with Client(address_of(server, transport), transport=transport, **trust(server, transport)) as other:
        other.login_user(name, "secret-1")
        other.get_streams()  # read_streams allows listing
        with pytest.raises(errors.Unauthorized):
            other.create_stream(f"forbidden-{transport}")
        other.change_password(created.id, "secret-1", "secret-2")
        with pytest.raises(errors.InvalidCredentials):
            other.login_user(name, "secret-1")
    with Client(address_of(server, transport), transport=transport, **trust(server, transport)) as by_token:
        assert by_token.login_with_personal_access_token(token).user_id == 1
        by_token.get_streams()
    client.delete_personal_access_token(f"token-{transport}")
    client.delete_user(name)
    assert client.get_user(name) is None


def test_system(client, transport):
    client.ping()
    stats = client.get_stats()
    assert stats.streams_count >= 0 and stats.process_id > 0 and stats.hostname
    snapshot = client.get_snapshot(types=[4])  # "test"
    with zipfile.ZipFile(io.BytesIO(snapshot)) as archive:
        assert archive.read("test.txt").strip() == b"test"
    clients = client.get_clients()
    if transport == "http":  # HTTP callers are stateless and never listed (wire §8.1)
        assert all(c.transport in (1, 2) for c in clients)
        with pytest.raises(errors.FeatureUnavailable):
            client.get_me()
    else:
        me = client.get_me()
        assert me.client.client_id in [c.client_id for c in clients]
        assert me.client.transport == {"tcp": 1, "quic": 2}[transport]
