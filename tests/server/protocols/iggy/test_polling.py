"""Iggy's POLL_MESSAGES over the broker's neutral reads (``protocols.iggy.polling``): the
five strategies and auto-commit, bounded by the high watermark as Kafka's Fetch and TANK's
Consume are, and the partitioning rules of SEND (``protocols.iggy.partitioning``)."""

from __future__ import annotations

import asyncio
import time

import pytest

from rill import errors
from rill.protocol.iggy.commands.long_poll import PollMessagesWaiting
from rill.protocol.iggy.commands.messages import PollMessages, SendMessages
from rill.protocol.iggy.messages import encode_messages
from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning, PollingStrategy
from rill.server.core.broker import PartitionRef
from rill.server.protocols.iggy.dispatch import execute
from rill.server.protocols.iggy.groups import IggyGroupMembers
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


# -- POLL_MESSAGES_WAITING (rill extension 1031): a poll that waits for its messages -----------


def _waiting(strategy: PollingStrategy, max_wait_ms: int, count: int = 100,
             auto_commit: bool = False) -> PollMessagesWaiting:
    return PollMessagesWaiting(_poll(strategy, count, auto_commit), max_wait_ms)


async def _answered_later(core, session, command, appends) -> tuple[object, bool]:
    """``command`` run as a task; whether it was still waiting after ``appends`` (a list of
    coroutines run one by one, the loop turning in between) but the last; its answer."""
    task = asyncio.ensure_future(execute(core, session, command))
    waited = True
    for append in appends:
        await asyncio.sleep(0.05)
        waited = waited and not task.done()
        await append
    return await asyncio.wait_for(task, 10), waited


def test_a_waiting_poll_is_answered_by_the_append_it_waited_for(tmp_path) -> None:
    async def scenario(core, broker, session) -> None:
        await broker.append(session, P1, encode_messages([b"old"] * 2))
        started = time.monotonic()
        polled, waited = await _answered_later(core, session, _waiting(
            PollingStrategy.offset(2), 30_000), [broker.append(session, P1, encode_messages(
                [b"new"]))])
        assert waited and time.monotonic() - started < 5
        assert [m.payload for m in polled.messages] == [b"new"]
        # the next strategy, auto-committing: from the consumer's position, then past it
        polled, waited = await _answered_later(core, session, _waiting(
            PollingStrategy.next(), 30_000, auto_commit=True), [])
        assert [m.payload for m in polled.messages] == [b"old", b"old", b"new"]
        polled, waited = await _answered_later(core, session, _waiting(
            PollingStrategy.next(), 30_000, auto_commit=True), [broker.append(
                session, P1, encode_messages([b"newer"]))])
        assert waited and [m.payload for m in polled.messages] == [b"newer"]
        assert broker.committed_offset(session, "iggy-consumer:3", P1) == 4

    run_with_broker(tmp_path, scenario)


def test_a_waiting_poll_that_finds_messages_is_answered_at_once(tmp_path) -> None:
    async def scenario(core, broker, session) -> None:
        await broker.append(session, P1, encode_messages([b"a", b"b"]))
        polled = await asyncio.wait_for(
            execute(core, session, _waiting(PollingStrategy.first(), 30_000)), 5)
        assert polled.count == 2

    run_with_broker(tmp_path, scenario)


def test_a_waiting_poll_ends_at_its_deadline_with_nothing(tmp_path) -> None:
    async def scenario(core, broker, session) -> None:
        started = time.monotonic()
        polled = await execute(core, session, _waiting(PollingStrategy.next(), 200))
        assert polled.count == 0 and time.monotonic() - started >= 0.19
        # longer than 30 s is cut to 30 s (as WAIT_FOR_MESSAGES): not asserted by waiting

    run_with_broker(tmp_path, scenario)


def test_a_waiting_poll_waits_past_appends_it_would_not_return(tmp_path) -> None:
    """Appends to another partition, and records older than a timestamp poll's time, wake the
    wait, which goes on waiting."""

    async def scenario(core, broker, session) -> None:
        polled, waited = await _answered_later(core, session, _waiting(
            PollingStrategy.offset(0), 30_000), [
                broker.append(session, PartitionRef("ns", "t", 2), encode_messages([b"p2"])),
                broker.append(session, P1, encode_messages([b"p1"]))])
        assert waited and [m.payload for m in polled.messages] == [b"p1"]
        future = time.time_ns() // 1000 + 3_600_000_000  # an hour ahead: no record reaches it
        task = asyncio.ensure_future(execute(core, session, _waiting(
            PollingStrategy.timestamp(future), 400)))
        for _ in range(3):
            await asyncio.sleep(0.05)
            await broker.append(session, P1, encode_messages([b"too old"]))
        assert not task.done()
        assert (await asyncio.wait_for(task, 5)).count == 0

    run_with_broker(tmp_path, scenario)


def test_a_waiting_poll_whose_read_takes_nothing_does_not_spin(tmp_path, monkeypatch) -> None:
    """Should records be there from where the poll looks and the read still take none, the
    wait (which returns at once) is not looked at again and again until the deadline: the
    poll is answered with nothing."""
    from rill.server.core.messages import PartitionReader

    monkeypatch.setattr(PartitionReader, "read", lambda reader, *args, **kwargs: reader.nothing())

    async def scenario(core, broker, session) -> None:
        await broker.append(session, P1, encode_messages([b"m"]))
        started = time.monotonic()
        polled = await execute(core, session, _waiting(PollingStrategy.offset(0), 5_000))
        assert polled.count == 0 and time.monotonic() - started < 2

    run_with_broker(tmp_path, scenario)


def test_a_waiting_group_member_stays_on_the_partition_it_was_dealt(tmp_path) -> None:
    """A member that names no partition is dealt one as the poll starts (partition 1 first,
    as POLL_MESSAGES deals them); an append to its other partition meanwhile does not answer
    it with that partition's records."""
    from rill.protocol.iggy.commands.groups import CreateConsumerGroup, JoinConsumerGroup

    async def scenario(core, broker, session) -> None:
        ns, t = Identifier.of("ns"), Identifier.of("t")
        await execute(core, session, CreateConsumerGroup(ns, t, 5, "readers"))
        await execute(core, session, JoinConsumerGroup(ns, t, Identifier.of(5)))
        poll = PollMessages(Consumer.group(5), ns, t, 0, PollingStrategy.next(), 10, True)
        polled, waited = await _answered_later(core, session, PollMessagesWaiting(poll, 30_000), [
            broker.append(session, PartitionRef("ns", "t", 2), encode_messages([b"two"])),
            broker.append(session, P1, encode_messages([b"one"]))])
        assert waited and polled.partition_id == 1
        assert [m.payload for m in polled.messages] == [b"one"]
        polled = await execute(core, session, poll)  # the next poll is dealt the other one
        assert polled.partition_id == 2 and [m.payload for m in polled.messages] == [b"two"]

    run_with_broker(tmp_path, scenario, group_membership=IggyGroupMembers())
