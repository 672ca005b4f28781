"""Consumer groups through a real server over TCP, one connection per member (wire §3.9, §4.4,
§6.5, §6.6): commands and their errors, assignment and rebalancing on join / leave /
disconnect / partition changes, group offsets, and exactly-once consumption across members.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from rill import errors
from rill.server.protocols.iggy.dispatch import execute
from rill.server.protocols.iggy.groups import IggyGroupMembers
from rill.client import Client, Consumer, PollingStrategy
from rill.protocol.iggy.commands.groups import (
    CreateConsumerGroup,
    DeleteConsumerGroup,
    JoinConsumerGroup,
    LeaveConsumerGroup,
)
from rill.protocol.iggy.commands.streams import CreateStream
from rill.protocol.iggy.commands.topics import CreateTopic, DeleteTopic
from rill.protocol.primitives import CompressionAlgorithm
from rill.protocol.iggy.primitives import Identifier
from rill.server.config import ServerConfig
from rill.server.core.broker import PartitionRef, TopicRef
from rill.server.core.consumer_groups import NoMembership, deal
from rill.server.core.core import Core
from in_process_core import run_with_broker, twin_core

GROUP = Consumer.group(1)
NEXT = PollingStrategy.next()


@pytest.fixture
def admin(rill_server):
    with Client(rill_server.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("s", stream_id=1)
        client.create_topic(1, "t", partitions_count=4)
        yield client


@pytest.fixture
def connect(rill_server):
    """Open logged-in member connections; all closed after the test."""
    with contextlib.ExitStack() as stack:

        def make(count: int = 1) -> list[Client]:
            clients = []
            for _ in range(count):
                client = stack.enter_context(Client(rill_server.address))
                client.login_user("iggy", "iggy")
                clients.append(client)
            return clients

        yield make


def assignment(client: Client, group_id=1) -> list[tuple[int, ...]]:
    """Each member's partitions, in join order."""
    return [member.partitions for member in client.get_consumer_group(1, 1, group_id).members]


def polled_partitions(member: Client, polls: int, group=GROUP) -> list[int]:
    return [member.poll_messages(1, 1, consumer=group, strategy=NEXT).partition_id
            for _ in range(polls)]


