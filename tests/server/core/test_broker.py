"""The neutral broker API (``server.core.broker``), in process, with no wire protocol: what a
Kafka or TANK handler will call. Appends answer what they assigned, reads are bounded by
records, bytes and the high watermark, consumer positions mean "the next offset to read",
partitions are numbered 1..N, waits are woken by appends, and every call authorizes."""

from __future__ import annotations

import asyncio

import pytest

from rill import errors
from rill.protocol.iggy.commands.messages import PollMessages
from rill.protocol.iggy.messages import encode_messages
from rill.protocol.iggy.primitives import Consumer, Identifier, PollingStrategy
from rill.server.core.broker import PartitionRef, TopicRef
from rill.server.core.types import TopicSpec
from rill.server.protocols.iggy.dispatch import execute

from in_process_core import partition_of, run_with_broker


run = run_with_broker


P0 = PartitionRef("ns", "t", 1)


def test_append_answers_the_offsets_and_timestamp_it_assigned(tmp_path):
    async def scenario(core, broker, session) -> None:
        first = await broker.append(session, P0, encode_messages([b"a", b"b", b"c"]))
        second = await broker.append(session, P0, encode_messages([b"d"]))
        assert (first.first_offset, first.last_offset) == (0, 2)
        assert (second.first_offset, second.last_offset) == (3, 3)
        assert first.partition_id == 1 and second.timestamp >= first.timestamp > 0
        bounds = broker.bounds(session, P0)
        assert (bounds.first_offset, bounds.next_offset, bounds.high_watermark) == (0, 4, 4)
        other = broker.bounds(session, PartitionRef("ns", "t", 2))
        assert (other.first_offset, other.next_offset) == (0, 0)

    run(tmp_path, scenario)


def test_partition_1_of_the_broker_is_iggy_partition_1(tmp_path):
    async def scenario(core, broker, session) -> None:
        await broker.append(session, P0, encode_messages([b"from the broker"]))
        polled = await execute(core, session, PollMessages(
            Consumer.regular(9), Identifier.of("ns"), Identifier.of("t"), 1,
            PollingStrategy.offset(0), 10, False))
        assert polled.count == 1 and b"from the broker" in bytes(polled.raw)

    run(tmp_path, scenario)


def test_read_is_bounded_by_records_and_bytes_and_starts_where_asked(tmp_path):
    async def scenario(core, broker, session) -> None:
        await broker.append(session, P0, encode_messages([b"x" * 100] * 10))
        some = broker.read(session, P0, 2, 3, 1 << 20)
        assert (some.first_offset, some.count, some.format) == (2, 3, "iggy-v1")
        assert len(some.data) == 3 * (45 + 100)
        assert broker.read(session, P0, 0, 10, 200).count == 1  # bytes bound, one at least
        end = broker.read(session, P0, 10, 10, 1 << 20)
        assert (end.count, end.bounds.next_offset) == (0, 10)

    run(tmp_path, scenario)


def test_offset_for_timestamp(tmp_path):
    async def scenario(core, broker, session) -> None:
        first = await broker.append(session, P0, encode_messages([b"early"]))
        await asyncio.sleep(0.002)
        later = await broker.append(session, P0, encode_messages([b"late"]))
        assert broker.offset_for_timestamp(session, P0, 0) == 0
        assert broker.offset_for_timestamp(session, P0, first.timestamp + 1) == 1
        assert broker.offset_for_timestamp(session, P0, later.timestamp + 1) is None

    run(tmp_path, scenario)


def test_consumer_positions_are_the_next_offset_to_read(tmp_path):
    async def scenario(core, broker, session) -> None:
        await broker.append(session, P0, encode_messages([b"m"] * 5))
        assert broker.committed_offset(session, "billing", P0) is None
        await broker.commit_offset(session, "billing", P0, 3)
        assert broker.committed_offset(session, "billing", P0) == 3
        assert broker.committed_offset(session, "other", P0) is None
        assert broker.committed_offset(session, "billing", PartitionRef("ns", "t", 2)) is None

    run(tmp_path, scenario)


