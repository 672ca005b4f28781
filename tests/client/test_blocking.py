"""The blocking Client from plain synchronous code, against a fake link in another thread."""

from __future__ import annotations

import inspect
import threading

import pytest

from rill import errors
from rill.client import AsyncClient, Client, Message
from rill.protocol.iggy.responses.streams import Stream, StreamDetails
from rill.protocol.iggy.responses.users import IdentityInfo

from .fake_server import ThreadedFakeServer, error, ok

BRIEF_METHODS = """
ping get_stats get_snapshot get_me get_client get_clients get_user get_users create_user
delete_user update_user update_permissions change_password login_user logout_user
get_personal_access_tokens create_personal_access_token delete_personal_access_token
login_with_personal_access_token poll_messages send_messages flush_unsaved_buffer
get_consumer_offset store_consumer_offset get_stream get_streams create_stream delete_stream
update_stream purge_stream get_topic get_topics create_topic delete_topic update_topic
purge_topic create_partitions delete_partitions get_consumer_group get_consumer_groups
create_consumer_group delete_consumer_group join_consumer_group leave_consumer_group
send_messages_raw execute connect close
poll_messages_columnar stage_messages commit_staged_messages abort_staged_messages
get_producer_state
""".split()


def handler(code, payload):
    if code == 38:
        return ok(IdentityInfo(1).to_bytes())
    if code == 202:
        return ok(StreamDetails(Stream(1, 0, 0, 0, 0, "test")).to_bytes())
    if code == 203:
        return error(1009)
    return None


def test_dir_lists_every_method_with_the_async_docstring_and_signature():
    listed = dir(Client)
    for name in BRIEF_METHODS:
        assert name in listed, name
        method = getattr(Client, name)
        assert callable(method) and not inspect.iscoroutinefunction(method), name
        assert method.__doc__, name
    # the commands, rill's 5 extension commands + send_messages_raw, execute, connect, close
    assert len(BRIEF_METHODS) == 44 + 5 + 4
    assert Client.create_stream.__doc__ == AsyncClient.create_stream.__doc__
    assert inspect.signature(Client.create_topic) == inspect.signature(AsyncClient.create_topic)


def test_plain_sync_code_drives_the_server():
    with ThreadedFakeServer(handler) as server:
        with Client(server.address, reconnect_interval=0) as client:
            assert client.is_connected
            assert client.login_user("iggy", "iggy") == IdentityInfo(1)
            details = client.create_stream("test", stream_id=1)
            client.send_messages(1, 1, [Message(b"m"), "text"], partitioning=1)
            with pytest.raises(errors.StreamIdNotFound) as caught:
                client.delete_stream(1)
            assert caught.value.code == 1009
        assert not client.is_connected
        codes = server.codes
    assert (details.id, details.name) == (1, "test")
    assert codes == [38, 202, 101, 203]


def test_many_threads_share_one_client():
    with ThreadedFakeServer(handler) as server:
        with Client(server.address) as client:
            failures: list[BaseException] = []

            def worker():
                try:
                    for _ in range(20):
                        client.ping()
                except BaseException as exc:  # noqa: BLE001 - reported below
                    failures.append(exc)

            threads = [threading.Thread(target=worker) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert failures == []
        assert server.codes == [1] * 160
        assert server.connections == 1


def test_a_closed_client_refuses_calls_and_close_is_idempotent():
    with ThreadedFakeServer(handler) as server:
        client = Client(server.address)
        client.connect()
        client.ping()
        client.close()
        client.close()
        with pytest.raises(errors.NotConnected):
            client.ping()
        assert server.codes == [1]


def test_calls_before_connect_raise_not_connected():
    with ThreadedFakeServer(handler) as server:
        client = Client(server.address)
        try:
            with pytest.raises(errors.NotConnected) as caught:
                client.get_streams()
            assert caught.value.code == 61
        finally:
            client.close()
