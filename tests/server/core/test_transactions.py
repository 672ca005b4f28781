"""Staged appends (rill extension 1010-1013) through a real server (owners included), and the
crash replay of a decided commit, fences, limits, expiry and journal migration inside one
process."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from rill import errors
from rill.server.protocols.iggy.dispatch import execute
from rill.client import Client, Message, Permissions
from rill.protocol.iggy.commands.messages import SendMessages
from rill.protocol.iggy.commands.streams import CreateStream
from rill.protocol.iggy.commands.topics import CreateTopic
from rill.protocol.iggy.commands.transactions import (
    AbortStagedMessages,
    CommitStagedMessages,
    GetProducerState,
    StageMessages,
)
from rill.protocol.iggy.commands.users import LoginUser
from rill.protocol.iggy.messages import iter_polled_messages
from rill.protocol.permissions import GlobalPermissions
from rill.protocol.iggy.stored import encode_stored_records
from rill.protocol.primitives import CompressionAlgorithm
from rill.protocol.iggy.primitives import Identifier, Partitioning
from rill.protocol.iggy.responses.transactions import CommitOutcome, StagedHandle, StageOutcome
from rill.server.config import ServerConfig, load_config
from rill.server.core.core import Core
from in_process_core import twin_core
from rill.server.storage.paths import DataPaths


@pytest.fixture
def client(rill_server):
    with Client(rill_server.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("s", stream_id=1)
        client.create_topic(1, "t", partitions_count=2)
        yield client


def payloads(client, partition_id: int) -> list[bytes]:
    found = client.poll_messages_columnar(1, "t", partition_id, 0, 1000)
    return [message.payload for message in found.messages]


def test_staged_messages_are_invisible_until_the_commit(client) -> None:
    first = client.stage_messages("q", 0, 0, 11, 1, "t", [b"a", b"b"], partitioning=1)
    assert (first.outcome, first.partition_id, first.staged_messages) == (StageOutcome.STAGED, 1, 2)
    client.stage_messages("q", 0, 0, 11, 1, "t", [Message(b"c", id=7)], partitioning=2)
    client.stage_messages("q", 0, 1, 12, "s", 1, [b"d"], partitioning=1)
    assert payloads(client, 1) == [] and payloads(client, 2) == []
    state = client.get_producer_state("q")
    assert (state.last_batch, state.staged_handles, state.staged_messages) == (None, 2, 4)
    result = client.commit_staged_messages("q", 0, [(0, 11, 3), (1, 12, 1)])
    assert (result.outcome, result.messages_count) == (CommitOutcome.COMMITTED, 4)
    assert payloads(client, 1) == [b"a", b"b", b"d"] and payloads(client, 2) == [b"c"]
    assert client.poll_messages_columnar(1, "t", 2, 0, 1).messages[0].id == 7
    state = client.get_producer_state("q")
    assert (state.last_batch, state.staged_handles) == (0, 0)


def test_a_replayed_batch_appends_nothing(client) -> None:
    client.stage_messages("q", 5, 0, 1, 1, "t", [b"x"], partitioning=1)
    assert client.commit_staged_messages("q", 5, [(0, 1, 1)]).outcome == CommitOutcome.COMMITTED
    # the replay stages again (a new attempt) and commits again: both are no-ops
    again = client.stage_messages("q", 5, 0, 2, 1, "t", [b"x"], partitioning=1)
    assert again.outcome == StageOutcome.ALREADY_COMMITTED
    replay = client.commit_staged_messages("q", 5, [(0, 2, 1)])
    assert (replay.outcome, replay.messages_count) == (CommitOutcome.ALREADY_COMMITTED, 0)
    older = client.commit_staged_messages("q", 3, [])
    assert older.outcome == CommitOutcome.ALREADY_COMMITTED
    assert payloads(client, 1) == [b"x"]
    assert client.get_producer_state("q").staged_handles == 0


def test_attempts_a_commit_does_not_name_are_dropped(client) -> None:
    client.stage_messages("q", 1, 0, 100, 1, "t", [b"failed attempt"], partitioning=1)
    client.stage_messages("q", 1, 0, 101, 1, "t", [b"retry"], partitioning=1)
    client.commit_staged_messages("q", 1, [(0, 101, 1)])
    assert payloads(client, 1) == [b"retry"]
    assert client.get_producer_state("q").staged_handles == 0


def test_abort_leaves_nothing(client) -> None:
    client.stage_messages("q", 2, 0, 1, 1, "t", [b"a"], partitioning=1)
    client.stage_messages("q", 2, 1, 1, 1, "t", [b"b"], partitioning=2)
    client.stage_messages("q", 3, 0, 1, 1, "t", [b"next batch"], partitioning=2)
    client.abort_staged_messages("q", 2)
    state = client.get_producer_state("q")
    assert (state.last_batch, state.staged_handles, state.staged_messages) == (None, 1, 1)
    with pytest.raises(errors.StagedMessagesNotFound):  # the aborted handles are gone
        client.commit_staged_messages("q", 2, [(0, 1, 1)])
    client.abort_staged_messages("unknown producer", 1)  # nothing to do, no error
    client.stage_messages("q", 4, 0, 1, 1, "t", [b"failed attempt"], partitioning=1)
    client.stage_messages("q", 4, 1, 1, 1, "t", [b"good task"], partitioning=1)
    client.abort_staged_messages("q", 4, task_id=0, attempt_id=1)  # one handle only
    assert client.commit_staged_messages("q", 4, [(1, 1, 1)]).messages_count == 1
    assert payloads(client, 1) == [b"good task"]


def test_an_aborted_run_stages_nothing_more_but_a_new_run_does(client) -> None:
    client.stage_messages("q", 6, 0, 1, 1, "t", [b"run 7"], partitioning=1, run_id=7)
    client.abort_staged_messages("q", 6, run_id=7)
    late = client.stage_messages("q", 6, 1, 1, 1, "t", [b"zombie"], partitioning=1, run_id=7)
    assert late.outcome == StageOutcome.ABORTED
    assert client.get_producer_state("q").staged_handles == 0
    client.abort_staged_messages("new producer", 1, run_id=3)  # before any of its stages
    early = client.stage_messages("new producer", 1, 0, 1, 1, "t", [b"late"], run_id=3)
    assert early.outcome == StageOutcome.ABORTED
    replay = client.stage_messages("q", 6, 0, 2, 1, "t", [b"run 8"], partitioning=1, run_id=8)
    assert replay.outcome == StageOutcome.STAGED
    client.commit_staged_messages("q", 6, [(0, 2, 1)])
    assert payloads(client, 1) == [b"run 8"]
    assert payloads(client, 2) == []


def test_a_commit_with_a_wrong_count_or_missing_handle_fails_whole(client) -> None:
    client.stage_messages("q", 1, 0, 1, 1, "t", [b"a", b"b"], partitioning=1)
    with pytest.raises(errors.StagedMessagesCountMismatch) as caught:
        client.commit_staged_messages("q", 1, [(0, 1, 3)])
    assert caught.value.code == 11001
    with pytest.raises(errors.StagedMessagesNotFound):
        client.commit_staged_messages("q", 1, [(0, 1, 2), (1, 1, 5)])
    assert payloads(client, 1) == [] and client.get_producer_state("q").last_batch is None
    # a task that staged nothing names a count of 0 and needs no handle
    assert client.commit_staged_messages("q", 1, [(0, 1, 2), (1, 1, 0)]).messages_count == 2


def corrupted(count: int, bad: int) -> tuple[bytes, bytes]:
    """``count`` stored records of one size whose ``bad``-th payload no longer matches its
    checksum."""
    positions, records = encode_stored_records([b"%08d" % n for n in range(count)], unix_ms=1)
    size = len(records) // count
    spoiled = bytearray(records)
    spoiled[(bad + 1) * size - 1] ^= 1
    return positions, bytes(spoiled)


def test_bad_stages_are_refused_at_stage_time(client) -> None:
    positions, records = encode_stored_records([b"abc", b"def"], unix_ms=1)
    for bad in (
        (positions, records[:-1]),  # the last record is cut
        (positions[:4], records),  # positions disagree with the records
        (positions, records[:-1] + b"X"),  # a checksum does not match
        (bytes(4), bytes(46)),  # a payload_length of 0
        corrupted(100, 50),  # one record of many (of one size) has a wrong checksum
        corrupted(100, 0),
    ):
        with pytest.raises(errors.InvalidCommand):
            client.stage_messages("q", 1, 0, 1, 1, "t", bad, partitioning=1)
    with pytest.raises(errors.InvalidMessagesCount):
        client.stage_messages("q", 1, 0, 1, 1, "t", (b"", b""), partitioning=1)
    with pytest.raises(errors.PartitionNotFound):
        client.stage_messages("q", 1, 0, 1, 1, "t", [b"a"], partitioning=9)
    with pytest.raises(errors.TopicNameNotFound):
        client.stage_messages("q", 1, 0, 1, 1, "nope", [b"a"])
    assert client.get_producer_state("q").staged_handles == 0


def test_keyed_and_balanced_stages_pick_partitions_like_send(client) -> None:
    key = client.stage_messages("q", 1, 0, 1, 1, "t", [b"a"],
                                partitioning=Partitioning.messages_key(b"hello"))
    client.send_messages(1, "t", [b"sent"], partitioning=Partitioning.messages_key(b"hello"))
    assert payloads(client, key.partition_id) == [b"sent"]
    balanced = {client.stage_messages("q", 1, 0, 1, 1, "t", [b"b"]).partition_id
                for _ in range(4)}
    assert balanced == {1, 2}


def test_permissions_follow_send(rill_server, client) -> None:
    client.create_user("reader", "secret-1",
                       permissions=Permissions(GlobalPermissions(poll_messages=True), None))
    with Client(rill_server.address) as reader:
        reader.login_user("reader", "secret-1")
        assert reader.poll_messages_columnar(1, "t", 1, 0, 10).count == 0
        with pytest.raises(errors.Unauthorized):
            reader.stage_messages("q", 1, 0, 1, 1, "t", [b"a"], partitioning=1)
        client.stage_messages("q", 1, 0, 1, 1, "t", [b"a"], partitioning=1)
        with pytest.raises(errors.Unauthorized):
            reader.commit_staged_messages("q", 1, [(0, 1, 1)])
        with pytest.raises(errors.Unauthorized):
            reader.abort_staged_messages("q", 1)
        assert reader.get_producer_state("q").staged_messages == 1


def test_staged_data_and_commits_survive_restarts(rill_server, client) -> None:
    client.stage_messages("q", 1, 0, 1, 1, "t", [b"one"], partitioning=1)
    client.commit_staged_messages("q", 1, [(0, 1, 1)])
    client.stage_messages("q", 2, 0, 1, 1, "t", [b"two", b"three"], partitioning=1)
    rill_server.kill()
    rill_server.start()
    with Client(rill_server.address) as again:
        again.login_user("iggy", "iggy")
        state = again.get_producer_state("q")
        assert (state.last_batch, state.staged_handles, state.staged_messages) == (1, 1, 2)
        assert payloads(again, 1) == [b"one"]
        again.commit_staged_messages("q", 2, [(0, 1, 2)])
        assert payloads(again, 1) == [b"one", b"two", b"three"]
    rill_server.restart()  # a clean stop and start
    with Client(rill_server.address) as again:
        again.login_user("iggy", "iggy")
        assert again.get_producer_state("q").last_batch == 2
        assert payloads(again, 1) == [b"one", b"two", b"three"]


# ---------------------------------------------------------------- owners


A, B = "spark query A", "spark query B"


def test_a_producer_refuses_the_requests_of_another_owner(rill_server, client) -> None:
    """Batch ids that start again (a fresh checkpoint) must not be taken for replays of
    another owner's batches: every request of the other owner fails, and changes nothing."""
    for batch in (0, 1):
        client.stage_messages("q", batch, 0, 1, 1, "t", [f"A{batch}"], partitioning=1, owner=A)
        client.commit_staged_messages("q", batch, [(0, 1, 1)], owner=A)
    client.stage_messages("q", 2, 0, 1, 1, "t", [b"A2"], partitioning=1, owner=A)  # in flight
    before = client.get_producer_state("q")
    for refused in (
        lambda: client.stage_messages("q", 0, 0, 2, 1, "t", [b"B0"], partitioning=1, owner=B),
        lambda: client.stage_messages("q", 9, 0, 2, 1, "t", [b"B9"], partitioning=1, owner=B),
        lambda: client.commit_staged_messages("q", 0, [(0, 2, 1)], owner=B),  # not a replay
        lambda: client.commit_staged_messages("q", 2, [(0, 1, 1)], owner=B),
        lambda: client.abort_staged_messages("q", 2, run_id=5, owner=B),
        lambda: client.abort_staged_messages("q", 2, task_id=0, attempt_id=1, owner=B),
    ):
        with pytest.raises(errors.ProducerOwnerMismatch) as caught:
            refused()
        assert caught.value.code == 11002
    assert client.get_producer_state("q") == before  # nothing staged, dropped or committed
    assert payloads(client, 1) == [b"A0", b"A1"]
    # the owner's replays are still no-ops, and its next batch lands
    again = client.stage_messages("q", 1, 0, 2, 1, "t", [b"A1"], partitioning=1, owner=A)
    assert again.outcome == StageOutcome.ALREADY_COMMITTED
    replay = client.commit_staged_messages("q", 1, [(0, 2, 0)], owner=A)
    assert replay.outcome == CommitOutcome.ALREADY_COMMITTED
    assert client.commit_staged_messages("q", 2, [(0, 1, 1)], owner=A).messages_count == 1
    # a writer that names no owner (version 0 of the codec) is not checked, as before owners
    assert client.commit_staged_messages("q", 2, []).outcome == CommitOutcome.ALREADY_COMMITTED
    rill_server.kill()  # the owner is durable
    rill_server.start()
    with Client(rill_server.address) as again:
        again.login_user("iggy", "iggy")
        with pytest.raises(errors.ProducerOwnerMismatch):
            again.stage_messages("q", 0, 0, 3, 1, "t", [b"B0"], partitioning=1, owner=B)
        assert again.commit_staged_messages("q", 2, [], owner=A).outcome == \
            CommitOutcome.ALREADY_COMMITTED
        assert payloads(again, 1) == [b"A0", b"A1", b"A2"]