def test_a_wait_is_woken_by_an_append(tmp_path):
    async def scenario(core, broker, session) -> None:
        waiting = asyncio.ensure_future(
            broker.wait(session, TopicRef("ns", "t"), [(1, 0), (2, 0)], 1, 30))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await broker.append(session, PartitionRef("ns", "t", 2), encode_messages([b"wake"]))
        ends = await asyncio.wait_for(waiting, 5)
        assert [(end.partition_id, end.next_offset) for end in ends] == [(1, 0), (2, 1)]

    run(tmp_path, scenario)


def test_wait_any_counts_min_bytes_across_topics_together(tmp_path):
    async def scenario(core, broker, session) -> None:
        await broker.create_topic(session, "ns", TopicSpec("u", partitions_count=1))
        one = len(encode_messages([b"x" * 100]))
        positions = {"t": [(1, 0)], "u": [(1, 0)]}
        waiting = asyncio.ensure_future(broker.wait_any(session, "ns", positions, 2 * one, 30))
        await broker.append(session, P0, encode_messages([b"x" * 100]))
        await asyncio.sleep(0.05)
        assert not waiting.done()  # half of min_bytes, on one topic
        await broker.append(session, PartitionRef("ns", "u", 1), encode_messages([b"x" * 100]))
        assert await asyncio.wait_for(waiting, 5) >= 2 * one  # the two topics together
        timed_out = await broker.wait_any(session, "ns", positions, 10 * one, 0.05)
        assert one * 2 <= timed_out < 10 * one

    run(tmp_path, scenario)


def test_every_call_authorizes(tmp_path):
    async def scenario(core, broker, session) -> None:
        stranger = broker.connect("127.0.0.1:2", "tcp")
        with pytest.raises(errors.Unauthenticated):
            await broker.append(stranger, P0, encode_messages([b"no"]))
        await core.users.create_user(session, "plain", "plain-pw", 1, None)
        await broker.authenticate(stranger, "plain", "plain-pw")
        for call in (lambda: broker.read(stranger, P0, 0, 1, 100),
                     lambda: broker.bounds(stranger, P0),
                     lambda: broker.describe_topics(stranger, "ns"),
                     lambda: broker.committed_offset(stranger, "c", P0),
                     lambda: broker.committed_position(stranger, "c", P0),
                     lambda: broker.check_server_access(stranger)):
            with pytest.raises(errors.Unauthorized):
                call()
        with pytest.raises(errors.Unauthorized):
            await broker.append(stranger, P0, encode_messages([b"no"]))
        with pytest.raises(errors.InvalidCredentials):
            await broker.authenticate(stranger, "plain", "wrong")
        broker.check_server_access(session)  # root may

    run(tmp_path, scenario)


def test_describe_topics_and_unknown_names(tmp_path):
    async def scenario(core, broker, session) -> None:
        assert [topic.name for topic in broker.describe_topics(session, "ns")] == ["t"]
        [topic] = broker.describe_topics(session, "ns", ["t"])
        assert len(topic.partitions) == 2
        with pytest.raises(errors.TopicNameNotFound):
            broker.describe_topics(session, "ns", ["nope"])
        await broker.create_partitions(session, TopicRef("ns", "t"), 1)
        assert len(broker.describe_topics(session, "ns", ["t"])[0].partitions) == 3
        await broker.delete_topic(session, TopicRef("ns", "t"))
        assert broker.describe_topics(session, "ns") == []

    run(tmp_path, scenario)


