"""Restart and crash with consumer groups: groups and group offsets come back after a clean
stop and after kill -9; memberships do not (members are live connections and must rejoin),
and a rejoined group continues with `next` from its stored offsets."""

from __future__ import annotations

import pytest

from rill.client import Client, Consumer, PollingStrategy

NEXT = PollingStrategy.next()


def populate(admin: Client, member: Client) -> None:
    admin.create_stream("orders", stream_id=2)
    admin.create_topic(2, "eu", partitions_count=3)
    admin.create_topic(2, "us", partitions_count=1)
    admin.create_consumer_group(2, "eu", "Billing")
    admin.create_consumer_group(2, "eu", "audit", group_id=5)
    admin.create_consumer_group(2, "us", "billing")
    admin.create_consumer_group(2, "eu", "doomed")
    admin.delete_consumer_group(2, "eu", "doomed")
    for partition_id in (1, 2, 3):
        admin.send_messages(2, "eu", [f"p{partition_id}-{i}".encode() for i in range(10)],
                            partitioning=partition_id)
    member.join_consumer_group(2, "eu", "billing")
    for _ in range(3):  # one poll per partition: offsets 0..3 committed on each
        member.poll_messages(2, "eu", consumer=Consumer.group("billing"), strategy=NEXT,
                             count=4, auto_commit=True)
    member.store_consumer_offset(2, "eu", 6, consumer=Consumer.group(5), partition_id=2)


def check(admin: Client, rill_address: str) -> None:
    groups = admin.get_consumer_groups(2, "eu")
    assert [(g.id, g.name, g.partitions_count, g.members_count) for g in groups] == [
        (1, "billing", 3, 0), (5, "audit", 3, 0)]
    assert [(g.id, g.name) for g in admin.get_consumer_groups(2, "us")] == [(1, "billing")]
    assert admin.get_consumer_group(2, "eu", "doomed") is None
    billing = Consumer.group("billing")
    for partition_id in (1, 2, 3):
        info = admin.get_consumer_offset(2, "eu", consumer=billing, partition_id=partition_id)
        assert (info.stored_offset, info.current_offset) == (3, 9)
    assert admin.get_consumer_offset(2, "eu", consumer=Consumer.group(5), partition_id=2
                                     ).stored_offset == 6
    # never committed in partition 1: stored_offset 0 (as Iggy 0.4.95), and not committed
    assert admin.get_consumer_offset(2, "eu", consumer=Consumer.group(5), partition_id=1
                                     ).stored_offset == 0
    assert [(row.partition_id, row.committed) for row in admin.get_consumer_lag(2, "eu")
            if row.consumer_kind == 2 and row.consumer_id == 5] == [(1, 0), (2, 1), (3, 0)]
    assert admin.get_consumer_group(2, "eu", 1).members == ()
    # the ids continue: the lowest free id is taken (2, freed by "doomed")
    assert admin.create_consumer_group(2, "eu", "new").id == 2
    with Client(rill_address) as member:
        member.login_user("iggy", "iggy")
        member.join_consumer_group(2, "eu", 1)
        polls = [member.poll_messages(2, "eu", consumer=billing, strategy=NEXT, count=100,
                                      auto_commit=True) for _ in range(3)]
        assert [(p.partition_id, [m.payload for m in p.messages]) for p in polls] == [
            (pid, [f"p{pid}-{i}".encode() for i in range(4, 10)]) for pid in (1, 2, 3)]


@pytest.mark.parametrize("how", ["clean stop", "kill -9"])
def test_groups_and_group_offsets_survive(rill_factory, how):
    server = rill_factory().start()
    with Client(server.address) as admin, Client(server.address) as member:
        admin.login_user("iggy", "iggy")
        member.login_user("iggy", "iggy")
        populate(admin, member)
        if how == "clean stop":
            assert server.stop() == 0
        else:
            server.kill()
    server.start()
    with Client(server.address) as admin:
        admin.login_user("iggy", "iggy")
        check(admin, server.address)
    # and once more, with what the restarted server wrote
    server.kill()
    server.start()
    with Client(server.address) as admin:
        admin.login_user("iggy", "iggy")
        assert [g.id for g in admin.get_consumer_groups(2, "eu")] == [1, 2, 5]
        info = admin.get_consumer_offset(2, "eu", consumer=Consumer.group(1), partition_id=3)
        assert info.stored_offset == 9
