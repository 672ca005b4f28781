"""Kafka consumer groups on a real server's Kafka listener (issue 13 items 6-7): kafka-python
consumers subscribing in a group (one gets every partition; two split them and read everything
exactly once; one leaving hands its partitions on), committed offsets across a restart, the
§9.11 trap (two members commit and leave, a new member joins at once), the admin APIs, stale
members' errors and session expiry."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

kafka = pytest.importorskip("kafka")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402

from rill.protocol.kafka import apis, request_class  # noqa: E402
from rill.protocol.kafka.errors import ErrorCode  # noqa: E402
from server_process import RillProcess  # noqa: E402
from kafka_link import KAFKA_ENV, Raw, bootstrap  # noqa: E402

JoinGroup = request_class(apis.JOIN_GROUP)
SyncGroup = request_class(apis.SYNC_GROUP)
Heartbeat = request_class(apis.HEARTBEAT)
LeaveGroup = request_class(apis.LEAVE_GROUP)
OffsetCommit = request_class(apis.OFFSET_COMMIT)
OffsetFetch = request_class(apis.OFFSET_FETCH)
DescribeGroups = request_class(apis.DESCRIBE_GROUPS)

PARTITIONS = 4
# anonymous Kafka connections act as this user (opt-in once SASL lands; harmless before)
ENV = {**KAFKA_ENV, "RILL_KAFKA_ANONYMOUS_USER": "iggy"}


SERVER_ENV = ENV


def new_topic(server, partitions: int = PARTITIONS) -> str:
    name = "g-" + uuid.uuid4().hex[:12]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(server))
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


def produce(server, topic: str, start: int, count: int) -> set[bytes]:
    producer = KafkaProducer(bootstrap_servers=bootstrap(server))  # idempotent (its default)
    try:
        values = [b"v%d" % n for n in range(start, start + count)]
        for n, value in enumerate(values):
            producer.send(topic, value=value, partition=n % PARTITIONS)
        producer.flush()
    finally:
        producer.close()
    return set(values)


class Worker(threading.Thread):
    """One group member polling in its own thread, committing after every poll that read."""

    def __init__(self, server, topic: str, group: str, **config) -> None:
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(
            topic, bootstrap_servers=bootstrap(server), group_id=group,
            auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100,
            session_timeout_ms=config.pop("session_timeout_ms", 10_000),
            heartbeat_interval_ms=config.pop("heartbeat_interval_ms", 300),
            max_poll_interval_ms=config.pop("max_poll_interval_ms", 60_000),
            request_timeout_ms=70_000, **config)
        self.values: list[bytes] = []
        self.assignment: set[int] = set()
        self.errors: list[Exception] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.start()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                # kafka-python 3.0.12 now and then drops a finished rebalance when its
                # poll times out inside the join (seen with 100 ms): poll longer
                batches = self.consumer.poll(timeout_ms=1000)
                with self.lock:
                    for records in batches.values():
                        self.values.extend(record.value for record in records)
                    self.assignment = {tp.partition for tp in self.consumer.assignment()}
                if batches:
                    try:
                        self.consumer.commit()
                    except Exception as error:  # noqa: BLE001 - recorded, checked by tests
                        self.errors.append(error)
        finally:
            self.consumer.close()

    def close(self) -> None:
        self.stop.set()
        self.join(20)


def wait_for(condition, timeout: float = 30.0, what: str = "") -> float:
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, f"timed out waiting for {what}"
        time.sleep(0.05)
    return time.monotonic() - start


def read_values(*workers: Worker) -> list[bytes]:
    return [value for worker in workers for value in worker.values]


# -- kafka-python consumers in groups -----------------------------------------------------------


def test_one_consumer_gets_every_partition_and_reads_everything(server):
    topic = new_topic(server)
    sent = produce(server, topic, 0, 40)
    worker = Worker(server, topic, "grp-" + uuid.uuid4().hex[:8])
    try:
        wait_for(lambda: len(worker.values) >= 40, what="40 records")
        assert worker.assignment == set(range(PARTITIONS))
        time.sleep(0.3)
        assert sorted(worker.values) == sorted(sent)
    finally:
        worker.close()


def test_two_consumers_split_the_partitions_and_one_leaving_hands_them_on(server):
    topic, group = new_topic(server), "grp-" + uuid.uuid4().hex[:8]
    sent = produce(server, topic, 0, 40)
    first = Worker(server, topic, group)
    second = None
    try:
        wait_for(lambda: len(first.values) >= 40, what="the first 40")
        second = Worker(server, topic, group)
        wait_for(lambda: first.assignment and second.assignment
                 and not first.assignment & second.assignment
                 and first.assignment | second.assignment == set(range(PARTITIONS)),
                 what="a split of the partitions")
        sent |= produce(server, topic, 40, 40)
        wait_for(lambda: len(read_values(first, second)) >= 80, what="80 records")
        time.sleep(0.3)
        assert sorted(read_values(first, second)) == sorted(sent)  # exactly once
        assert second.values  # the second member read its share
        second.close()  # LeaveGroup
        wait_for(lambda: first.assignment == set(range(PARTITIONS)), timeout=8,
                 what="the remaining member taking every partition")
        sent |= produce(server, topic, 80, 20)
        wait_for(lambda: len(read_values(first, second)) >= 100, what="100 records")
        time.sleep(0.3)
        assert sorted(read_values(first, second)) == sorted(sent)
        assert not first.errors and not second.errors
    finally:
        first.close()
        if second is not None:
            second.close()


def test_two_members_commit_and_leave_and_a_new_member_joins_at_once(server):
    """kafka-notes §9.11: the new member's join completes at once, well before any timeout."""
    topic, group = new_topic(server), "grp-" + uuid.uuid4().hex[:8]
    sent = produce(server, topic, 0, 40)
    config = {"session_timeout_ms": 30_000, "max_poll_interval_ms": 60_000}
    first, second = Worker(server, topic, group, **config), Worker(server, topic, group, **config)
    third = None
    try:
        wait_for(lambda: len(first.assignment) + len(second.assignment) == PARTITIONS
                 and len(read_values(first, second)) >= 40, what="two members reading all")
        time.sleep(0.3)
        first.stop.set()
        second.stop.set()
        third = Worker(server, topic, group, **config)
        start = time.monotonic()
        first.join(20)
        second.join(20)
        wait_for(lambda: third.assignment == set(range(PARTITIONS)), timeout=10,
                 what=f"the new member's assignment ({third.assignment}, {third.errors}, "
                      f"{third.is_alive()})")
        assert time.monotonic() - start < 10  # not the 30 s session / 60 s rebalance timeout
        sent |= produce(server, topic, 40, 8)
        wait_for(lambda: len(third.values) >= 8, what="the new records")
        time.sleep(0.3)
        # resumed after the last commits: no gap, no duplicate
        assert sorted(read_values(first, second, third)) == sorted(sent)
    finally:
        for worker in (first, second, third):
            if worker is not None:
                worker.close()