def test_partitions_up_to_a_total_count_the_changes_queued_before(tmp_path):
    """Kafka's CreatePartitions asks for a new total: counted when its change runs, after a
    change of the same topic queued before it, not when it was asked."""
    async def scenario(core, broker, session) -> None:
        ref = TopicRef("ns", "t")  # 2 partitions
        adding = asyncio.ensure_future(broker.create_partitions(session, ref, 300))
        await asyncio.sleep(0)
        await broker.create_partitions(session, ref, 303, up_to=True)
        await adding
        assert len(broker.describe_topics(session, "ns", ["t"])[0].partitions) == 303
        with pytest.raises(errors.TooManyPartitions):
            await broker.create_partitions(session, ref, 303, up_to=True)

    run(tmp_path, scenario)


def test_a_topic_records_its_record_format(tmp_path):
    async def scenario(core, broker, session) -> None:
        [topic] = broker.describe_topics(session, "ns", ["t"])
        assert topic.record_format == "iggy-v1"
        assert topic.partitions[1].log.settings.record_format == "iggy-v1"
        assert [row.record_format for row in core.state.store.load_topics()] == ["iggy-v1"]
        with pytest.raises(errors.FeatureUnavailable, match="record format 'kafka-v9'"):
            await broker.create_topic(session, "ns", TopicSpec("k", 1, record_format="kafka-v9"))
        assert [topic.name for topic in broker.describe_topics(session, "ns")] == ["t"]

    run(tmp_path, scenario)


def test_reads_stop_at_the_high_watermark(tmp_path):
    """On one server the high watermark is the log's end; a replicated follower's may be below
    it (cluster-design.md): what is above it is not read yet."""

    async def scenario(core, broker, session) -> None:
        await broker.append(session, P0, encode_messages([b"m"] * 10))
        assert broker.read(session, P0, 0, 100, 1 << 20).count == 10
        # as a follower would see it: 10 records stored, 6 committed by the cluster
        partition_of(core, P0).high_watermark = 6
        assert broker.read(session, P0, 0, 100, 1 << 20).count == 6
        assert broker.read(session, P0, 4, 100, 1 << 20).count == 2
        assert broker.read(session, P0, 6, 100, 1 << 20).count == 0

    run(tmp_path, scenario)


def test_a_topic_is_full_once_its_partitions_together_reach_its_maximum(tmp_path):
    """``max_topic_size`` counts the bytes of every partition, exactly where it decides:
    appends are accepted while the topic is below it, whichever partitions they go to (each
    append counts down the room counted before; the logs are summed only when it runs out),
    and refused, writing nothing, from the first append that finds it at or over it. A larger
    maximum takes effect at once."""
    def configure(config) -> None:
        config.system.segment.size = 2000  # (a maximum may not be below the segment size)

    async def scenario(core, broker, session) -> None:
        spec = TopicSpec("full", partitions_count=40, max_topic_size=20000)
        topic = await broker.create_topic(session, "ns", spec)
        message = encode_messages([b"m" * 200])
        for accepted in range(10):
            await broker.append(session, PartitionRef("ns", "full", accepted + 1), message)
        await core.topics.update_topic(session, topic.stream_id, topic.id,
                                       TopicSpec("full", max_topic_size=6000))  # lowered
        accepted = 10
        while topic.size_bytes < 6000:
            partition = accepted % 40 + 1
            await broker.append(session, PartitionRef("ns", "full", partition), message)
            accepted += 1
        assert accepted == 25  # 245-byte records: the 25th makes 6125 bytes
        for partition in (1, 17, 40):  # full now, whichever partition is asked
            with pytest.raises(errors.TopicFull):
                await broker.append(session, PartitionRef("ns", "full", partition), message)
        assert topic.size_bytes == 6125 and topic.messages_count == 25  # nothing written
        await core.topics.update_topic(session, topic.stream_id, topic.id,
                                       TopicSpec("full", max_topic_size=7000))
        for _ in range(4):  # 6125 -> 7105: room again up to the new maximum, and no further
            await broker.append(session, PartitionRef("ns", "full", 3), message)
        with pytest.raises(errors.TopicFull):
            await broker.append(session, PartitionRef("ns", "full", 4), message)
        assert topic.messages_count == 29

    run(tmp_path, scenario, configure=configure)
