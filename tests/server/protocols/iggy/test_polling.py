"""Iggy's POLL_MESSAGES over the broker's neutral reads (``protocols.iggy.polling``): the
five strategies and auto-commit, bounded by the high watermark as Kafka's Fetch and TANK's
Consume are, and the partitioning rules of SEND (``protocols.iggy.partitioning``)."""

from __future__ import annotations

import pytest

from rill import errors
from rill.protocol.iggy.commands.messages import PollMessages, SendMessages
from rill.protocol.iggy.messages import encode_messages
from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning, PollingStrategy
from rill.server.core.broker import PartitionRef
from rill.server.protocols.iggy.dispatch import execute
from rill.server.protocols.iggy.partitioning import Partitioners, partition_for_key

from in_process_core import partition_of, run_with_broker

P1 = PartitionRef("ns", "t", 1)


def _poll(strategy: PollingStrategy, count: int = 100, auto_commit: bool = False
          ) -> PollMessages:
    return PollMessages(Consumer.regular(3), Identifier.of("ns"), Identifier.of("t"), 1,
                        strategy, count, auto_commit)


def test_a_poll_stops_at_the_high_watermark(tmp_path) -> None:
    """As a replicated follower would see it: 10 records stored, 6 below the high watermark;
    every strategy reads what is below it only, and auto-commit stops there too."""

    async def scenario(core, broker, session) -> None:
        await broker.append(session, P1, encode_messages([b"m"] * 10))
        assert (await execute(core, session, _poll(PollingStrategy.first()))).count == 10
        partition_of(core, P1).high_watermark = 6
        assert (await execute(core, session, _poll(PollingStrategy.first()))).count == 6
        assert (await execute(core, session, _poll(PollingStrategy.offset(4)))).count == 2
        assert (await execute(core, session, _poll(PollingStrategy.offset(6)))).count == 0
        assert (await execute(core, session, _poll(PollingStrategy.last(), 8))).count == 4
        polled = await execute(core, session, _poll(PollingStrategy.next(), 100, True))
        assert polled.count == 6
        assert broker.committed_offset(session, "iggy-consumer:3", P1) == 6

    run_with_broker(tmp_path, scenario)


def test_a_send_takes_the_partition_its_partitioning_picks(tmp_path) -> None:
    async def scenario(core, broker, session) -> None:
        def send(partitioning: Partitioning) -> SendMessages:
            return SendMessages(Identifier.of("ns"), Identifier.of("t"), partitioning,
                                encode_messages([b"x"]))

        for _ in range(3):  # balanced: 1, 2, 1
            await execute(core, session, send(Partitioning.balanced()))
        await execute(core, session, send(Partitioning.partition_id(2)))
        await execute(core, session, send(Partitioning.messages_key(b"abc")))
        keyed = partition_for_key(b"abc", 2)
        expected = {1: 2 + (keyed == 1), 2: 2 + (keyed == 2)}
        assert {pid: broker.bounds(session, PartitionRef("ns", "t", pid)).next_offset
                for pid in (1, 2)} == expected
        with pytest.raises(errors.InvalidKeyValueLength):
            await execute(core, session, send(Partitioning.messages_key(b"")))
        with pytest.raises(errors.PartitionNotFound):
            await execute(core, session, send(Partitioning.partition_id(3)))

    run_with_broker(tmp_path, scenario)


def test_balanced_partitioning_counts_per_topic() -> None:
    class FakeTopic:
        def __init__(self, count: int) -> None:
            self.partitions = dict.fromkeys(range(1, count + 1))

    partitioners = Partitioners()
    one, other = FakeTopic(3), FakeTopic(2)
    choose = partitioners.chooser(Partitioning.balanced())
    assert [choose(one) for _ in range(4)] == [1, 2, 3, 1]
    assert [choose(other) for _ in range(3)] == [1, 2, 1]