def test_committed_offsets_survive_a_restart(tmp_path):
    process = RillProcess(tmp_path / "data", env=ENV).start()
    try:
        topic, group = new_topic(process), "grp-restart"
        first_batch = produce(process, topic, 0, 20)
        worker = Worker(process, topic, group)
        wait_for(lambda: len(worker.values) >= 20, what="20 records")
        time.sleep(0.3)
        worker.close()
        assert sorted(worker.values) == sorted(first_batch)
        process.restart()
        second_batch = produce(process, topic, 20, 12)
        worker = Worker(process, topic, group)
        try:
            wait_for(lambda: len(worker.values) >= 12, what="the records after the commit")
            time.sleep(0.5)
            assert sorted(worker.values) == sorted(second_batch)
        finally:
            worker.close()
    finally:
        process.kill()


def test_admin_describes_and_lists_groups(server):
    topic, group = new_topic(server), "grp-" + uuid.uuid4().hex[:8]
    worker = Worker(server, topic, group)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(server))
    try:
        wait_for(lambda: worker.assignment == set(range(PARTITIONS)), what="an assignment")
        listed = {entry["group_id"]: entry for entry in admin.list_groups()}
        assert listed[group]["group_state"] == "Stable"
        assert listed[group]["protocol_type"] == "consumer"
        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable"
        assert described["protocol_data"] in ("range", "roundrobin", "sticky")
        [member] = described["members"]
        partitions = {p for entry in member["member_assignment"]["assigned_partitions"]
                      for p in entry["partitions"]}
        assert partitions == set(range(PARTITIONS))
        assert member["client_host"] == "127.0.0.1"
    finally:
        worker.close()
        admin.close()


