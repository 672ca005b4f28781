"""AsyncClient against a fake link: exact frames, decoded answers, errors, reconnect + re-login."""

from __future__ import annotations

import asyncio
import inspect
import struct

import pytest

from rill import errors
from rill.bench.ports import free_port
from rill.client import AsyncClient, Consumer, Message, Partitioning, PollingStrategy
from rill.protocol.iggy.codes import COMMANDS_BY_NAME, decode_command
from rill.protocol.iggy.commands.columnar import PollMessagesColumnar, PollStoredBatches
from rill.protocol.iggy.commands.transactions import (
    AbortStagedMessages,
    CommitStagedMessages,
    GetProducerState,
    StageMessages,
)
from rill.protocol.iggy.responses.transactions import StagedHandle
from rill.protocol.iggy.commands import groups, messages, offsets, partitions, streams, system, tokens, topics, users
from rill.protocol.iggy.commands.long_poll import PollMessagesWaiting, WaitForMessages
from rill.protocol.iggy.messages import POLLED_FIXED
from rill.protocol.permissions import GlobalPermissions, Permissions
from rill.protocol.primitives import (
    CompressionAlgorithm,
    SnapshotCompression,
    SnapshotType,
    UserStatus,
)
from rill.protocol.iggy.primitives import Identifier
from rill.protocol.iggy.responses.streams import Stream, StreamDetails
from rill.protocol.iggy.responses.topics import Partition, Topic, TopicDetails
from rill.protocol.iggy.responses.users import IdentityInfo

from .fake_server import DROP, FakeServer, error, ok, run

LOGIN, GET_STREAM, GET_STREAMS, PING = 38, 200, 201, 1


def stream_details(stream_id: int, name: str = "test") -> StreamDetails:
    return StreamDetails(Stream(stream_id, 1_700_000_000_000_000, 0, 0, 0, name))


def polled_region(records: list[tuple[int, bytes]]) -> bytes:
    out = bytearray()
    for offset, payload in records:
        out += POLLED_FIXED.pack(offset, 1, 1000 + offset, (offset + 1).to_bytes(16, "little"), 0, 0)
        out += struct.pack("<I", len(payload)) + payload
    return bytes(out)


def answer_get_stream(code: int, payload: bytes) -> bytes | None:
    """GET_STREAM i -> a stream named s<i>; login -> user 1; everything else empty OK."""
    if code == GET_STREAM:
        stream_id = decode_command(code, payload).stream_id.value
        return ok(stream_details(stream_id, f"s{stream_id}").to_bytes())
    if code in (LOGIN, 44):
        return ok(IdentityInfo(1).to_bytes())
    return None


async def connected(server: FakeServer, **options) -> AsyncClient:
    client = AsyncClient(server.address, reconnect_interval=0, **options)
    await client.connect()
    return client


# --- exact request frames (wire reference §3.10) ------------------------------------------------


def test_create_stream_sends_the_exact_frame_and_decodes_stream_details():
    async def main():
        async with FakeServer(lambda code, payload: ok(stream_details(1).to_bytes())) as server:
            async with AsyncClient(server.address) as client:
                details = await client.create_stream(name="test", stream_id=1)
        assert server.frames[0].raw == bytes.fromhex("0d000000ca00000001000000 04 74657374")
        assert isinstance(details, StreamDetails)
        assert (details.id, details.name, details.topics) == (1, "test", ())

    run(main())


def test_reference_frames_for_login_topic_send_and_poll():
    async def main():
        async with FakeServer(lambda code, payload: ok(IdentityInfo(1).to_bytes()) if code == LOGIN else None) as server:
            async with AsyncClient(server.address) as client:
                identity = await client.login_user("iggy", "iggy", version="0.6.63")
                server.handler = lambda code, payload: None
                await client.ping()
                await client.send_messages(1, "orders", ["hello"], partitioning=Partitioning.partition_id(1))
                await client.send_messages(1, "orders", [Message(b"hello")], partitioning=1)
        assert identity == IdentityInfo(1)
        raw = [frame.raw for frame in server.frames]
        assert raw[0] == bytes.fromhex(
            "1c000000 26000000 04 69676779 04 69676779 06000000 302e362e3633 00000000"
        )
        assert raw[1] == bytes.fromhex("04000000 01000000")
        send = bytes.fromhex("35000000 65000000 01 04 01000000 02 06 6f7264657273 02 04 01000000")
        send += bytes(16) + bytes.fromhex("00000000 05000000 68656c6c6f")
        assert raw[2] == raw[3] == send

    run(main())


