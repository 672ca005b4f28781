"""Error messages the SDK raises name what the request was about (the wire gives the code only)."""

from __future__ import annotations

import pytest

from rill import errors
from rill.client import Client, Consumer, Identifier
from rill.client.subjects import subject
from rill.protocol.iggy.commands import groups, messages, streams, tokens, topics, users
from rill.protocol.iggy.primitives import Partitioning, PollingStrategy


def test_subject_of_commands():
    assert subject(streams.CreateStream(0, "orders")) == {"stream_name": "orders"}
    assert subject(streams.CreateStream(5, "orders")) == {"stream_id": 5, "stream": 5, "stream_name": "orders"}
    assert subject(topics.GetTopic(Identifier("s"), Identifier(2))) == {"stream": "s", "topic": 2}
    assert subject(groups.CreateConsumerGroup(Identifier(1), Identifier("t"), 0, "readers")) == {
        "stream": 1, "topic": "t", "group_name": "readers"}
    assert subject(tokens.DeletePersonalAccessToken("ci")) == {"token_name": "ci"}
    assert subject(users.DeleteUser(Identifier("bob"))) == {"user": "bob"}
    poll = messages.PollMessages(Consumer.group(7), Identifier(1), Identifier(2), 3,
                                 PollingStrategy.first(), 1, False)
    send = messages.SendMessages(Identifier(1), Identifier(2), Partitioning.partition_id(9), b"")
    assert subject(send) == {"stream": 1, "topic": 2, "partition": 9}
    assert subject(poll) == {"stream": 1, "topic": 2, "partition": 3, "group": 7}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.server_process import RillProcess

    process = RillProcess(tmp_path_factory.mktemp("data")).start()
    yield process
    process.stop()


TRANSPORTS = ["tcp", "quic", "http"]


def _client(server, transport):
    if transport == "tcp":
        return Client(server.address, reconnect=False)
    if transport == "quic":
        host, port = server.quic_address
        return Client(f"{host}:{port}", transport="quic", ca_file=server.certificate, reconnect=False)
    host, port = server.http_address
    return Client(f"{host}:{port}", transport="http", reconnect=False)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_errors_from_a_real_server_name_the_request(server, transport):
    with _client(server, transport) as client:
        client.login_user("iggy", "iggy")
        name = f"orders-{transport}"
        client.create_stream(name)
        client.create_topic(name, "eu", partitions_count=1)
        with pytest.raises(errors.StreamNameAlreadyExists) as exists:
            client.create_stream(name)
        assert name in str(exists.value) and "{" not in str(exists.value)
        with pytest.raises(errors.RillError) as missing:
            client.poll_messages(name, "eu", partition_id=9, consumer=1, strategy=PollingStrategy.first())
        text = str(missing.value)
        assert "{" not in text and "with ID 9" in text.replace(":", ""), text
        if transport != "http":  # HTTP answers the server's own text, with the numeric IDs
            assert "topic with name eu" in text, text
        with pytest.raises(errors.RillError) as no_stream:
            client.get_topics("nowhere")
        assert "nowhere" in str(no_stream.value), str(no_stream.value)
