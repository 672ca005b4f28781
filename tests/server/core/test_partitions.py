"""Creating and deleting topics and partitions: a failure at any step leaves nothing behind and
changes nothing (in-process core; failures injected into one step at a time)."""

from __future__ import annotations

import asyncio

import pytest

from rill import errors
from rill.server.protocols.iggy.dispatch import execute
from rill.protocol.commands.messages import SendMessages
from rill.protocol.commands.partitions import CreatePartitions, DeletePartitions
from rill.protocol.commands.streams import CreateStream, DeleteStream
from rill.protocol.commands.topics import CreateTopic, DeleteTopic
from rill.protocol.messages import Message, encode_messages
from rill.protocol.primitives import CompressionAlgorithm, Identifier, Partitioning, Transport
from rill.server.config import ServerConfig
from rill.server.core.core import Core
from rill.server.core.model import Session

ROOT = Session(1, "127.0.0.1:1", Transport.TCP, user_id=1)
STREAM = Identifier.of(1)


def create_topic(name: str, partitions: int, topic_id: int = 0) -> CreateTopic:
    return CreateTopic(STREAM, topic_id, partitions, CompressionAlgorithm.NONE, 0, 0, 0, name)


def run_core(tmp_path, scenario) -> None:
    async def main() -> None:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        config.root.password_hash_cost = 4
        for attempt in range(2):  # the second start proves the first left a sound directory
            core = Core(config)
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
