"""Streams, topics and partitions through a real server over TCP (wire §3.6-§3.8)."""

from __future__ import annotations

import pytest

from rill import errors
from rill.client import Client
from rill.protocol.primitives import EXPIRY_NEVER, MAX_TOPIC_SIZE_UNLIMITED


@pytest.fixture
def client(rill_server):
    with Client(rill_server.address) as client:
        client.login_user("iggy", "iggy")
        yield client


def test_stream_lifecycle(client):
    created = client.create_stream("My Orders", stream_id=7)
    assert created.id == 7
    assert created.name == "my.orders"  # normalised: lowercase, whitespace -> '.'
    auto = client.create_stream("second")
    assert auto.id == 1  # lowest free id
    assert [s.id for s in client.get_streams()] == [1, 7]
    assert client.get_stream("my.orders").id == 7
    client.update_stream(7, "renamed")
    assert client.get_stream(7).name == "renamed"
    client.delete_stream(7)
    assert client.get_stream(7) is None  # get-single: empty OK when not found
    assert [s.id for s in client.get_streams()] == [1]


def test_stream_errors(client):
    client.create_stream("taken", stream_id=3)
    with pytest.raises(errors.StreamNameAlreadyExists):
        client.create_stream("taken")
    with pytest.raises(errors.StreamIdAlreadyExists):
        client.create_stream("other", stream_id=3)
    with pytest.raises(errors.InvalidStreamName):
        client.create_stream("bad/name")
    with pytest.raises(errors.StreamIdNotFound) as raised:
        client.delete_stream(99)
    assert raised.value.code == 1009
    with pytest.raises(errors.StreamNameNotFound):
        client.update_stream("nope", "x")


def test_topic_lifecycle_and_defaults(client):
    client.create_stream("s", stream_id=1)
    topic = client.create_topic(1, "Orders EU", partitions_count=3)
    assert topic.id == 1 and topic.name == "orders.eu"
    assert [p.id for p in topic.partitions] == [1, 2, 3]
    assert topic.topic.message_expiry == EXPIRY_NEVER  # server default "none"
    assert topic.topic.max_topic_size == 10_000_000_000  # server default 10 GB
    assert topic.topic.replication_factor == 1
    unlimited = client.create_topic(1, "big", max_topic_size=MAX_TOPIC_SIZE_UNLIMITED,
                                    message_expiry=60_000_000, topic_id=9)
    assert unlimited.id == 9 and unlimited.topic.message_expiry == 60_000_000
    assert [t.id for t in client.get_topics(1)] == [1, 9]
    client.update_topic(1, 9, "bigger", message_expiry=EXPIRY_NEVER,
                        max_topic_size=MAX_TOPIC_SIZE_UNLIMITED)
    assert client.get_topic(1, "bigger").topic.message_expiry == EXPIRY_NEVER
    stream = client.get_stream(1)
    assert stream.stream.topics_count == 2 and [t.name for t in stream.topics] == ["orders.eu", "bigger"]
    client.delete_topic(1, 9)
    assert client.get_topic(1, 9) is None


def test_topic_errors(client):
    client.create_stream("s", stream_id=1)
    client.create_topic(1, "t", partitions_count=1)
    with pytest.raises(errors.TopicNameAlreadyExists):
        client.create_topic(1, "t")
    with pytest.raises(errors.TopicIdAlreadyExists):
        client.create_topic(1, "u", topic_id=1)
    with pytest.raises(errors.TooManyPartitions):
        client.create_topic(1, "many", partitions_count=1001)
    with pytest.raises(errors.InvalidTopicSize):
        client.create_topic(1, "small", max_topic_size=1000)
    with pytest.raises(errors.StreamIdNotFound):
        client.create_topic(2, "t")
    with pytest.raises(errors.TopicIdNotFound):
        client.delete_topic(1, 5)


def test_partitions_added_and_removed_from_the_top(client):
    client.create_stream("s", stream_id=1)
    client.create_topic(1, "t", partitions_count=2)
    client.send_messages(1, 1, [b"p2"], partitioning=2)
    client.create_partitions(1, 1, 3)
    assert [p.id for p in client.get_topic(1, 1).partitions] == [1, 2, 3, 4, 5]
    client.delete_partitions(1, 1, 4)
    partitions = client.get_topic(1, 1).partitions
    assert [p.id for p in partitions] == [1]
    client.create_partitions(1, 1, 1)
    # partition 2 came back new and empty: its old data went with it
    assert client.get_topic(1, 1).partitions[1].messages_count == 0
    with pytest.raises(errors.TooManyPartitions):
        client.create_partitions(1, 1, 0)


def test_purge_keeps_metadata_and_drops_messages_and_offsets(client):
    client.create_stream("s", stream_id=1)
    client.create_topic(1, "t", partitions_count=1)
    client.send_messages(1, 1, [b"a", b"b", b"c"], partitioning=1)
    client.store_consumer_offset(1, 1, 1, consumer=5, partition_id=1)
    client.purge_topic(1, 1)
    topic = client.get_topic(1, 1)
    assert topic.topic.messages_count == 0 and topic.name == "t"
    # a consumer with nothing stored reads stored_offset 0 (as Iggy 0.4.95, docs/wire-notes.md);
    # that the purge dropped the stored offset shows in GET_CONSUMER_LAG, which lists stored ones
    info = client.get_consumer_offset(1, 1, consumer=5, partition_id=1)
    assert (info.partition_id, info.current_offset, info.stored_offset) == (1, 0, 0)
    assert client.get_consumer_lag(1, 1) == []
    client.send_messages(1, 1, [b"fresh"], partitioning=1)
    polled = client.poll_messages(1, 1, consumer=5, partition_id=1)
    assert [(m.offset, m.payload) for m in polled.messages] == [(0, b"fresh")]
    client.purge_stream(1)
    assert client.get_stream(1).stream.messages_count == 0


def test_unauthenticated_and_logout(rill_server):
    with Client(rill_server.address) as client:
        client.ping()  # no login needed
        with pytest.raises(errors.Unauthenticated):
            client.create_stream("x")
        with pytest.raises(errors.Unauthenticated):  # the login gate comes before any lookup
            client.delete_stream(99)
        assert client.get_stream(1) is None  # get-single: empty OK even when unauthenticated
        with pytest.raises(errors.Unauthorized):
            client.purge_stream(1)  # the dialect's quirk: purge answers 41
        with pytest.raises(errors.InvalidCredentials):
            client.login_user("iggy", "wrong")
        with pytest.raises(errors.InvalidCredentials):
            client.login_user("nobody", "iggy")
        assert client.login_user("iggy", "iggy").user_id == 1
        client.create_stream("x")
        client.logout_user()
        with pytest.raises(errors.Unauthenticated):
            client.get_streams()