def test_two_writers_sharing_a_fresh_producer_the_second_commit_fails(client) -> None:
    """Two owners race on a producer with no history: both may stage, the first commit makes
    its owner the producer's, and the other's commit of the same batch fails instead of
    being taken for a replay."""
    client.stage_messages("shared", 0, 0, 1, 1, "t", [b"A"], partitioning=1, owner=A)
    client.stage_messages("shared", 0, 0, 2, 1, "t", [b"B"], partitioning=1, owner=B)
    client.commit_staged_messages("shared", 0, [(0, 1, 1)], owner=A)
    with pytest.raises(errors.ProducerOwnerMismatch):
        client.commit_staged_messages("shared", 0, [(0, 2, 1)], owner=B)
    with pytest.raises(errors.ProducerOwnerMismatch):
        client.commit_staged_messages("shared", 1, [], owner=B)
    assert payloads(client, 1) == [b"A"]
    assert client.get_producer_state("shared").last_batch == 0


def test_a_producer_without_an_owner_takes_the_owner_of_its_next_appending_commit(
        client) -> None:
    client.stage_messages("old", 0, 0, 1, 1, "t", [b"v0 writer"], partitioning=1)
    client.commit_staged_messages("old", 0, [(0, 1, 1)])  # no owner named
    # a replay names an owner but appends nothing: no owner is recorded yet
    assert client.commit_staged_messages("old", 0, [], owner=B).outcome == \
        CommitOutcome.ALREADY_COMMITTED
    client.stage_messages("old", 1, 0, 1, 1, "t", [b"A1"], partitioning=1, owner=A)
    client.commit_staged_messages("old", 1, [(0, 1, 1)], owner=A)
    with pytest.raises(errors.ProducerOwnerMismatch):
        client.commit_staged_messages("old", 1, [], owner=B)
    assert payloads(client, 1) == [b"v0 writer", b"A1"]