# -- the wire, raw ----------------------------------------------------------------------------


def join(raw: Raw, group: str, member_id: str = "", session_timeout_ms: int = 10_000,
         version: int = 7, instance_id: str | None = None):
    protocol = JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b"meta")
    return raw.call(apis.JOIN_GROUP, version, JoinGroup(
        group_id=group, session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=10_000,
        member_id=member_id, group_instance_id=instance_id, protocol_type="consumer",
        protocols=(protocol,)))


def join_as_member(raw: Raw, group: str, **options):
    """MEMBER_ID_REQUIRED, then the join with the generated id."""
    first = join(raw, group, **options)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    answer = join(raw, group, member_id=first.member_id, **options)
    assert answer.error_code == 0 and answer.member_id == first.member_id
    return answer


def commit(raw: Raw, group: str, topic: str, offset: int, generation: int = -1,
           member_id: str = "", partition: int = 0, metadata: str | None = "",
           instance_id: str | None = None, leader_epoch: int = -1) -> int:
    body = OffsetCommit(group_id=group, generation_id_or_member_epoch=generation,
                        member_id=member_id, group_instance_id=instance_id,
                        topics=(OffsetCommit.OffsetCommitRequestTopic(
                            name=topic, partitions=(
                                OffsetCommit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                    partition_index=partition, committed_offset=offset,
                                    committed_leader_epoch=leader_epoch,
                                    committed_metadata=metadata),)),))
    return raw.call(apis.OFFSET_COMMIT, 8, body).topics[0].partitions[0].error_code


def fetch_offsets(raw: Raw, group: str, topic: str | None, partitions=(0,)):
    topics = None if topic is None else (OffsetFetch.OffsetFetchRequestTopic(
        name=topic, partition_indexes=tuple(partitions)),)
    return raw.call(apis.OFFSET_FETCH, 7, OffsetFetch(group_id=group, topics=topics))


def test_offset_fetch_of_a_group_that_never_committed_is_minus_one(server):
    topic = new_topic(server)
    raw = Raw(server)
    try:
        answer = fetch_offsets(raw, "never-" + uuid.uuid4().hex[:8], topic, range(PARTITIONS))
        assert [(p.committed_offset, p.error_code) for p in answer.topics[0].partitions] == \
            [(-1, 0)] * PARTITIONS
        assert fetch_offsets(raw, "never-" + uuid.uuid4().hex[:8], None).topics == ()
        unknown = fetch_offsets(raw, "g", "no-such-topic").topics[0].partitions[0]
        assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        raw.close()


def test_simple_commits_and_offset_fetch_of_everything(server):
    topic, group = new_topic(server), "simple-" + uuid.uuid4().hex[:8]
    produce(server, topic, 0, 8)  # two records per partition
    raw = Raw(server)
    try:
        assert commit(raw, group, topic, 2, partition=1) == 0
        assert commit(raw, group, topic, 1, partition=3) == 0
        assert commit(raw, group, topic, 1, partition=9) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        answer = fetch_offsets(raw, group, None)  # topics null: all the group committed
        [entry] = answer.topics
        assert entry.name == topic
        assert [(p.partition_index, p.committed_offset) for p in entry.partitions] == \
            [(1, 2), (3, 1)]
    finally:
        raw.close()


