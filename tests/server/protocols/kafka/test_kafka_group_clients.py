"""Real group consumers with every assignor their client computes (issue 13 item 6): confluent-
kafka (librdkafka: range, roundrobin, cooperative-sticky, whose incremental rebalances move
only the partitions that change owner), aiokafka (range, roundrobin) and kafka-python (range,
roundrobin, sticky). In each: a member reads a 4-partition topic and commits; a second member
joins and they split the partitions; the second closes and the first takes every partition
over; the first closes and a new member resumes where the commits left off. Records are
produced only while the group is settled, so every record is read exactly once: no gap, no
duplicate. The coordinator reports the assignor the clients agreed on."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.range import RangePartitionAssignor as AioRange
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as AioRoundRobin
from confluent_kafka import Consumer
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

from test_kafka_groups import ENV, PARTITIONS, new_topic, produce, wait_for
from kafka_link import bootstrap

ALL = set(range(PARTITIONS))


SERVER_ENV = ENV


class Member(threading.Thread):
    """One group member in its own thread: poll, record the values, commit synchronously
    before polling again. ``uncommitted`` counts the values read but not yet committed."""

    def __init__(self, server, topic: str, group: str, assignor: str) -> None:
        super().__init__(daemon=True)
        self.address, self.topic, self.group, self.assignor = bootstrap(server), topic, group, \
            assignor
        self.values: list[bytes] = []
        self.assignment: set[int] = set()
        self.revoked: list[set[int]] = []  # what each rebalance took away (where reported)
        self.uncommitted = 0
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.start()

    def record(self, values: list[bytes], assignment: set[int]) -> None:
        with self.lock:
            self.values.extend(values)
            self.uncommitted += len(values)
            self.assignment = assignment

    def committed(self) -> None:
        with self.lock:
            self.uncommitted = 0

    def settled(self) -> bool:
        with self.lock:
            return self.uncommitted == 0

    def close(self) -> None:
        self.stop.set()
        self.join(30)
        assert not self.is_alive(), "the member did not close"


class ConfluentMember(Member):
    def run(self) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.address, "group.id": self.group,
            "partition.assignment.strategy": self.assignor, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 300, "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000})

        def on_revoke(_consumer, partitions) -> None:
            self.revoked.append({p.partition for p in partitions})

        consumer.subscribe([self.topic], on_revoke=on_revoke)
        try:
            while not self.stop.is_set():
                messages = consumer.consume(num_messages=100, timeout=0.3)
                values = []
                for message in messages:
                    if message.error() is not None:
                        self.errors.append(RuntimeError(str(message.error())))
                    else:
                        values.append(message.value())
                self.record(values, {p.partition for p in consumer.assignment()})
                if values:
                    try:
                        consumer.commit(asynchronous=False)
                    except Exception as error:  # noqa: BLE001 - recorded, checked by tests
                        self.errors.append(error)
                    else:
                        self.committed()
        except Exception as error:  # noqa: BLE001
            self.errors.append(error)
        finally:
            consumer.close()


class KafkaPythonMember(Member):
    ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                 "sticky": StickyPartitionAssignor}

    def run(self) -> None:
        consumer = KafkaConsumer(
            self.topic, bootstrap_servers=self.address, group_id=self.group,
            partition_assignment_strategy=[self.ASSIGNORS[self.assignor]],
            auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100,
            session_timeout_ms=10_000, heartbeat_interval_ms=300, max_poll_interval_ms=60_000,
            request_timeout_ms=70_000)
        try:
            while not self.stop.is_set():
                batches = consumer.poll(timeout_ms=1000)
                values = [record.value for records in batches.values() for record in records]
                self.record(values, {tp.partition for tp in consumer.assignment()})
                if values:
                    try:
                        consumer.commit()
                    except Exception as error:  # noqa: BLE001 - recorded, checked by tests
                        self.errors.append(error)
                    else:
                        self.committed()
        except Exception as error:  # noqa: BLE001
            self.errors.append(error)
        finally:
            consumer.close()


class AiokafkaMember(Member):
    ASSIGNORS = {"range": AioRange, "roundrobin": AioRoundRobin}

    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        consumer = AIOKafkaConsumer(
            self.topic, bootstrap_servers=self.address, group_id=self.group,
            partition_assignment_strategy=(self.ASSIGNORS[self.assignor],),
            auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100,
            session_timeout_ms=10_000, heartbeat_interval_ms=300)
        await consumer.start()
        try:
            while not self.stop.is_set():
                batches = await consumer.getmany(timeout_ms=300)
                values = [record.value for records in batches.values() for record in records]
                self.record(values, {tp.partition for tp in consumer.assignment()})
                if values:
                    try:
                        await consumer.commit()
                    except Exception as error:  # noqa: BLE001 - recorded, checked by tests
                        self.errors.append(error)
                    else:
                        self.committed()
        except Exception as error:  # noqa: BLE001
            self.errors.append(error)
        finally:
            await consumer.stop()


CASES = [
    (ConfluentMember, "range"),
    (ConfluentMember, "roundrobin"),
    (ConfluentMember, "cooperative-sticky"),
    (AiokafkaMember, "range"),
    (AiokafkaMember, "roundrobin"),
    (KafkaPythonMember, "range"),
    (KafkaPythonMember, "roundrobin"),
    (KafkaPythonMember, "sticky"),
]


def read(*members: Member) -> list[bytes]:
    return sorted(value for member in members for value in member.values)


def chosen_assignor(server, group: str) -> str:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(server))
    try:
        return admin.describe_groups([group])[group]["protocol_data"]
    finally:
        admin.close()


@pytest.mark.parametrize("kind, assignor", CASES,
                         ids=[f"{kind.__name__[:-6].lower()}-{name}" for kind, name in CASES])
def test_members_split_hand_over_and_resume_exactly_once(server, kind, assignor):
    topic, group = new_topic(server), f"{assignor}-" + uuid.uuid4().hex[:8]
    sent = produce(server, topic, 0, 40)
    first = kind(server, topic, group, assignor)
    second = third = None
    try:
        wait_for(lambda: first.assignment == ALL and len(first.values) >= 40
                 and first.settled(), what=f"the first member reading all ({first.errors})")
        assert chosen_assignor(server, group) == assignor

        second = kind(server, topic, group, assignor)
        wait_for(lambda: first.assignment and second.assignment
                 and not first.assignment & second.assignment
                 and first.assignment | second.assignment == ALL,
                 what=f"a split ({first.assignment}, {second.assignment}, {first.errors}, "
                      f"{second.errors})")
        if assignor == "cooperative-sticky":  # incremental: the first member kept its others
            assert first.revoked and all(moved and moved != ALL for moved in first.revoked)
            assert first.revoked[-1] == second.assignment
        sent |= produce(server, topic, 40, 40)
        wait_for(lambda: len(read(first, second)) >= 80 and first.settled()
                 and second.settled(), what=f"80 records ({first.errors}, {second.errors})")
        assert second.values  # it read its share
        assert read(first, second) == sorted(sent)  # exactly once

        second.close()  # leaves the group
        wait_for(lambda: first.assignment == ALL, what="the first member taking over")
        sent |= produce(server, topic, 80, 40)
        wait_for(lambda: len(read(first, second)) >= 120 and first.settled(),
                 what=f"120 records ({first.errors})")
        assert read(first, second) == sorted(sent)

        first.close()
        third = kind(server, topic, group, assignor)
        wait_for(lambda: third.assignment == ALL, what=f"the new member ({third.errors})")
        sent |= produce(server, topic, 120, 20)
        wait_for(lambda: len(third.values) >= 20 and third.settled(),
                 what=f"the new records ({third.errors})")
        # it resumed at the commits: no gap, no duplicate
        assert read(first, second, third) == sorted(sent)
        assert not first.errors and not second.errors and not third.errors
    finally:
        for member in (first, second, third):
            if member is not None and member.is_alive():
                member.close()


def test_confluent_kafka_reads_back_the_leader_epoch_it_committed(server):
    """OffsetCommit v6+ carries the leader epoch a position was read in; OffsetFetch answers
    it (librdkafka keeps it with the committed offset)."""
    from confluent_kafka import TopicPartition

    topic, group = new_topic(server), "epoch-" + uuid.uuid4().hex[:8]
    produce(server, topic, 0, 8)
    consumer = Consumer({"bootstrap.servers": bootstrap(server), "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1, leader_epoch=4),
                                 TopicPartition(topic, 1, 2)], asynchronous=False)
        found = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)],
                                   timeout=10)
        assert [(tp.partition, tp.offset, tp.leader_epoch) for tp in found] == \
            [(0, 1, 4), (1, 2, None)]
    finally:
        consumer.close()