def test_a_journal_from_before_owners_is_migrated_at_start(tmp_path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    with sqlite3.connect(DataPaths(data_dir).transactions_db) as db:
        db.executescript(
            "CREATE TABLE producers (producer_id TEXT PRIMARY KEY, last_committed_batch INTEGER"
            " NOT NULL, committed_at INTEGER NOT NULL);"
            "INSERT INTO producers VALUES ('p', 5, 1);")
    db.close()

    async def adopt(core: Core, session) -> None:
        producer = core.transactions.producers["p"]
        assert (producer.last_committed, producer.owner) == (5, None)
        replay = await execute(core, session, stage("p", 5, 0, b"old", owner=A))
        assert replay.outcome == StageOutcome.ALREADY_COMMITTED
        await execute(core, session, stage("p", 6, 0, b"new", owner=A))
        await execute(core, session, CommitStagedMessages("p", 6, (StagedHandle(0, 1, 1),), A))
        assert producer.owner == A

    async def restarted(core: Core, session) -> None:
        assert core.transactions.producers["p"].owner == A
        with pytest.raises(errors.ProducerOwnerMismatch):
            await execute(core, session, stage("p", 7, 0, b"other", owner=B))
        assert core.state.streams[1].topics[1].partitions[1].log.next_offset == 1

    run_core(data_dir, adopt)
    run_core(data_dir, restarted)


def test_staged_appends_are_refused_on_a_partition_in_a_cluster(tmp_path) -> None:
    """Staging files and the commit journal are one node's (not replicated): in a cluster a
    stage, and a commit of what was staged before the partition was placed, are refused with
    FeatureUnavailable, nothing appended; standalone, the same requests work."""
    from rill.server.core.cluster_view import Placement

    async def scenario(core: Core, session) -> None:
        partition = core.state.streams[1].topics[1].partitions[1]
        await execute(core, session, stage("p", 1, 0, b"before"))
        partition.placement = Placement(1, 1, (1, 2, 3), (1, 2, 3), 2)
        with pytest.raises(errors.FeatureUnavailable, match="not replicated"):
            await execute(core, session, stage("p", 2, 0, b"placed"))
        with pytest.raises(errors.FeatureUnavailable, match="not replicated"):
            await execute(core, session, CommitStagedMessages("p", 1, (StagedHandle(0, 1, 1),)))
        assert partition.log.next_offset == 0
        partition.placement = None
        await execute(core, session, CommitStagedMessages("p", 1, (StagedHandle(0, 1, 1),)))
        assert partition.log.next_offset == 1

    run_core(tmp_path / "data", scenario)


# ---------------------------------------------------------------- crash inside a commit


def stage(producer: str, batch: int, task: int, payload: bytes, owner: str = "") -> StageMessages:
    return StageMessages.of(producer, batch, 0, task, 1, 1, 1, Partitioning.partition_id(1),
                            [Message(payload)], owner=owner)


def run_core(data_dir, scenario, configure=None) -> None:
    """Run ``scenario(core, session)`` on an in-process Core with stream 1 / topic 1 (one
    partition) and a logged-in root session, then stop the Core; ``configure(config)`` may
    change the configuration first."""

    async def main() -> None:
        config = ServerConfig()
        config.system.path = str(data_dir)
        if configure is not None:
            configure(config)
        core = twin_core(config)
        await core.start()
        try:
            session = core.connect("127.0.0.1:1", "tcp")
            await execute(core, session, LoginUser("iggy", "iggy"))
            if 1 not in core.state.streams:
                await execute(core, session, CreateStream(1, "s"))
                await execute(core, session, CreateTopic(
                    Identifier(1), 1, 1, CompressionAlgorithm.NONE, 0, 0, 0, "t"))
            await scenario(core, session)
        finally:
            await core.stop()

    asyncio.run(main())


def test_a_commit_interrupted_after_its_decision_is_finished_exactly_once(tmp_path, monkeypatch):
    """The second region's append fails after the decision: the batch counts as committed,
    and the next start appends exactly what is missing (the first region is not repeated)."""

    def region(*payloads: bytes):
        return StageMessages.of("p", 4, 0, 0, 1, 1, 1, Partitioning.partition_id(1),
                                [Message(p) for p in payloads])

    async def crash(core: Core, session) -> None:
        await execute(core, session, region(b"a", b"b"))
        await execute(core, session, region(b"c"))
        log_class = type(core.state.streams[1].topics[1].partitions[1].log)  # files or memory
        real_append = log_class.append_stamped
        calls = []

        def failing_append(log, records, positions, now_us):
            calls.append(1)
            if len(calls) == 2:
                raise OSError("disk went away")
            return real_append(log, records, positions, now_us)

        monkeypatch.setattr(log_class, "append_stamped", failing_append)
        with pytest.raises(OSError):
            await execute(core, session, CommitStagedMessages("p", 4, (StagedHandle(0, 1, 3),)))
        monkeypatch.setattr(log_class, "append_stamped", real_append)
        log = core.state.streams[1].topics[1].partitions[1].log
        assert log.next_offset == 2  # the first region landed, the second did not
        state = await execute(core, session, GetProducerState("p"))
        assert state.last_batch == 4  # decided: a replay of batch 4 must append nothing

    async def restarted(core: Core, session) -> None:
        log = core.state.streams[1].topics[1].partitions[1].log
        found = log.read_columnar(0, 10, 1 << 20)
        assert [m.payload for m in iter_polled_messages(found.records, found.count)] == [
            b"a", b"b", b"c"]
        state = await execute(core, session, GetProducerState("p"))
        assert (state.last_batch, state.staged_handles) == (4, 0)
        assert core.transactions.journal.load_pending() == []

    run_core(tmp_path / "data", crash)
    run_core(tmp_path / "data", restarted)


def test_a_replay_skips_the_part_of_a_region_already_in_the_log(tmp_path) -> None:
    """A torn write can leave part of a staged region in the log; the replay appends the
    rest only (records after the recorded next offset)."""

    async def scenario(core: Core, session) -> None:
        await execute(core, session, StageMessages.of(
            "p", 1, 0, 0, 1, 1, 1, Partitioning.partition_id(1),
            [Message(b"one"), Message(b"two, longer"), Message(b"three")]))
        service = core.transactions
        staged = list(service.producers["p"].staged[1].values())
        partition = core.state.streams[1].topics[1].partitions[1]
        appended = service._apply(staged, {(1, 1, 1): partition}, skips={(1, 1, 1): 1})
        found = partition.log.read_columnar(0, 10, 1 << 20)
        messages = list(iter_polled_messages(found.records, found.count))
        assert appended == 2
        assert [(m.offset, m.payload) for m in messages] == [(0, b"two, longer"), (1, b"three")]

    run_core(tmp_path / "data", scenario)


# ---------------------------------------------------------------- fences across restarts


def fences_in_journal(data_dir) -> list[tuple]:
    with sqlite3.connect(DataPaths(data_dir).transactions_db) as db:
        return sorted(db.execute("SELECT producer_id, batch_id, run_id FROM fences"))


def test_a_fenced_run_stays_fenced_across_restarts_and_crashes(rill_server, client) -> None:
    client.stage_messages("q", 6, 0, 1, 1, "t", [b"run 7"], partitioning=1, run_id=7)
    client.abort_staged_messages("q", 6, run_id=7)
    client.abort_staged_messages("early", 2, run_id=9)  # fenced before any stage call
    assert fences_in_journal(rill_server.data_dir) == [("early", 2, 9), ("q", 6, 7)]
    for restart in (rill_server.restart, lambda: (rill_server.kill(), rill_server.start())):
        restart()
        with Client(rill_server.address) as again:
            again.login_user("iggy", "iggy")
            late = again.stage_messages("q", 6, 1, 1, 1, "t", [b"zombie"], partitioning=1,
                                        run_id=7)
            assert late.outcome == StageOutcome.ABORTED
            early = again.stage_messages("early", 2, 0, 1, 1, "t", [b"late"], run_id=9)
            assert early.outcome == StageOutcome.ABORTED
            assert again.get_producer_state("q").staged_handles == 0
    with Client(rill_server.address) as again:
        again.login_user("iggy", "iggy")
        # a later run of the batch commits; the batch's fences are no longer needed
        again.stage_messages("q", 6, 0, 2, 1, "t", [b"run 8"], partitioning=1, run_id=8)
        again.commit_staged_messages("q", 6, [(0, 2, 1)])
        assert payloads(again, 1) == [b"run 8"]
    assert fences_in_journal(rill_server.data_dir) == [("early", 2, 9)]


# ---------------------------------------------------------------- topic size limits


def test_a_commit_that_would_overflow_the_topic_fails_whole(tmp_path) -> None:
    def configure(config: ServerConfig) -> None:
        config.system.segment.size = 1000  # a max topic size may not be below it

    def staged(batch: int, task: int, partition: int, payload: bytes, count: int):
        return StageMessages.of("q", batch, 0, task, 1, 1, 2, Partitioning.partition_id(partition),
                                [Message(payload)] * count)

    def commit(batch: int, *handles: tuple[int, int]):
        return CommitStagedMessages("q", batch, tuple(StagedHandle(t, 1, n) for t, n in handles))

    async def scenario(core: Core, session) -> None:
        # 100-byte payloads are 145-byte records: 10 fit in 1500 bytes, 11 do not
        await execute(core, session, CreateTopic(
            Identifier(1), 2, 2, CompressionAlgorithm.NONE, 0, 1500, 0, "small"))
        topic = core.state.streams[1].topics[2]
        await execute(core, session, staged(1, 0, 1, b"x" * 100, 6))
        await execute(core, session, staged(1, 1, 2, b"y" * 100, 5))
        with pytest.raises(errors.TopicFull):
            await execute(core, session, commit(1, (0, 6), (1, 5)))
        state = await execute(core, session, GetProducerState("q"))
        assert (state.last_batch, state.staged_messages) == (None, 11)  # nothing dropped
        assert topic.messages_count == 0  # nothing appended
        await execute(core, session, AbortStagedMessages("q", 1, 0, True, 1, 1))
        assert (await execute(core, session, commit(1, (0, 6)))).messages_count == 6
        await execute(core, session, staged(2, 0, 2, b"z" * 100, 4))
        assert (await execute(core, session, commit(2, (0, 4)))).messages_count == 4
        assert topic.size_bytes == 1450
        await execute(core, session, SendMessages.of(1, 2, Partitioning.partition_id(1),
                                                    [Message(b"w" * 100)]))  # SEND: not full yet
        with pytest.raises(errors.TopicFull):  # now full: refused already at stage time
            await execute(core, session, staged(3, 0, 1, b"v", 1))

    run_core(tmp_path / "data", scenario, configure)


# ---------------------------------------------------------------- expiry of staged data




def test_the_expiry_is_a_config_key_with_an_environment_override() -> None:
    assert ServerConfig().transactions.staged_expiry == 3600
    config = load_config(environ={"RILL_TRANSACTIONS_STAGED_EXPIRY": "90 s",
                                  "RILL_TRANSACTIONS_CLEANER_INTERVAL": "none"})
    assert (config.transactions.staged_expiry, config.transactions.cleaner_interval) == (
        90, float("inf"))


def test_staged_batches_idle_for_the_expiry_are_dropped(tmp_path) -> None:
    def configure(config: ServerConfig) -> None:
        config.transactions.staged_expiry = 10.0
        config.transactions.cleaner_interval = float("inf")  # expire() is called by hand

    async def scenario(core: Core, session) -> None:
        service = core.transactions
        staging = core.state.paths.staging_dir
        await execute(core, session, stage("old", 1, 0, b"a"))
        await execute(core, session, stage("old", 1, 1, b"b"))
        await execute(core, session, stage("busy", 1, 0, b"c"))
        await execute(core, session, stage("busy", 2, 0, b"d"))
        await execute(core, session, AbortStagedMessages("gone", 5, run_id=3))
        now = core.state.clock()
        for staged in service.producers["old"].staged[1].values():
            staged.last_active_us = now - 11_000_000  # both handles idle for 11 s
        service.producers["busy"].staged[1][(0, 1)].last_active_us = now - 11_000_000
        service.producers["busy"].staged[2][(0, 1)].last_active_us = now - 5_000_000
        assert service.expire(now) == (2 + 1, 0)
        assert "old" not in service.producers  # nothing left to remember
        assert sorted(service.producers["busy"].staged) == [2]
        assert len(list(staging.iterdir())) == 1
        # the late commit of an expired batch fails and shows nothing
        with pytest.raises(errors.StagedMessagesNotFound):
            await execute(core, session, CommitStagedMessages(
                "old", 1, (StagedHandle(0, 1, 1), StagedHandle(1, 1, 1))))
        assert core.state.streams[1].topics[1].partitions[1].log.next_offset == 0
        # fences expire too, in memory and in the journal
        assert service.expire(now + 10_000_000) == (1, 1)
        assert service.journal.load_fences() == [] and service.producers == {}

    run_core(tmp_path / "data", scenario, configure)


def test_the_background_cleaner_drops_expired_staged_data(tmp_path) -> None:
    def configure(config: ServerConfig) -> None:
        config.transactions.staged_expiry = 0.05
        config.transactions.cleaner_interval = 0.02

    async def scenario(core: Core, session) -> None:
        await execute(core, session, stage("abandoned", 1, 0, b"a"))
        for _ in range(1000):  # bounded wait (up to 20 s) for the cleaner to run
            if "abandoned" not in core.transactions.producers:
                break
            await asyncio.sleep(0.02)
        assert "abandoned" not in core.transactions.producers
        assert list(core.state.paths.staging_dir.iterdir()) == []

    run_core(tmp_path / "data", scenario, configure)


def test_after_a_restart_expiry_counts_from_the_staged_file_time(tmp_path) -> None:
    async def first(core: Core, session) -> None:
        await execute(core, session, stage("p", 1, 0, b"a"))

    async def second(core: Core, session) -> None:
        [staged] = core.transactions.producers["p"].staged[1].values()
        assert staged.last_active_us == staged.path.stat().st_mtime_ns // 1000
        assert core.transactions.expire(staged.last_active_us + 3_599_000_000) == (0, 0)
        assert core.transactions.expire(staged.last_active_us + 3_600_000_000) == (1, 0)

    run_core(tmp_path / "data", first)
    run_core(tmp_path / "data", second)


@pytest.mark.parametrize("fsync, synchronous", [("never", 1), ("interval", 2), ("always", 2)])
def test_the_journal_syncs_every_commit_unless_fsync_is_never(tmp_path, fsync, synchronous):
    """A commit decided in the journal must not be lost to a power cut while the messages it
    appended (synced within the interval) survive: a replay would append them twice."""
    seen = []

    def configure(config: ServerConfig) -> None:
        config.system.fsync = fsync

    async def scenario(core, session) -> None:
        journal = core.transactions.journal
        seen.append(journal._db.execute("PRAGMA synchronous").fetchone()[0])

    run_core(tmp_path, scenario, configure)
    assert seen == [synchronous]  # 1 NORMAL, 2 FULL