def test_create_topic_and_poll_reference_frames_and_decoded_answers():
    details = TopicDetails(
        Topic(1, 5, 3, 0, 1, 0, 1, 0, 0, "orders"),
        tuple(Partition(index, 5, 1, 0, 0, 0) for index in (1, 2, 3)),
    )
    region = polled_region([(0, b"first"), (1, b"second")])

    def handler(code, payload):
        if code == 302:
            return ok(details.to_bytes())
        return ok(struct.pack("<IQI", 1, 1, 2) + region)

    async def main():
        async with FakeServer(handler) as server:
            async with AsyncClient(server.address) as client:
                topic = await client.create_topic(1, "orders", partitions_count=3)
                polled = await client.poll_messages(
                    1, 1, consumer=7, partition_id=1, strategy=PollingStrategy.next(), count=10, auto_commit=True
                )
        assert server.frames[0].raw == bytes.fromhex(
            "2b000000 2e010000 01 04 01000000 00000000 03000000 01" + "00" * 16 + "00 06 6f7264657273"
        )
        assert server.frames[1].raw == bytes.fromhex(
            "29000000 64000000 01 01 04 07000000 01 04 01000000 01 04 01000000 01000000 05"
            + "00" * 8 + "0a000000 01"
        )
        assert topic == details
        assert (polled.partition_id, polled.current_offset, polled.count) == (1, 1, 2)
        assert bytes(polled.raw) == region
        assert [(m.offset, m.payload, m.id) for m in polled.messages] == [(0, b"first", 1), (1, b"second", 2)]

    run(main())


def test_get_single_answers_none_when_empty_and_lists_decode():
    streams_list = [Stream(1, 1, 0, 0, 0, "a"), Stream(2, 2, 0, 0, 0, "bb")]
    answers = {GET_STREAM: ok(), GET_STREAMS: ok(b"".join(s.to_bytes() for s in streams_list))}

    async def main():
        async with FakeServer(lambda code, payload: answers[code]) as server:
            async with AsyncClient(server.address) as client:
                assert await client.get_stream("missing") is None
                assert await client.get_streams() == streams_list

    run(main())


def test_an_error_status_raises_the_same_class_the_server_raised():
    async def main():
        async with FakeServer(lambda code, payload: error(1009)) as server:
            async with AsyncClient(server.address) as client:
                with pytest.raises(errors.StreamIdNotFound) as caught:
                    await client.delete_stream(1)
                assert caught.value.code == 1009
                server.handler = lambda code, payload: error(40)
                with pytest.raises(errors.Unauthenticated):
                    await client.get_streams()
                assert client.is_connected  # errors do not break the link

    run(main())


def test_concurrent_calls_are_pipelined_and_each_caller_gets_its_answer():
    async def main():
        async with FakeServer(answer_get_stream, batch=10) as server:
            async with AsyncClient(server.address) as client:
                found = await asyncio.gather(*(client.get_stream(index) for index in range(1, 11)))
        assert [(details.id, details.name) for details in found] == [(i, f"s{i}") for i in range(1, 11)]
        assert server.connections == 1

    run(main())


