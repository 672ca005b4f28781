"""Retention through a real server: max topic size (3009), message expiry, oldest-segment
deletion, all on whole sealed segments (wire §6.8)."""

from __future__ import annotations

import time

import pytest

from rill import errors
from rill.client import Client, PollingStrategy

SMALL_SEGMENTS = {"RILL_SYSTEM_SEGMENT_SIZE": "2000"}  # a segment seals after ~2 KB


def test_topic_full_refuses_sends_and_writes_nothing(rill_factory):
    server = rill_factory(SMALL_SEGMENTS).start()
    with Client(server.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("s", stream_id=1)
        with pytest.raises(errors.InvalidTopicSize):
            client.create_topic(1, "tiny", max_topic_size=1999)  # below the segment size
        client.create_topic(1, "t", partitions_count=1, max_topic_size=5000)
        for _ in range(5):
            client.send_messages(1, 1, [b"x" * 1000], partitioning=1)
        size = client.get_topic(1, 1).topic.size_bytes
        assert size >= 5000
        with pytest.raises(errors.TopicFull) as raised:
            client.send_messages(1, 1, [b"y"], partitioning=1)
        assert raised.value.code == 3009
        assert client.get_topic(1, 1).topic.size_bytes == size


def test_expired_sealed_segments_are_deleted_and_polls_start_at_the_oldest(rill_factory):
    server = rill_factory({**SMALL_SEGMENTS, "RILL_RETENTION_INTERVAL": "200 ms"}).start()
    with Client(server.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("s", stream_id=1)
        client.create_topic(1, "t", partitions_count=1, message_expiry=500_000)  # 0.5 s
        for index in range(6):
            client.send_messages(1, 1, [bytes([65 + index]) * 1500], partitioning=1)
        assert client.get_topic(1, 1).partitions[0].segments_count >= 3
        deadline = time.monotonic() + 15
        while client.get_topic(1, 1).partitions[0].segments_count > 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        partition = client.get_topic(1, 1).partitions[0]
        assert partition.segments_count == 1  # only the (empty) active segment is left
        assert partition.current_offset == 5 and partition.messages_count == 0
        assert client.poll_messages(1, 1, partition_id=1, strategy=PollingStrategy.first()).count == 0
        client.send_messages(1, 1, [b"fresh"], partitioning=1)
        for strategy in (PollingStrategy.first(), PollingStrategy.offset(0), PollingStrategy.next()):
            polled = client.poll_messages(1, 1, partition_id=1, strategy=strategy, count=10)
            assert [(m.offset, m.payload) for m in polled.messages] == [(6, b"fresh")]


def test_delete_oldest_segments_when_nearly_full(rill_factory):
    env = {**SMALL_SEGMENTS, "RILL_RETENTION_INTERVAL": "200 ms",
           "RILL_SYSTEM_TOPIC_DELETE_OLDEST_SEGMENTS": "true"}
    server = rill_factory(env).start()
    with Client(server.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("s", stream_id=1)
        client.create_topic(1, "t", partitions_count=1, max_topic_size=8000)
        for _ in range(4):
            client.send_messages(1, 1, [b"z" * 1900], partitioning=1)
        deadline = time.monotonic() + 15
        while client.get_topic(1, 1).topic.size_bytes >= 0.9 * 8000 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.get_topic(1, 1).topic.size_bytes < 0.9 * 8000
        client.send_messages(1, 1, [b"room again"], partitioning=1)


def test_a_pass_that_deletes_many_segments_lets_the_loop_serve_others_meanwhile(tmp_path):
    """Expired segments of 300 partitions, deleted in one retention pass (closing, unlinking
    and a directory sync each): the pass gives the event loop a turn after each partition
    that deleted something, so other requests are served meanwhile; every partition is left
    with its active segment, and the records after the deleted ones are still read."""
    import asyncio

    from in_process_core import twin_core

    from rill.protocol.iggy.commands.messages import SendMessages
    from rill.protocol.iggy.commands.streams import CreateStream
    from rill.protocol.iggy.commands.topics import CreateTopic
    from rill.protocol.iggy.messages import Message, encode_messages
    from rill.protocol.iggy.primitives import Identifier, Partitioning
    from rill.protocol.primitives import CompressionAlgorithm
    from rill.server.config import ServerConfig
    from rill.server.core.model import Session
    from rill.server.core.retention import enforce_retention
    from rill.server.protocols.iggy.dispatch import execute

    root = Session(1, "127.0.0.1:1", "tcp", user_id=1)
    stream = Identifier.of(1)

    def send(topic: str, partition: int, payload: bytes) -> SendMessages:
        return SendMessages(stream, Identifier.of(topic), Partitioning.partition_id(partition),
                            encode_messages([Message(payload)]))

    async def main() -> None:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        config.system.segment.size = 2000  # a segment seals after ~2 KB
        config.root.password_hash_cost = 4
        core = twin_core(config, files=True)
        await core.start()
        try:
            await execute(core, root, CreateStream(1, "s"))
            await execute(core, root, CreateTopic(stream, 0, 1, CompressionAlgorithm.NONE, 0,
                                                  0, 0, "other"))
            await execute(core, root, CreateTopic(stream, 0, 300, CompressionAlgorithm.NONE,
                                                  200_000, 0, 0, "t"))  # expiry 0.2 s
            for pid in range(1, 301):
                for _ in range(2):
                    await execute(core, root, send("t", pid, b"x" * 1500))
            await asyncio.sleep(0.3)  # every partition's first segment (sealed) expired
            for pid in range(1, 301):
                await execute(core, root, send("t", pid, b"kept"))
            topic = core.state.streams[1].topics.named("t")
            assert all(p.log.segments_count == 2 for p in topic.partitions.values())
            passing = asyncio.ensure_future(enforce_retention(core.state))
            served = 0
            while not passing.done():
                await execute(core, root, send("other", 1, b"meanwhile"))
                served += 1
                await asyncio.sleep(0)
            assert await passing == 300
            assert served >= 100, served  # the loop was not held for the whole pass
            assert all(p.log.segments_count == 1 and p.log.first_offset == 2
                       for p in topic.partitions.values())
        finally:
            await core.stop()

    asyncio.run(main())