def test_stale_members_are_refused(server):
    topic, group = new_topic(server), "stale-" + uuid.uuid4().hex[:8]
    produce(server, topic, 0, 4)
    raw = Raw(server)
    try:
        joined = join_as_member(raw, group)
        me, generation = joined.member_id, joined.generation_id
        assert joined.leader == me and [m.member_id for m in joined.members] == [me]
        assignment = SyncGroup.SyncGroupRequestAssignment(member_id=me, assignment=b"mine")
        synced = raw.call(apis.SYNC_GROUP, 5, SyncGroup(
            group_id=group, generation_id=generation, member_id=me, protocol_type="consumer",
            protocol_name="range", assignments=(assignment,)))
        assert (synced.error_code, bytes(synced.assignment)) == (0, b"mine")

        def beat(generation_id, member_id):
            return raw.call(apis.HEARTBEAT, 4, Heartbeat(
                group_id=group, generation_id=generation_id, member_id=member_id)).error_code

        assert beat(generation, me) == 0
        assert beat(generation + 1, me) == ErrorCode.ILLEGAL_GENERATION
        assert beat(generation, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
        assert commit(raw, group, topic, 1, generation, me) == 0
        assert commit(raw, group, topic, 1, generation - 1, me) == ErrorCode.ILLEGAL_GENERATION
        assert commit(raw, group, topic, 1, generation, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
        assert commit(raw, group, topic, 1) == ErrorCode.UNKNOWN_MEMBER_ID  # simple, active group
        assert join(raw, group, member_id="made-up").error_code == ErrorCode.UNKNOWN_MEMBER_ID
        left = raw.call(apis.LEAVE_GROUP, 4, LeaveGroup(group_id=group, members=(
            LeaveGroup.MemberIdentity(member_id=me),)))
        assert left.error_code == 0 and left.members[0].error_code == 0
        assert commit(raw, group, topic, 1) == 0  # a simple commit once the group is empty
        # the member that left is stale now
        assert commit(raw, group, topic, 1, generation, me) == ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        raw.close()


def sync(raw: Raw, group: str, generation: int, member_id: str,
         assignments: dict[str, bytes] | None = None, instance_id: str | None = None):
    return raw.call(apis.SYNC_GROUP, 5, SyncGroup(
        group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id, protocol_type="consumer", protocol_name="range",
        assignments=tuple(SyncGroup.SyncGroupRequestAssignment(member_id=m, assignment=a)
                          for m, a in (assignments or {}).items())))


def beat(raw: Raw, group: str, generation: int, member_id: str,
         instance_id: str | None = None) -> int:
    return raw.call(apis.HEARTBEAT, 4, Heartbeat(
        group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id)).error_code


def in_thread(call, *args, **kwargs) -> tuple[threading.Thread, list]:
    """Run a blocking call (a held JoinGroup or SyncGroup) in a thread; its answer lands in
    the list."""
    answer: list = []
    thread = threading.Thread(target=lambda: answer.append(call(*args, **kwargs)), daemon=True)
    thread.start()
    return thread, answer


def stable_static_pair(server, group: str) -> tuple[Raw, Raw, str, str, int]:
    """Static members "a" (leader) and "b" of a stable group: links, member ids, generation."""
    a, b = Raw(server), Raw(server)
    first = join(a, group, instance_id="a")
    assert first.error_code == 0
    assert sync(a, group, first.generation_id, first.member_id,
                {first.member_id: b"a-alone"}, "a").error_code == 0
    thread, joined_b = in_thread(join, b, group, instance_id="b")
    wait_for(lambda: beat(a, group, first.generation_id, first.member_id, "a")
             == ErrorCode.REBALANCE_IN_PROGRESS, what="the rebalance b's join starts")
    joined_a = join(a, group, member_id=first.member_id, instance_id="a")
    thread.join(10)
    [joined_b] = joined_b
    assert joined_a.error_code == joined_b.error_code == 0
    generation = joined_a.generation_id
    assert joined_a.leader == joined_a.member_id and generation == joined_b.generation_id
    thread, synced_b = in_thread(sync, b, group, generation, joined_b.member_id, None, "b")
    synced_a = sync(a, group, generation, joined_a.member_id,
                    {joined_a.member_id: b"a-part", joined_b.member_id: b"b-part"}, "a")
    thread.join(10)
    assert bytes(synced_a.assignment) == b"a-part"
    assert bytes(synced_b[0].assignment) == b"b-part"
    return a, b, joined_a.member_id, joined_b.member_id, generation


def test_a_restarted_static_member_gets_its_assignment_back_without_a_rebalance(server):
    """Static membership (KIP-345): "b" comes back with an empty member id and unchanged
    metadata: a new member id at once, the same generation and assignment, "a" undisturbed,
    b's old member id fenced everywhere."""
    topic, group = new_topic(server), "static-" + uuid.uuid4().hex[:8]
    produce(server, topic, 0, 4)
    a, b, a_id, old_b, generation = stable_static_pair(server, group)
    restarted = Raw(server)
    try:
        back = join(restarted, group, instance_id="b")
        assert back.error_code == 0 and back.member_id not in ("", old_b, a_id)
        assert back.generation_id == generation and back.leader == a_id
        synced = sync(restarted, group, generation, back.member_id, None, "b")
        assert (synced.error_code, bytes(synced.assignment)) == (0, b"b-part")
        assert beat(a, group, generation, a_id, "a") == 0  # no rebalance for the others
        assert beat(restarted, group, generation, back.member_id, "b") == 0
        fenced = ErrorCode.FENCED_INSTANCE_ID
        assert beat(b, group, generation, old_b, "b") == fenced
        assert beat(b, group, generation, old_b) == fenced  # Heartbeat without the instance id
        assert sync(b, group, generation, old_b, None, "b").error_code == fenced
        assert commit(b, group, topic, 1, generation, old_b, instance_id="b") == fenced
        assert join(b, group, member_id=old_b, instance_id="b").error_code == fenced
        assert commit(restarted, group, topic, 1, generation, back.member_id,
                      instance_id="b") == 0
        # LeaveGroup v3+ by instance id: the fenced id is refused, the instance id alone works
        left = restarted.call(apis.LEAVE_GROUP, 4, LeaveGroup(group_id=group, members=(
            LeaveGroup.MemberIdentity(member_id=old_b, group_instance_id="b"),
            LeaveGroup.MemberIdentity(member_id="", group_instance_id="b"))))
        assert [m.error_code for m in left.members] == [fenced, 0]
        assert beat(a, group, generation, a_id, "a") == ErrorCode.REBALANCE_IN_PROGRESS
    finally:
        for link in (a, b, restarted):
            link.close()


def test_a_static_member_back_with_new_metadata_rebalances_the_group(server):
    group = "static-" + uuid.uuid4().hex[:8]
    a, b, a_id, old_b, generation = stable_static_pair(server, group)
    restarted = Raw(server)
    try:
        protocol = JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b"new topics")
        thread, answer = in_thread(restarted.call, apis.JOIN_GROUP, 7, JoinGroup(
            group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
            member_id="", group_instance_id="b", protocol_type="consumer",
            protocols=(protocol,)))
        wait_for(lambda: beat(a, group, generation, a_id, "a")
                 == ErrorCode.REBALANCE_IN_PROGRESS, what="a rebalance")
        rejoined = join(a, group, member_id=a_id, instance_id="a")
        thread.join(10)
        assert answer[0].error_code == 0 and answer[0].member_id != old_b
        assert rejoined.generation_id == answer[0].generation_id == generation + 1
        assert {(m.member_id, bytes(m.metadata)) for m in rejoined.members} == {
            (a_id, b"meta"), (answer[0].member_id, b"new topics")}
    finally:
        for link in (a, b, restarted):
            link.close()


def test_a_silent_static_member_is_removed_after_its_session_timeout(server):
    group = "static-silent-" + uuid.uuid4().hex[:8]
    raw, admin = Raw(server), KafkaAdminClient(bootstrap_servers=bootstrap(server))
    try:
        joined = join(raw, group, instance_id="s", session_timeout_ms=600)
        assert joined.error_code == 0
        members = admin.describe_groups([group])[group]["members"]
        assert [m["group_instance_id"] for m in members] == ["s"]
        wait_for(lambda: not admin.describe_groups([group])[group]["members"], timeout=5,
                 what="the static member's removal")
        assert beat(raw, group, joined.generation_id, joined.member_id, "s") == \
            ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        raw.close()
        admin.close()


def test_commit_metadata_and_leader_epoch_are_kept_with_the_offset_across_a_restart(tmp_path):
    process = RillProcess(tmp_path / "data", env=ENV).start()
    try:
        topic, group = new_topic(process), "meta-" + uuid.uuid4().hex[:8]
        produce(process, topic, 0, 8)
        raw = Raw(process)
        assert commit(raw, group, topic, 2, partition=1, metadata="checkpoint 2",
                      leader_epoch=7) == 0
        assert commit(raw, group, topic, 1, partition=2, metadata=None) == 0
        raw.close()
        process.restart()
        raw = Raw(process)
        try:
            [entry] = fetch_offsets(raw, group, topic, (1, 2, 3)).topics
            assert [(p.committed_offset, p.metadata, p.committed_leader_epoch)
                    for p in entry.partitions] == [(2, "checkpoint 2", 7), (1, "", -1),
                                                   (-1, "", -1)]
            # OffsetFetch v4 has no leader epoch field: the same answer without it
            old = raw.call(apis.OFFSET_FETCH, 4, OffsetFetch(group_id=group, topics=(
                OffsetFetch.OffsetFetchRequestTopic(name=topic, partition_indexes=(1,)),)))
            assert (old.topics[0].partitions[0].committed_offset,
                    old.topics[0].partitions[0].metadata) == (2, "checkpoint 2")
            # a new commit with neither clears both
            assert commit(raw, group, topic, 1, partition=1) == 0
            [entry] = fetch_offsets(raw, group, topic, (1,)).topics
            assert (entry.partitions[0].committed_offset, entry.partitions[0].metadata,
                    entry.partitions[0].committed_leader_epoch) == (1, "", -1)
        finally:
            raw.close()
    finally:
        process.kill()


def test_a_member_that_stops_heartbeating_is_removed_after_its_session_timeout(server):
    group = "silent-" + uuid.uuid4().hex[:8]
    raw, admin = Raw(server), KafkaAdminClient(bootstrap_servers=bootstrap(server))
    try:
        joined = join_as_member(raw, group, session_timeout_ms=600)
        members = admin.describe_groups([group])[group]["members"]
        assert [m["member_id"] for m in members] == [joined.member_id]
        wait_for(lambda: not admin.describe_groups([group])[group]["members"], timeout=5,
                 what="the silent member's removal")
        # no members and no committed offsets: the group is Dead, not listed (Kafka's rule)
        assert admin.describe_groups([group])[group]["group_state"] == "Dead"
        assert group not in {entry["group_id"] for entry in admin.list_groups()}
        assert beat(raw, group, joined.generation_id, joined.member_id) == \
            ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        raw.close()
        admin.close()


def test_a_member_that_does_not_rejoin_is_dropped_after_the_rebalance_timeout(server):
    """JoinGroup v3 (no MEMBER_ID_REQUIRED): the first member joins at once; a second member's
    join waits for the first to rejoin, which it never does: after the rebalance timeout
    (1 s, far below the 10 s session timeout) the join completes without it."""
    group = "norejoin-" + uuid.uuid4().hex[:8]
    raw = Raw(server)
    other = Raw(server)

    def join_v3(link: Raw, member_id: str = ""):
        protocol = JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b"m")
        return link.call(apis.JOIN_GROUP, 3, JoinGroup(
            group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=1000,
            member_id=member_id, protocol_type="consumer", protocols=(protocol,)))

    try:
        first = join_v3(raw)
        assert first.error_code == 0 and first.member_id and first.generation_id == 1
        start = time.monotonic()
        second = join_v3(other)
        waited = time.monotonic() - start
        assert second.error_code == 0 and second.generation_id == 2
        assert second.leader == second.member_id
        assert [m.member_id for m in second.members] == [second.member_id]
        assert 0.8 < waited < 5
        beat = raw.call(apis.HEARTBEAT, 3, Heartbeat(
            group_id=group, generation_id=1, member_id=first.member_id))
        assert beat.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        raw.close()
        other.close()