def test_a_40_megabyte_poll_response():
    payload = bytes(range(256)) * (10 * 1024 * 1024 // 256)
    region = polled_region([(offset, payload) for offset in range(4)])

    async def main():
        async with FakeServer(lambda code, _: ok(struct.pack("<IQI", 1, 3, 4) + region)) as server:
            async with AsyncClient(server.address) as client:
                polled = await client.poll_messages("s", "t", partition_id=1, count=4)
        assert len(polled.raw) == len(region) > 40 * 1024 * 1024
        assert polled.count == 4
        assert all(message.payload == payload for message in polled.messages)

    run(main())


# --- reconnect and re-login ----------------------------------------------------------------------


def drop_first(code_to_drop: int, base=answer_get_stream):
    dropped = []

    def handler(code, payload):
        if code == code_to_drop and not dropped:
            dropped.append(code)
            return DROP
        return base(code, payload)

    return handler


def test_a_drop_fails_the_call_then_the_next_call_reconnects_and_logs_in_again_first():
    async def main():
        async with FakeServer(drop_first(GET_STREAMS)) as server:
            client = await connected(server)
            await client.login_user("alice", "secret")
            with pytest.raises(errors.Disconnected) as caught:
                await client.get_streams()
            assert caught.value.code == 8
            details = await client.get_stream(5)
            await client.close()
        assert details.name == "s5"
        assert [(frame.connection, frame.code) for frame in server.frames] == [
            (1, LOGIN), (1, GET_STREAMS), (2, LOGIN), (2, GET_STREAM),
        ]
        assert server.frames[2].payload == server.frames[0].payload
        assert server.frames[2].command.username == "alice"

    run(main())


def test_concurrent_calls_after_a_drop_reconnect_once_and_wait_for_the_login():
    async def main():
        async with FakeServer(drop_first(PING)) as server:
            client = await connected(server)
            await client.login_user("alice", "secret")
            with pytest.raises(errors.Disconnected):
                await client.ping()
            await asyncio.gather(*(client.get_stream(index) for index in range(1, 6)))
            await client.close()
        second = [frame.code for frame in server.frames if frame.connection == 2]
        assert second == [LOGIN] + [GET_STREAM] * 5
        assert server.connections == 2

    run(main())


def test_a_personal_access_token_login_is_replayed_and_logout_forgets_it():
    async def main():
        async with FakeServer(drop_first(PING)) as server:
            client = await connected(server)
            await client.login_with_personal_access_token("token-1")
            with pytest.raises(errors.Disconnected):
                await client.ping()
            await client.get_stream(1)
            await client.logout_user()
            server.handler = drop_first(PING)
            with pytest.raises(errors.Disconnected):
                await client.ping()
            await client.get_stream(2)
            await client.close()
        assert [(frame.connection, frame.code) for frame in server.frames] == [
            (1, 44), (1, PING), (2, 44), (2, GET_STREAM), (2, 39), (2, PING), (3, GET_STREAM),
        ]
        assert server.frames[2].command.token == "token-1"

    run(main())


def test_a_rejected_replayed_login_is_reported_once_and_forgotten():
    logins = []

    def handler(code, payload):
        if code == LOGIN:
            logins.append(code)
            return ok(IdentityInfo(1).to_bytes()) if len(logins) == 1 else error(42)
        return drop_first(PING)(code, payload) if code == PING and len(logins) == 1 else None

    async def main():
        async with FakeServer(handler) as server:
            client = await connected(server)
            await client.login_user("alice", "old-password")
            with pytest.raises(errors.Disconnected):
                await client.ping()
            with pytest.raises(errors.InvalidCredentials):
                await client.get_streams()
            await client.get_streams()  # the link is usable; the user may log in again
            await client.close()
        assert [(frame.connection, frame.code) for frame in server.frames] == [
            (1, LOGIN), (1, PING), (2, LOGIN), (2, GET_STREAMS),
        ]

    run(main())


def test_without_reconnect_a_lost_link_raises_not_connected():
    async def main():
        async with FakeServer(drop_first(PING)) as server:
            client = await connected(server, reconnect=False)
            with pytest.raises(errors.Disconnected):
                await client.ping()
            with pytest.raises(errors.NotConnected) as caught:
                await client.ping()
            assert caught.value.code == 61
            await client.close()

    run(main())


def test_calls_before_connect_or_after_close_raise_not_connected():
    async def main():
        async with FakeServer() as server:
            client = AsyncClient(server.address)
            with pytest.raises(errors.NotConnected):
                await client.ping()
            await client.connect()
            await client.ping()
            await client.close()
            with pytest.raises(errors.NotConnected):
                await client.ping()
            assert server.codes == [PING]

    run(main())


def test_giving_up_after_connect_attempts_raises_cannot_establish_connection():
    port = free_port()  # nobody listens there

    async def main():
        client = AsyncClient(f"127.0.0.1:{port}", reconnect_interval=0, connect_attempts=3)
        with pytest.raises(errors.CannotEstablishConnection) as caught:
            await client.connect()
        assert caught.value.code == 9
        assert "3 attempts" in str(caught.value)

    run(main())


def test_an_abandoned_request_does_not_steal_the_next_answer():
    async def main():
        # The server answers only in pairs; the first call times out before its answer exists.
        async with FakeServer(answer_get_stream, batch=2) as server:
            client = await connected(server, timeout=0.05)
            with pytest.raises(TimeoutError):
                await client.get_stream(1)
            client.timeout = None
            details = await client.get_stream(2)
            await client.close()
        assert details.id == 2

    run(main())


def test_the_heartbeat_pings_an_idle_link():
    async def main():
        async with FakeServer() as server:
            client = await connected(server, heartbeat_interval=0.01)
            await server.wait_for_frames(2)
            await client.close()
        assert set(server.codes) == {PING}

    run(main())


# --- every command has its method, and each method builds the right command ------------------


PERMISSIONS = Permissions(GlobalPermissions(read_streams=True))
S, T, G = Identifier(1), Identifier("orders"), Identifier(3)
CALLS = [
    ("ping", (), system.Ping()),
    ("get_stats", (), system.GetStats()),
    ("get_snapshot", (SnapshotCompression.ZSTD, [SnapshotType.TEST]), system.GetSnapshot(SnapshotCompression.ZSTD, (SnapshotType.TEST,))),
    ("get_me", (), system.GetMe()),
    ("get_client", (9,), system.GetClient(9)),
    ("get_clients", (), system.GetClients()),
    ("get_user", ("bob",), users.GetUser(Identifier("bob"))),
    ("get_users", (), users.GetUsers()),
    ("create_user", ("bob", "pw", UserStatus.INACTIVE, PERMISSIONS), users.CreateUser("bob", "pw", UserStatus.INACTIVE, PERMISSIONS)),
    ("delete_user", (2,), users.DeleteUser(Identifier(2))),
    ("update_user", (2, "robert"), users.UpdateUser(Identifier(2), "robert", None)),
    ("update_permissions", (2, PERMISSIONS), users.UpdatePermissions(Identifier(2), PERMISSIONS)),
    ("change_password", (2, "old", "new"), users.ChangePassword(Identifier(2), "old", "new")),
    ("unlock_user", ("bob",), users.UnlockUser(Identifier("bob"))),
    ("login_user", ("bob", "pw", None), users.LoginUser("bob", "pw")),
    ("logout_user", (), users.LogoutUser()),
    ("get_personal_access_tokens", (), tokens.GetPersonalAccessTokens()),
    ("create_personal_access_token", ("ci", 60), tokens.CreatePersonalAccessToken("ci", 60)),
    ("delete_personal_access_token", ("ci",), tokens.DeletePersonalAccessToken("ci")),
    ("login_with_personal_access_token", ("tok",), tokens.LoginWithPersonalAccessToken("tok")),
    ("poll_messages", (1, "orders", Consumer.group(3), None, PollingStrategy.offset(5), 7, True),
     messages.PollMessages(Consumer.group(3), S, T, 0, PollingStrategy.offset(5), 7, True)),
    ("send_messages", (1, "orders", [b"a"]), messages.SendMessages.of(1, "orders", Partitioning.balanced(), [b"a"])),
    ("flush_unsaved_buffer", (1, "orders", 2, True), messages.FlushUnsavedBuffer(S, T, 2, True)),
    ("get_consumer_offset", (1, "orders", "worker", 2), offsets.GetConsumerOffset(Consumer.regular("worker"), S, T, 2)),
    ("store_consumer_offset", (1, "orders", 42), offsets.StoreConsumerOffset(Consumer.regular(1), S, T, 0, 42)),
    ("get_stream", (1,), streams.GetStream(S)),
    ("get_streams", (), streams.GetStreams()),
    ("create_stream", ("test",), streams.CreateStream(0, "test")),
    ("delete_stream", (1,), streams.DeleteStream(S)),
    ("update_stream", (1, "renamed"), streams.UpdateStream(S, "renamed")),
    ("purge_stream", (1,), streams.PurgeStream(S)),
    ("get_topic", (1, "orders"), topics.GetTopic(S, T)),
    ("get_topics", (1,), topics.GetTopics(S)),
    ("create_topic", (1, "orders", 2, "gzip", 10, 20, 1, 4), topics.CreateTopic(S, 4, 2, CompressionAlgorithm.GZIP, 10, 20, 1, "orders")),
    ("delete_topic", (1, "orders"), topics.DeleteTopic(S, T)),
    ("update_topic", (1, "orders", "new"), topics.UpdateTopic(S, T, CompressionAlgorithm.NONE, 0, 0, 0, "new")),
    ("purge_topic", (1, "orders"), topics.PurgeTopic(S, T)),
    ("create_partitions", (1, "orders", 5), partitions.CreatePartitions(S, T, 5)),
    ("delete_partitions", (1, "orders"), partitions.DeletePartitions(S, T, 1)),
    ("get_consumer_group", (1, "orders", 3), groups.GetConsumerGroup(S, T, G)),
    ("get_consumer_groups", (1, "orders"), groups.GetConsumerGroups(S, T)),
    ("create_consumer_group", (1, "orders", "workers"), groups.CreateConsumerGroup(S, T, 0, "workers")),
    ("delete_consumer_group", (1, "orders", 3), groups.DeleteConsumerGroup(S, T, G)),
    ("join_consumer_group", (1, "orders", 3), groups.JoinConsumerGroup(S, T, G)),
    ("leave_consumer_group", (1, "orders", 3), groups.LeaveConsumerGroup(S, T, G)),
    # rill extensions
    ("poll_messages_columnar", (1, "orders", 2, 10, 100), PollMessagesColumnar(S, T, 2, 10, 100, 0)),
    ("poll_stored_batches", (1, "orders", 2, 10, 100), PollStoredBatches(S, T, 2, 10, 100, 0)),
    ("stage_messages", ("q", 4, 1, 9, 1, "orders", [Message(b"a", id=5)], 2),
     StageMessages.of("q", 4, 0, 1, 9, S, T, Partitioning.partition_id(2), [Message(b"a", id=5)])),
    ("commit_staged_messages", ("q", 4, [(1, 9, 1)]),
     CommitStagedMessages("q", 4, (StagedHandle(1, 9, 1),))),
    ("abort_staged_messages", ("q", 4), AbortStagedMessages("q", 4)),
    ("get_producer_state", ("q",), GetProducerState("q")),
    ("get_consumer_lag", (1, "eu"), offsets.GetConsumerLag(Identifier.of(1), Identifier.of("eu"))),
    ("create_topic_with_format", (1, "orders", "kafka", 2, "gzip", 10, 20, 1, 4),
     topics.CreateTopicWithFormat(S, 4, 2, CompressionAlgorithm.GZIP, 10, 20, 1, "orders", "kafka")),
    ("get_topic_record_formats", (1,), topics.GetTopicRecordFormats(S)),
    ("wait_for_messages", (1, "eu", {2: 7}, 100),
     WaitForMessages(Identifier.of(1), Identifier.of("eu"), ((2, 7),), 100, 0)),
    ("poll_messages_waiting", (1, "eu", 9, 2, PollingStrategy.offset(7), 50, True, 250),
     PollMessagesWaiting(messages.PollMessages(Consumer.regular(9), Identifier.of(1),
                                               Identifier.of("eu"), 2, PollingStrategy.offset(7),
                                               50, True), 250)),
]


def test_the_call_table_covers_every_command():
    assert sorted(name for name, _, _ in CALLS) == sorted(COMMANDS_BY_NAME)
    for name in COMMANDS_BY_NAME:
        assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name
        assert getattr(AsyncClient, name).__doc__, name


@pytest.mark.parametrize("name, args, expected", CALLS, ids=[name for name, _, _ in CALLS])
def test_each_method_sends_its_command(name, args, expected):
    async def main():
        async with FakeServer(lambda code, payload: error(1)) as server:  # no answer decoding here
            async with AsyncClient(server.address) as client:
                with pytest.raises(errors.Error):
                    await getattr(client, name)(*args)
        assert server.frames[0].code == type(expected).CODE
        assert server.frames[0].command == expected
        assert server.frames[0].payload == expected.encode()

    run(main())


def test_the_staged_append_methods_send_the_owner():
    owner = "spark query 1"
    expected = [
        StageMessages.of("q", 4, 7, 1, 9, S, T, Partitioning.partition_id(2),
                         [Message(b"a", id=5)], owner=owner),
        CommitStagedMessages("q", 4, (StagedHandle(1, 9, 1),), owner),
        AbortStagedMessages("q", 4, 7, owner=owner),
        AbortStagedMessages("q", 4, 0, True, 1, 9, owner),
    ]

    async def main():
        async with FakeServer(lambda code, payload: error(1)) as server:
            async with AsyncClient(server.address) as client:
                for call in (
                    client.stage_messages("q", 4, 1, 9, 1, "orders", [Message(b"a", id=5)], 2,
                                          run_id=7, owner=owner),
                    client.commit_staged_messages("q", 4, [(1, 9, 1)], owner=owner),
                    client.abort_staged_messages("q", 4, 7, owner=owner),
                    client.abort_staged_messages("q", 4, task_id=1, attempt_id=9, owner=owner),
                ):
                    with pytest.raises(errors.Error):
                        await call
        assert [frame.command for frame in server.frames] == expected

    run(main())


def test_send_messages_raw_sends_the_region_as_is():
    region = messages.SendMessages.of(1, 1, Partitioning.balanced(), [b"x" * 70_000, b"y"]).messages

    async def main():
        async with FakeServer() as server:
            async with AsyncClient(server.address) as client:
                await client.send_messages_raw(1, 1, Partitioning.partition_id(2), region)
                await client.send_messages_raw("s", "t", None, region[:100])
        first, second = (frame.command for frame in server.frames)
        assert bytes(first.messages) == region and first.partitioning == Partitioning.partition_id(2)
        assert bytes(second.messages) == region[:100] and second.partitioning == Partitioning.balanced()

    run(main())
