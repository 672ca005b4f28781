"""BlockingLink: one blocking TCP connection that answers as the SDK's Client does."""

from __future__ import annotations


import pytest

from rill import errors
from rill.bench.ports import free_port
from rill.client import Client, Message, Partitioning
from rill.client.link import BlockingLink

from .fake_server import DROP, ThreadedFakeServer


def test_logs_in_and_sends_with_the_commands_codecs(rill_server):
    with Client(rill_server.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("linked")
        client.create_topic("linked", "t", 2)
    with BlockingLink(rill_server.address) as link:
        assert link.login_user("iggy", "iggy").user_id == 1
        link.send_messages("linked", "t", [Message(b"a"), Message(b"b")], Partitioning.partition_id(2))
        link.send_messages("linked", "t", [Message(b"c")])
    with Client(rill_server.address) as client:
        client.login_user("iggy", "iggy")
        assert client.get_topic("linked", "t").topic.messages_count == 3
        token = client.create_personal_access_token("linked")
    with BlockingLink(rill_server.address) as link:
        assert link.login_with_personal_access_token(token).user_id == 1


def test_errors_are_the_sdks(rill_server):
    """The same class and the same message, filled from the command, as the Client raises."""
    raised = []
    for opened in (Client(rill_server.address), BlockingLink(rill_server.address)):
        with opened as connection:
            with pytest.raises(errors.RillError) as unauthenticated:
                connection.send_messages("nope", "t", [Message(b"x")])
            connection.login_user("iggy", "iggy")
            with pytest.raises(errors.RillError) as not_found:
                connection.send_messages("nope", "t", [Message(b"x")])
        raised.append([(type(error.value), str(error.value)) for error in (unauthenticated, not_found)])
    assert raised[0] == raised[1]
    assert raised[1][1] == (errors.StreamNameNotFound, "Stream with name nope was not found.")


def test_a_closed_port_reads_as_the_clients_connection_error():
    address = f"127.0.0.1:{free_port()}"  # nobody listens there
    messages = []
    for opened in (Client(address, reconnect=False), BlockingLink(address)):
        with pytest.raises(errors.CannotEstablishConnection) as caught:
            with opened:
                pass
        messages.append((str(caught.value), type(caught.value.__cause__)))
    assert messages[0] == messages[1]
    assert messages[1][0] == f"Cannot establish connection to {address}: connection refused (1 attempt)"


def test_a_link_the_server_drops_raises_disconnected():
    with ThreadedFakeServer(lambda code, payload: DROP) as server:
        with BlockingLink(server.address) as link:
            with pytest.raises(errors.Disconnected):
                link.login_user("iggy", "iggy")
            with pytest.raises(errors.NotConnected):  # closed: no silent reuse
                link.login_user("iggy", "iggy")


def test_a_malformed_address_is_refused_at_once():
    with pytest.raises(ValueError, match="invalid port"):
        BlockingLink("localhost:port")
