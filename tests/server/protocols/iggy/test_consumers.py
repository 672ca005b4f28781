"""Iggy's consumers as the core's readers (``protocols.iggy.consumers``): the names their
positions live under, the partition rule, and GET_CONSUMER_LAG listing Iggy's groups and
consumers in Iggy's order, then other protocols' positions (Kafka's groups) by name."""

from __future__ import annotations

import xxhash

from rill.protocol.iggy.commands.offsets import GetConsumerLag
from rill.protocol.iggy.messages import encode_messages
from rill.protocol.iggy.primitives import Consumer, Identifier
from rill.server.core.broker import PartitionRef
from rill.server.core.types import ConsumerLag
from rill.server.protocols.iggy.consumers import GroupMember, consumer_name, iggy_lag, reader
from rill.server.protocols.iggy.dispatch import execute

from in_process_core import run_with_broker


def test_a_regular_consumer_is_named_by_its_id_or_the_hash_of_its_name() -> None:
    assert consumer_name(7) == "iggy-consumer:7"
    assert consumer_name("billing") == f"iggy-consumer:{xxhash.xxh32_intdigest(b'billing')}"


def test_a_regular_consumer_without_a_partition_reads_partition_1() -> None:
    assert reader(Consumer.regular(7), 0) == ("iggy-consumer:7", 1)
    assert reader(Consumer.regular(7), 3) == ("iggy-consumer:7", 3)
    assert reader(Consumer.group("g"), 0) == (GroupMember("g"), 0)  # the membership deals one
    assert reader(Consumer.group(2), 3) == (GroupMember(2), 3)


def _row(consumer: str, group_name: str = "", partition_id: int = 1) -> ConsumerLag:
    return ConsumerLag(consumer, group_name, partition_id, 1, 5, 4)


def test_the_lag_lists_groups_then_iggy_consumers_by_id_then_other_protocols() -> None:
    rows = [_row("iggy-group:1", "g"), _row("iggy-consumer:10", partition_id=1),
            _row("kafka-group:payments"), _row("iggy-consumer:10", partition_id=2),
            _row("iggy-consumer:9"), _row("kafka-group:" + "x" * 250)]  # too long for a str8
    assert [(row.consumer, row.partition_id) for row in iggy_lag(rows)] == [
        ("iggy-group:1", 1), ("iggy-consumer:9", 1), ("iggy-consumer:10", 1),
        ("iggy-consumer:10", 2), ("kafka-group:payments", 1)]


def test_another_protocols_consumer_is_in_the_lag_as_a_group_with_id_0(tmp_path) -> None:
    """Kafka's groups are listed too (what ``rill consumer-offset list`` shows), named as
    stored, with the same figures as the HTTP ``/consumers`` route reads from the core."""
    async def scenario(core, broker, session) -> None:
        partition = PartitionRef("ns", "t", 1)
        await broker.append(session, partition, encode_messages([b"m"] * 5))
        await broker.commit_offset(session, "kafka-group:payments", partition, 2)
        await broker.commit_offset(session, consumer_name(4), partition, 3)
        lag = await execute(core, session, GetConsumerLag(Identifier("ns"), Identifier("t")))
        assert [(row.consumer_kind, row.consumer_id, row.group_name, row.committed,
                 row.committed_offset, row.lag) for row in lag] == [
            (1, 4, "", 1, 2, 2), (2, 0, "kafka-group:payments", 1, 1, 3)]
        every = core.consumer_offsets.get_consumer_lag(session, "ns", "t")
        assert {row.consumer for row in every} == {"iggy-consumer:4", "kafka-group:payments"}
        await broker.commit_offset(session, "kafka-group:payments", partition, 0)  # reads from 0
        lag = await execute(core, session, GetConsumerLag(Identifier("ns"), Identifier("t")))
        assert (lag[1].committed, lag[1].lag) == (0, 5)  # nothing consumed yet

    run_with_broker(tmp_path, scenario)
