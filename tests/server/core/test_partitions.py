"""Creating and deleting topics and partitions: a failure at any step leaves nothing behind and
changes nothing (in-process core; failures injected into one step at a time); the files are
made and removed off the event loop, which keeps serving everyone else meanwhile (issue 28
item 5; one test over real connections)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rill import errors
from rill.server.protocols.iggy.dispatch import execute
from rill.protocol.iggy.commands.messages import SendMessages
from rill.protocol.iggy.commands.partitions import CreatePartitions, DeletePartitions
from rill.protocol.iggy.commands.streams import CreateStream, DeleteStream, PurgeStream
from rill.protocol.iggy.commands.system import Ping
from rill.protocol.iggy.commands.topics import CreateTopic, DeleteTopic, GetTopic, PurgeTopic
from rill.protocol.iggy.messages import Message, encode_messages
from rill.protocol.primitives import CompressionAlgorithm
from rill.protocol.iggy.primitives import Identifier, Partitioning
from rill.server.config import ServerConfig
from rill.server.core.core import Core
from in_process_core import twin_core
from rill.server.core.model import Session
from raw_link import RawLink

ROOT = Session(1, "127.0.0.1:1", "tcp", user_id=1)
STREAM = Identifier.of(1)


def create_topic(name: str, partitions: int, topic_id: int = 0) -> CreateTopic:
    return CreateTopic(STREAM, topic_id, partitions, CompressionAlgorithm.NONE, 0, 0, 0, name)


def run_core(tmp_path, scenario) -> None:
    async def main() -> None:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        config.root.password_hash_cost = 4
        for attempt in range(2):  # the second start proves the first left a sound directory
            core = twin_core(config, files=True)  # (directories and files of partitions)
            await core.start()
            try:
                await scenario(core, attempt)
            finally:
                await core.stop()

    asyncio.run(main())


def fail_on(count: int, error: Exception):
    calls = []

    def failing(*args, **kwargs):
        calls.append(args)
        if len(calls) == count:
            raise error
        return original(*args, **kwargs)

    original = None

    def wrap(function):
        nonlocal original
        original = function
        return failing

    return wrap


def test_a_topic_whose_third_partition_cannot_be_made_leaves_nothing_behind(tmp_path):
    async def scenario(core: Core, attempt: int) -> None:
        state = core.state
        if attempt == 0:
            await execute(core, ROOT, CreateStream(1, "s"))
            opening = state.open_partition
            state.open_partition = fail_on(3, OSError(24, "Too many open files"))(opening)
            with pytest.raises(errors.CannotCreatePartitionDirectory) as raised:
                await execute(core, ROOT, create_topic("t", 5))
            assert "Too many open files" in raised.value.reason
            state.open_partition = opening
        assert state.store.load_topics() == [] and state.store.load_partitions() == []
        assert not state.paths.topics_dir(1).exists() or not any(state.paths.topics_dir(1).iterdir())
        assert list(state.streams[1].topics) == []
        if attempt == 1:  # the same name and id are free
            created = await execute(core, ROOT, create_topic("t", 5, topic_id=1))
            assert [p.id for p in created.partitions] == [1, 2, 3, 4, 5]

    run_core(tmp_path, scenario)


def test_a_failed_metadata_commit_removes_the_files_it_made(tmp_path):
    async def scenario(core: Core, attempt: int) -> None:
        state = core.state
        if attempt == 0:
            await execute(core, ROOT, CreateStream(1, "s"))
            await execute(core, ROOT, create_topic("t", 2))
            store = state.store
            full = errors.CannotWriteToFile(reason="disk full")
            store.create_topic = fail_on(1, full)(store.create_topic)
            store.create_partitions = fail_on(1, full)(store.create_partitions)
            store.create_stream = fail_on(1, full)(store.create_stream)
            with pytest.raises(errors.CannotWriteToFile):
                await execute(core, ROOT, create_topic("u", 3))
            with pytest.raises(errors.CannotWriteToFile):
                await execute(core, ROOT, CreatePartitions(STREAM, Identifier.of(1), 4))
            with pytest.raises(errors.CannotWriteToFile):
                await execute(core, ROOT, CreateStream(2, "other"))
            for name in ("create_topic", "create_partitions", "create_stream"):
                delattr(store, name)
        assert [(row.id, row.name) for row in state.store.load_topics()] == [(1, "t")]
        assert sorted(p.name for p in state.paths.partitions_dir(1, 1).iterdir()) == ["1", "2"]
        assert sorted(t.name for t in state.paths.topics_dir(1).iterdir()) == ["1"]
        assert sorted(s.name for s in state.paths.streams_dir.iterdir()) == ["1"]
        assert list(state.streams) == [1] and list(state.streams[1].topics[1].partitions) == [1, 2]

    run_core(tmp_path, scenario)


def test_a_failed_delete_commit_keeps_the_data(tmp_path):
    async def scenario(core: Core, attempt: int) -> None:
        state = core.state
        if attempt == 0:
            await execute(core, ROOT, CreateStream(1, "s"))
            await execute(core, ROOT, create_topic("t", 3))
            await execute(core, ROOT, _send(b"kept"))
            store = state.store
            failure = errors.CannotWriteToFile(reason="disk full")
            for name in ("delete_topic", "delete_partitions", "delete_stream"):
                setattr(store, name, fail_on(1, failure)(getattr(store, name)))
            with pytest.raises(errors.CannotWriteToFile):
                await execute(core, ROOT, DeleteTopic(STREAM, Identifier.of(1)))
            with pytest.raises(errors.CannotWriteToFile):
                await execute(core, ROOT, DeletePartitions(STREAM, Identifier.of(1), 2))
            with pytest.raises(errors.CannotWriteToFile):
                await execute(core, ROOT, DeleteStream(STREAM))
        assert sorted(p.name for p in state.paths.partitions_dir(1, 1).iterdir()) == ["1", "2", "3"]
        log = state.streams[1].topics[1].partitions[1].log
        assert log.read(0, 10)[0] == 1
        if attempt == 1:  # the deletions work once the store does
            await execute(core, ROOT, DeletePartitions(STREAM, Identifier.of(1), 2))
            assert sorted(p.name for p in state.paths.partitions_dir(1, 1).iterdir()) == ["1"]
            await execute(core, ROOT, DeleteStream(STREAM))
            assert list(state.paths.streams_dir.iterdir()) == []

    run_core(tmp_path, scenario)


def _send(payload: bytes) -> SendMessages:
    return SendMessages(STREAM, Identifier.of(1), Partitioning.partition_id(1),
                        encode_messages([Message(payload)]))


# -- issue 28 item 5: the files are made and removed off the event loop -------------------------


class Pinger(threading.Thread):
    """PINGs back to back on their own connection; ``answered`` counts the answers."""

    def __init__(self, server) -> None:
        super().__init__(daemon=True)
        self.link = RawLink(server.tcp_address)
        self.link.sock.settimeout(300)  # the old code holds a PING as long as the change
        self.link.login()
        self.answered = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            assert self.link.ask(Ping().to_frame()) == (0, b"")
            self.answered += 1


def _answered_meanwhile(pinger: Pinger, link: RawLink, frame: bytes) -> int:
    """PINGs answered between sending ``frame`` on ``link`` and its answer (which must be OK)."""
    before = pinger.answered
    status, _ = link.ask(frame)
    assert status == 0
    return pinger.answered - before


def test_pings_are_answered_while_1000_partitions_are_created_and_2000_deleted(rill_server):
    """Before, the event loop made every directory and file itself: a PING on another
    connection waited for the whole CREATE_TOPIC (1-2.5 s, more under load), so none was
    answered meanwhile. Now they keep being answered, and every partition exists after."""
    link = RawLink(rill_server.tcp_address)
    link.sock.settimeout(300)  # 1,000 partitions take seconds on a busy disk
    link.login()
    assert link.ask(CreateStream(1, "s").to_frame())[0] == 0
    pinger = Pinger(rill_server)
    pinger.start()
    try:
        meanwhile = {
            "create topic": _answered_meanwhile(pinger, link, create_topic("t", 1000).to_frame()),
            "create partitions": _answered_meanwhile(
                pinger, link, CreatePartitions(STREAM, Identifier.of(1), 1000).to_frame()),
        }
        status, details = link.ask(GetTopic(STREAM, Identifier.of(1)).to_frame())
        assert status == 0 and GetTopic.decode_response(details).topic.partitions_count == 2000
        partitions = rill_server.data_dir / "streams" / "1" / "topics" / "1" / "partitions"
        assert sorted(int(p.name) for p in partitions.iterdir()) == list(range(1, 2001))
        meanwhile["delete partitions"] = _answered_meanwhile(
            pinger, link, DeletePartitions(STREAM, Identifier.of(1), 1000).to_frame())
        assert sorted(int(p.name) for p in partitions.iterdir()) == list(range(1, 1001))
        assert link.ask(CreatePartitions(STREAM, Identifier.of(1), 1000).to_frame())[0] == 0
        meanwhile["delete topic"] = _answered_meanwhile(
            pinger, link, DeleteTopic(STREAM, Identifier.of(1)).to_frame())
        assert not partitions.exists()
        assert link.ask(GetTopic(STREAM, Identifier.of(1)).to_frame()) == (0, b"")
    finally:
        pinger.stop.set()
        pinger.join()
        link.close()
    # the old loop answered at most the PING it had read in the same turn as the request
    assert min(meanwhile.values()) >= 10, meanwhile


def test_a_topic_being_created_is_invisible_until_all_its_partitions_exist(tmp_path):
    """While the files of 1,000 partitions are made in a worker thread the loop serves other
    requests: the topic is not found, a second creation of its name waits and is refused, a
    send to another topic goes through; the topic appears whole, and a restart finds it."""
    async def scenario(core: Core, attempt: int) -> None:
        state = core.state
        if attempt == 0:
            await execute(core, ROOT, CreateStream(1, "s"))
            await execute(core, ROOT, create_topic("other", 1))
            creating = asyncio.ensure_future(execute(core, ROOT, create_topic("t", 1000)))
            twin = asyncio.ensure_future(execute(core, ROOT, create_topic("t", 3)))
            hidden = 0
            while not creating.done():
                try:  # not found, or found whole
                    found = await execute(core, ROOT, GetTopic(STREAM, Identifier.of("t")))
                    assert len(found.partitions) == 1000
                except errors.TopicNameNotFound:
                    hidden += 1
                await execute(core, ROOT, _send(b"meanwhile"))  # topic 1: "other"
                await asyncio.sleep(0)
            assert hidden >= 10  # the loop was not held while the files were made
            assert len((await creating).partitions) == 1000
            with pytest.raises(errors.TopicNameAlreadyExists):
                await twin
        topic = state.streams[1].topics.named("t")
        assert sorted(topic.partitions) == list(range(1, 1001))
        assert len(state.store.load_partitions()) == 1001
        assert len(list(state.paths.partitions_dir(1, topic.id).iterdir())) == 1000

    run_core(tmp_path, scenario)


def test_purging_many_partitions_lets_the_loop_serve_others_between_them(tmp_path):
    """Purging a topic (then a stream) of 300 partitions deletes and makes files and syncs a
    directory per partition: seconds, during which the loop used to serve nobody. Now it
    serves other requests between two partitions; the messages are gone from every
    partition, whose offsets start again at 0, and a restart finds them so."""
    async def scenario(core: Core, attempt: int) -> None:
        state = core.state
        if attempt == 0:
            await execute(core, ROOT, CreateStream(1, "s"))
            await execute(core, ROOT, create_topic("other", 1))
            await execute(core, ROOT, create_topic("t", 300))
            for purge in (PurgeTopic(STREAM, Identifier.of("t")), PurgeStream(STREAM)):
                for pid in range(1, 301):
                    await execute(core, ROOT, SendMessages(
                        STREAM, Identifier.of("t"), Partitioning.partition_id(pid),
                        encode_messages([Message(b"gone")] * 3)))
                purging = asyncio.ensure_future(execute(core, ROOT, purge))
                served = 0
                while not purging.done():
                    await execute(core, ROOT, _send(b"meanwhile"))  # topic 1: "other"
                    served += 1
                    await asyncio.sleep(0)
                await purging
                assert served >= 100, served  # the loop was not held for the whole purge
                topic = state.streams[1].topics.named("t")
                assert all(p.log.next_offset == 0 for p in topic.partitions.values())
            await execute(core, ROOT, SendMessages(STREAM, Identifier.of("t"),
                                                   Partitioning.partition_id(300),
                                                   encode_messages([Message(b"new")])))
        topic = state.streams[1].topics.named("t")
        assert [p.log.next_offset for p in topic.partitions.values()] == [0] * 299 + [1]
        assert state.streams[1].topics.named("other").partitions[1].log.next_offset > 100

    run_core(tmp_path, scenario)


def test_a_failure_half_way_through_1000_partitions_leaves_no_half_topic(tmp_path):
    async def scenario(core: Core, attempt: int) -> None:
        state = core.state
        if attempt == 0:
            await execute(core, ROOT, CreateStream(1, "s"))
            await execute(core, ROOT, create_topic("kept", 2))
            opening = state.open_partition
            state.open_partition = fail_on(500, OSError(28, "No space left on device"))(opening)
            creating = asyncio.ensure_future(execute(core, ROOT, create_topic("t", 1000)))
            adding = asyncio.ensure_future(
                execute(core, ROOT, CreatePartitions(STREAM, Identifier.of(1), 1000)))
            with pytest.raises(errors.CannotCreatePartitionDirectory):
                await creating
            state.open_partition = opening
            await adding  # the next change ran after it, and worked
            await execute(core, ROOT, DeletePartitions(STREAM, Identifier.of(1), 1000))
        assert [row.name for row in state.store.load_topics()] == ["kept"]
        assert sorted(t.name for t in state.paths.topics_dir(1).iterdir()) == ["1"]
        assert sorted(p.name for p in state.paths.partitions_dir(1, 1).iterdir()) == ["1", "2"]
        assert list(state.streams[1].topics) == [1]
        assert sorted(state.streams[1].topics[1].partitions) == [1, 2]

    run_core(tmp_path, scenario)


def test_a_failed_delete_of_2000_partitions_puts_them_back(tmp_path):
    """The partitions leave the model while their directories become tombstones; a commit that
    fails renames them back and puts them back, and the topic is whole after a restart."""
    async def scenario(core: Core, attempt: int) -> None:
        state = core.state
        if attempt == 0:
            await execute(core, ROOT, CreateStream(1, "s"))
            await execute(core, ROOT, create_topic("t", 1000))
            await execute(core, ROOT, CreatePartitions(STREAM, Identifier.of(1), 1000))
            await execute(core, ROOT, _send(b"kept"))
            store = state.store
            failure = errors.CannotWriteToFile(reason="disk full")
            store.delete_topic = fail_on(1, failure)(store.delete_topic)
            deleting = asyncio.ensure_future(
                execute(core, ROOT, DeleteTopic(STREAM, Identifier.of(1))))
            while state.streams[1].topics.get(1) is not None:
                await asyncio.sleep(0)
            with pytest.raises(errors.TopicIdNotFound):  # on its way out: nothing reaches it
                await execute(core, ROOT, _send(b"lost"))
            with pytest.raises(errors.CannotWriteToFile):
                await deleting
            del store.delete_topic
        topic = state.streams[1].topics[1]
        assert sorted(topic.partitions) == list(range(1, 2001))
        assert len(list(state.paths.partitions_dir(1, 1).iterdir())) == 2000
        assert topic.partitions[1].log.read(0, 10)[0] == 1
        if attempt == 1:
            await execute(core, ROOT, DeleteTopic(STREAM, Identifier.of(1)))
            assert list(state.paths.topics_dir(1).iterdir()) == []

    run_core(tmp_path, scenario)


def test_a_creation_whose_caller_is_cancelled_still_finishes(tmp_path):
    """A worker thread cannot be stopped half-way: the change runs to its end (and a stop
    waits for it), so a cancelled request leaves a whole topic, never half of one."""
    async def scenario(core: Core, attempt: int) -> None:
        state = core.state
        if attempt == 0:
            await execute(core, ROOT, CreateStream(1, "s"))
            creating = asyncio.ensure_future(execute(core, ROOT, create_topic("t", 300)))
            await asyncio.sleep(0.01)
            creating.cancel()
            with pytest.raises(asyncio.CancelledError):
                await creating
            return  # the stop waits for the change
        assert sorted(state.streams[1].topics[1].partitions) == list(range(1, 301))
        assert len(list(state.paths.partitions_dir(1, 1).iterdir())) == 300

    run_core(tmp_path, scenario)


def test_a_stream_made_while_its_namesake_is_deleted_waits_and_survives(tmp_path):
    """A stream on its way out holds its id and name until its deletion is committed and its
    files are gone: a new stream asking for them waits, then gets a directory and a store row
    of its own (never the tombstone's, never deleted by the older deletion's commit)."""
    async def scenario(core: Core, attempt: int) -> None:
        state = core.state
        if attempt == 0:
            await execute(core, ROOT, CreateStream(1, "s"))
            await execute(core, ROOT, create_topic("t", 1000))
            deleting = asyncio.ensure_future(execute(core, ROOT, DeleteStream(STREAM)))
            while state.streams.get(1) is not None:
                await asyncio.sleep(0)
            created = await execute(core, ROOT, CreateStream(0, "s"))  # the lowest free id: 1
            assert deleting.done() and created.stream.id == 1
        assert [(row.id, row.name) for row in state.store.load_streams()] == [(1, "s")]
        assert state.store.load_topics() == [] and list(state.streams[1].topics) == []
        assert sorted(p.name for p in state.paths.streams_dir.iterdir()) == ["1"]
        assert sorted(p.name for p in state.paths.stream_dir(1).iterdir()) == ["stream.json"]

    run_core(tmp_path, scenario)