def wait_for(condition, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached before the deadline")
        time.sleep(0.02)


# -- commands --------------------------------------------------------------------------------


def test_create_get_list_delete(admin):
    created = admin.create_consumer_group(1, 1, "Billing Workers")
    assert (created.id, created.name) == (1, "billing.workers")  # lowest free id, normalised
    assert (created.group.partitions_count, created.group.members_count) == (4, 0)
    assert created.members == ()
    assert admin.create_consumer_group(1, 1, "audit", group_id=7).id == 7
    assert admin.create_consumer_group(1, 1, "third").id == 2
    assert admin.get_consumer_group(1, 1, "billing.workers").id == 1
    assert admin.get_consumer_group(1, "t", 7).name == "audit"
    assert [(g.id, g.name, g.partitions_count, g.members_count)
            for g in admin.get_consumer_groups(1, 1)] == [
        (1, "billing.workers", 4, 0), (2, "third", 4, 0), (7, "audit", 4, 0)]
    admin.delete_consumer_group(1, 1, "billing.workers")
    assert admin.get_consumer_group(1, 1, 1) is None
    assert [g.id for g in admin.get_consumer_groups(1, 1)] == [2, 7]
    assert admin.create_consumer_group(1, 1, "again").id == 1  # freed low ids are reused
    admin.create_topic(1, "other", partitions_count=1)
    assert admin.create_consumer_group(1, "other", "audit").id == 1  # ids and names per topic


def test_command_errors(admin, connect):
    admin.create_consumer_group(1, 1, "g", group_id=3)
    with pytest.raises(errors.ConsumerGroupIdAlreadyExists) as raised:
        admin.create_consumer_group(1, 1, "h", group_id=3)
    assert raised.value.code == 5001
    with pytest.raises(errors.ConsumerGroupNameAlreadyExists) as raised:
        admin.create_consumer_group(1, 1, "G")
    assert raised.value.code == 5004
    for bad in ("bad/name", "", " ", "tab\there!"):
        with pytest.raises(errors.InvalidConsumerGroupName) as raised:
            admin.create_consumer_group(1, 1, bad)
        assert raised.value.code == 5005
    calls = (admin.join_consumer_group, admin.leave_consumer_group,
             admin.delete_consumer_group)
    for call in calls:
        with pytest.raises(errors.ConsumerGroupIdNotFound) as raised:
            call(1, 1, 9)
        assert raised.value.code == 5000
        with pytest.raises(errors.ConsumerGroupNameNotFound) as raised:
            call(1, 1, "nope")
        assert raised.value.code == 5003
    with pytest.raises(errors.StreamIdNotFound):
        admin.create_consumer_group(9, 1, "g2")
    with pytest.raises(errors.TopicIdNotFound):
        admin.join_consumer_group(1, 9, 3)
    with pytest.raises(errors.TopicIdNotFound):
        admin.get_consumer_groups(1, 9)
    assert admin.get_consumer_group(1, 1, 9) is None  # get-single: empty OK on any error
    assert admin.get_consumer_group(9, 1, 3) is None
    with pytest.raises(errors.ConsumerGroupIdNotFound):  # unknown group, even with a partition
        admin.poll_messages(1, 1, consumer=Consumer.group(9), partition_id=1)
    # a group poll without a partition id by a non-member
    with pytest.raises(errors.ConsumerGroupMemberNotFound) as raised:
        admin.poll_messages(1, 1, consumer=Consumer.group(3), strategy=NEXT)
    assert raised.value.code == 5006
    # leaving a group one is not in succeeds and changes nothing
    (member,) = connect(1)
    member.join_consumer_group(1, 1, 3)
    admin.leave_consumer_group(1, 1, 3)
    assert assignment(admin, 3) == [(1, 2, 3, 4)]


def test_unauthenticated(admin, rill_server):
    admin.create_consumer_group(1, 1, "g")
    with Client(rill_server.address) as stranger:
        for call in (stranger.join_consumer_group, stranger.leave_consumer_group,
                     stranger.delete_consumer_group):
            with pytest.raises(errors.Unauthenticated) as raised:
                call(1, 1, 1)
            assert raised.value.code == 40
        with pytest.raises(errors.Unauthenticated):
            stranger.create_consumer_group(1, 1, "h")
        with pytest.raises(errors.Unauthenticated):
            stranger.get_consumer_groups(1, 1)
        assert stranger.get_consumer_group(1, 1, 1) is None
    assert admin.get_consumer_group(1, 1, 1).group.members_count == 0


# -- assignment and rebalancing --------------------------------------------------------------


def test_two_members_cycle_through_their_own_partitions(admin, connect):
    admin.create_consumer_group(1, 1, "g")
    first, second = connect(2)
    first.join_consumer_group(1, 1, 1)
    second.join_consumer_group(1, 1, "g")
    details = admin.get_consumer_group(1, 1, 1)
    assert details.group.members_count == 2
    assert [m.partitions for m in details.members] == [(1, 3), (2, 4)]  # join order
    assert polled_partitions(first, 5) == [1, 3, 1, 3, 1]
    assert polled_partitions(second, 4) == [2, 4, 2, 4]
    # joining again keeps the place in the join order and restarts every cursor
    first.join_consumer_group(1, 1, 1)
    assert assignment(admin) == [(1, 3), (2, 4)]
    assert polled_partitions(first, 1) == [1]
    assert polled_partitions(second, 1) == [2]
    # an explicit partition id needs no membership
    assert admin.poll_messages(1, 1, consumer=GROUP, partition_id=4).partition_id == 4


def test_join_leave_and_disconnect_rebalance(admin, connect):
    admin.create_consumer_group(1, 1, "g")
    first, second, third = connect(3)
    first.join_consumer_group(1, 1, 1)
    second.join_consumer_group(1, 1, 1)
    assert polled_partitions(first, 1) == [1]
    third.join_consumer_group(1, 1, 1)
    assert assignment(admin) == [(1, 4), (2,), (3,)]
    assert polled_partitions(first, 3) == [1, 4, 1]  # cursor restarted by the rebalance
    assert polled_partitions(third, 2) == [3, 3]
    second.leave_consumer_group(1, 1, 1)
    assert assignment(admin) == [(1, 3), (2, 4)]  # first, third
    assert polled_partitions(third, 2) == [2, 4]
    with pytest.raises(errors.ConsumerGroupMemberNotFound):
        second.poll_messages(1, 1, consumer=GROUP, strategy=NEXT)
    # a closed connection leaves the group; the remaining member takes over its partitions
    third.close()
    wait_for(lambda: admin.get_consumer_group(1, 1, 1).group.members_count == 1)
    assert assignment(admin) == [(1, 2, 3, 4)]
    assert polled_partitions(first, 5) == [1, 2, 3, 4, 1]


def test_partition_changes_rebalance(admin, connect):
    admin.create_consumer_group(1, 1, "g")
    first, second = connect(2)
    first.join_consumer_group(1, 1, 1)
    second.join_consumer_group(1, 1, 1)
    admin.create_partitions(1, 1, 2)
    details = admin.get_consumer_group(1, 1, 1)
    assert details.group.partitions_count == 6
    assert [m.partitions for m in details.members] == [(1, 3, 5), (2, 4, 6)]
    assert polled_partitions(second, 4) == [2, 4, 6, 2]
    admin.delete_partitions(1, 1, 5)
    assert assignment(admin) == [(1,), ()]
    assert polled_partitions(first, 2) == [1, 1]
    # more members than partitions: the member without partitions gets an empty result
    admin.send_messages(1, 1, [b"only"], partitioning=1)
    empty = second.poll_messages(1, 1, consumer=GROUP, strategy=NEXT, auto_commit=True)
    assert (empty.partition_id, empty.count, empty.current_offset) == (0, 0, 0)
    # nothing committed: stored_offset 0 (as Iggy 0.4.95), and the lag rows say so
    assert admin.get_consumer_offset(1, 1, consumer=GROUP, partition_id=1).stored_offset == 0
    assert not any(row.committed for row in admin.get_consumer_lag(1, 1))
    admin.create_partitions(1, 1, 1)
    assert assignment(admin) == [(1,), (2,)]
    assert polled_partitions(second, 1) == [2]


# -- offsets and delivery --------------------------------------------------------------------


def test_group_offsets(admin, connect):
    admin.create_consumer_group(1, 1, "g")
    admin.send_messages(1, 1, [f"p1-{i}".encode() for i in range(5)], partitioning=1)
    member, outsider = connect(2)
    member.join_consumer_group(1, 1, 1)
    # STORE without a partition id before the member polled: no current partition
    with pytest.raises(errors.PartitionNotFound) as raised:
        member.store_consumer_offset(1, 1, 0, consumer=GROUP)
    assert raised.value.code == 3007
    assert member.get_consumer_offset(1, 1, consumer=GROUP) is None
    polled = member.poll_messages(1, 1, consumer=GROUP, strategy=NEXT, count=2, auto_commit=True)
    assert (polled.partition_id, [m.offset for m in polled.messages]) == (1, [0, 1])
    info = admin.get_consumer_offset(1, 1, consumer=GROUP, partition_id=1)
    assert (info.partition_id, info.current_offset, info.stored_offset) == (1, 4, 1)
    assert admin.get_consumer_offset(1, 1, consumer=Consumer.group("g"), partition_id=1) == info
    assert member.get_consumer_offset(1, 1, consumer=GROUP) == info  # the current partition
    # the group's offset is not a regular consumer's: consumer 1 has stored nothing (0, as 0.4.95)
    assert admin.get_consumer_offset(1, 1, consumer=1, partition_id=1).stored_offset == 0
    # storing without a partition id writes the member's current partition
    member.store_consumer_offset(1, 1, 2, consumer=GROUP)
    assert admin.get_consumer_offset(1, 1, consumer=GROUP, partition_id=1).stored_offset == 2
    with pytest.raises(errors.InvalidOffset):
        member.store_consumer_offset(1, 1, 5, consumer=GROUP)
    with pytest.raises(errors.ConsumerGroupMemberNotFound):
        outsider.store_consumer_offset(1, 1, 3, consumer=GROUP)
    assert outsider.get_consumer_offset(1, 1, consumer=GROUP) is None
    outsider.store_consumer_offset(1, 1, 3, consumer=GROUP, partition_id=1)  # explicit: allowed
    polls = [member.poll_messages(1, 1, consumer=GROUP, strategy=NEXT) for _ in range(4)]
    assert [(p.partition_id, [m.payload for m in p.messages]) for p in polls] == [
        (2, []), (3, []), (4, []), (1, [b"p1-4"])]
    # a rebalance forgets the current partition (it may belong to another member now)
    outsider.join_consumer_group(1, 1, 1)
    with pytest.raises(errors.PartitionNotFound):
        member.store_consumer_offset(1, 1, 4, consumer=GROUP)
    # deleting the group deletes its offsets
    admin.delete_consumer_group(1, 1, 1)
    admin.create_consumer_group(1, 1, "g")
    assert admin.get_consumer_offset(1, 1, consumer=GROUP, partition_id=1).stored_offset == 0
    assert not any(row.committed for row in admin.get_consumer_lag(1, 1))


def test_group_consumes_everything_exactly_once_across_rebalances(admin, connect):
    admin.create_consumer_group(1, 1, "workers")
    sent = [f"m{i}".encode() for i in range(240)]
    for start in range(0, len(sent), 6):  # balanced: batches round-robin over 4 partitions
        admin.send_messages(1, 1, sent[start:start + 6])
    first, second, third = connect(3)
    seen: list[bytes] = []

    def consume(member: Client, polls: int) -> None:
        for _ in range(polls):
            polled = member.poll_messages(1, 1, consumer=GROUP, strategy=NEXT, count=5,
                                          auto_commit=True)
            seen.extend(m.payload for m in polled.messages)

    first.join_consumer_group(1, 1, 1)
    second.join_consumer_group(1, 1, 1)
    consume(first, 3)
    consume(second, 3)
    third.join_consumer_group(1, 1, 1)  # rebalance mid-way
    consume(third, 2)
    consume(first, 3)
    second.close()  # disconnect mid-way
    wait_for(lambda: admin.get_consumer_group(1, 1, 1).group.members_count == 2)
    consume(third, 4)
    first.leave_consumer_group(1, 1, 1)
    assert assignment(admin) == [(1, 2, 3, 4)]
    for _ in range(100):
        if len(seen) >= len(sent):
            break
        consume(third, 1)
    consume(third, 8)  # a full extra round over every partition finds nothing more
    assert len(seen) == len(sent)
    assert sorted(seen) == sorted(sent)
    for pid in (1, 2, 3, 4):
        info = admin.get_consumer_offset(1, 1, consumer=GROUP, partition_id=pid)
        assert info.stored_offset == info.current_offset == 59


def test_deleting_topic_or_stream_drops_groups(admin, connect):
    admin.create_consumer_group(1, 1, "g")
    (member,) = connect(1)
    member.join_consumer_group(1, 1, 1)
    admin.delete_topic(1, 1)
    admin.create_topic(1, "t", partitions_count=4, topic_id=1)
    assert admin.get_consumer_group(1, 1, 1) is None
    assert admin.get_consumer_groups(1, 1) == []
    with pytest.raises(errors.ConsumerGroupIdNotFound):
        member.poll_messages(1, 1, consumer=GROUP, strategy=NEXT)
    admin.create_consumer_group(1, 1, "g")
    member.join_consumer_group(1, 1, 1)
    admin.delete_stream(1)
    admin.create_stream("s", stream_id=1)
    admin.create_topic(1, "t", partitions_count=1, topic_id=1)
    assert admin.get_consumer_groups(1, 1) == []


def test_session_memberships_are_maintained(tmp_path):
    """Session.consumer_groups (what GET_ME / GET_CLIENT report) follows joins, leaves, group
    deletion, topic deletion and disconnects; checked in process, where sessions are visible."""

    def topic(topic_id: int) -> CreateTopic:
        return CreateTopic(_id(1), topic_id, 2, CompressionAlgorithm.NONE, 0, 0, 1, f"t{topic_id}")

    def group_command(kind, topic_id: int, group_id: int):
        return kind(_id(1), _id(topic_id), _id(group_id))

    async def scenario(core: Core) -> None:
        admin = core.connect("127.0.0.1:1000", "tcp")
        member = core.connect("127.0.0.1:1001", "tcp")
        admin.user_id = member.user_id = 1  # the root user
        await execute(core, admin, CreateStream(1, "s"))
        for topic_id in (1, 2):
            await execute(core, admin, topic(topic_id))
            for group_id in (1, 2):
                await execute(core, admin, CreateConsumerGroup(_id(1), _id(topic_id), group_id,
                                                              f"g{group_id}"))
                await execute(core, member, group_command(JoinConsumerGroup, topic_id, group_id))
        everything = [(1, 1, 1), (1, 1, 2), (1, 2, 1), (1, 2, 2)]
        assert member.consumer_groups == everything
        await execute(core, member, group_command(JoinConsumerGroup, 1, 1))  # again: no duplicate
        assert member.consumer_groups == everything
        await execute(core, member, group_command(LeaveConsumerGroup, 1, 1))
        await execute(core, admin, group_command(DeleteConsumerGroup, 1, 2))
        assert member.consumer_groups == [(1, 2, 1), (1, 2, 2)]
        await execute(core, admin, group_command(JoinConsumerGroup, 2, 1))
        await execute(core, admin, DeleteTopic(_id(1), _id(2)))
        assert member.consumer_groups == [] and admin.consumer_groups == []
        await execute(core, admin, topic(2))
        await execute(core, admin, CreateConsumerGroup(_id(1), _id(2), 1, "g"))
        await execute(core, member, group_command(JoinConsumerGroup, 2, 1))
        await execute(core, admin, group_command(JoinConsumerGroup, 2, 1))
        core.disconnect(member)
        assert member.consumer_groups == []
        group = core.consumer_groups.find_group(core.state.streams[1].topics[2], 1)
        members = core.consumer_groups.membership.members(group)
        assert list(members) == [admin.client_id]
        assert members[admin.client_id].partitions == [1, 2]

    async def run() -> None:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        core = twin_core(config, group_membership=IggyGroupMembers())
        await core.start()
        try:
            await scenario(core)
        finally:
            await core.stop()

    asyncio.run(run())


def _id(value) -> Identifier:
    return Identifier.of(value)


class NamingMembership(NoMembership):
    """A protocol's membership with its own name for its groups' positions."""

    def position_name(self, group_id: int) -> str:
        return f"mine-{group_id}"


def test_a_groups_positions_are_stored_under_the_name_its_protocol_gives(tmp_path):
    """The core knows no protocol's naming: it stores, lists and deletes a group's positions
    under the name the membership gives."""
    async def scenario(core, broker, session) -> None:
        core.consumer_groups.membership = NamingMembership()
        group = await broker.groups.create_consumer_group(session, "ns", "t", "g")
        assert group.key == "mine-1"
        partition_id, name = broker.groups.member_partition(session, "ns", "t", "g", 2,
                                                            advance=False)
        assert (partition_id, name) == (2, "mine-1")
        await broker.commit_offset(session, name, PartitionRef("ns", "t", 2), 1)
        assert [(row.consumer, row.group_name, row.next_offset)
                for row in broker.consumer_lag(session, TopicRef("ns", "t"))] == [
            ("mine-1", "g", None), ("mine-1", "g", 1)]
        assert [row.consumer for row in core.state.store.load_positions()] == ["mine-1"]
        await broker.groups.delete_consumer_group(session, "ns", "t", "g")
        assert list(core.state.store.load_positions()) == []
        assert all(not partition.positions
                   for partition in core.state.find_topic("ns", "t").partitions.values())

    run_with_broker(tmp_path, scenario)


def test_deal_is_round_robin_over_members_in_their_order() -> None:
    assert deal([(1, 7), (2, 3)], 5) == {(1, 7): [1, 3, 5], (2, 3): [2, 4]}
    assert deal([(2, 3), (1, 7)], 2) == {(2, 3): [1], (1, 7): [2]}
    assert deal(["a", "b", "c"], 2) == {"a": [1], "b": [2], "c": []}
    assert deal([], 3) == {}