def test_a_member_sharing_no_protocol_with_the_group_is_refused(server):
    group = "proto-" + uuid.uuid4().hex[:8]
    raw = Raw(server)
    try:
        assert join(raw, group, instance_id="a").error_code == 0  # protocol "range"
        protocol = JoinGroup.JoinGroupRequestProtocol(name="roundrobin", metadata=b"m")
        refused = raw.call(apis.JOIN_GROUP, 7, JoinGroup(
            group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
            member_id="", group_instance_id="b", protocol_type="consumer",
            protocols=(protocol,)))
        assert refused.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    finally:
        raw.close()


def test_an_empty_group_with_committed_offsets_stays_listed_as_empty(server):
    topic, group = new_topic(server), "kept-" + uuid.uuid4().hex[:8]
    produce(server, topic, 0, 4)
    raw, admin = Raw(server), KafkaAdminClient(bootstrap_servers=bootstrap(server))
    try:
        joined = join_as_member(raw, group)
        me, generation = joined.member_id, joined.generation_id
        assert sync(raw, group, generation, me, {me: b"all"}).error_code == 0
        assert commit(raw, group, topic, 1, generation, me) == 0
        raw.call(apis.LEAVE_GROUP, 4, LeaveGroup(group_id=group, members=(
            LeaveGroup.MemberIdentity(member_id=me),)))
        listed = {entry["group_id"]: entry for entry in admin.list_groups()}
        assert listed[group]["group_state"] == "Empty"
        described = admin.describe_groups([group])[group]
        assert (described["group_state"], described["members"]) == ("Empty", [])
        # a group only committed to (assign() consumers), never joined, is Empty as well
        simple = "simple-" + uuid.uuid4().hex[:8]
        assert commit(raw, simple, topic, 1) == 0
        listed = {entry["group_id"]: entry for entry in admin.list_groups()}
        assert listed[simple]["group_state"] == "Empty"
        assert admin.describe_groups([simple])[simple]["group_state"] == "Empty"
    finally:
        raw.close()
        admin.close()


def test_the_initial_rebalance_delay_gathers_members_into_the_first_generation(tmp_path):
    """[kafka] group_initial_rebalance_delay: the first member's join is held so that the
    second, joining during the delay, is in the same first generation."""
    env = {**ENV, "RILL_KAFKA_GROUP_INITIAL_REBALANCE_DELAY": "2 s"}
    process = RillProcess(tmp_path / "data", env=env).start()
    group = "delayed-" + uuid.uuid4().hex[:8]
    a, b = Raw(process), Raw(process)
    try:
        thread, first = in_thread(join, a, group, instance_id="a")
        second = join(b, group, instance_id="b")
        thread.join(10)
        [first] = first
        assert first.error_code == second.error_code == 0
        assert first.generation_id == second.generation_id == 1
        leader = first if first.leader == first.member_id else second
        assert {m.member_id for m in leader.members} == {first.member_id, second.member_id}
    finally:
        a.close()
        b.close()
        process.kill()
