"""``core.catalog``: the core changes its catalog only through the port and applies the model
from what the port confirmed, not from what it proposed (as a catalog fed by a controller's
watch confirms the row as the controller holds it); a change confirmed by the catalog but made
by another node (``MemoryCatalog.change_elsewhere``, delivered through ``Catalog.follow``)
leaves the model, and the manifests, as the same change made here does. Runs on the memory
twin."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import pytest

from rill.protocol.iggy.messages import encode_messages
from rill.protocol.permissions import GlobalPermissions, Permissions
from rill.protocol.primitives import UserStatus
from rill.server.config import ServerConfig
from rill.server.core.broker import PartitionRef
from rill.server.core.catalog import (
    CatalogConflict,
    ConsumerGroupRow,
    GroupCreated,
    GroupDeleted,
    PositionRow,
    PositionStored,
    StreamRenamed,
    TopicUpdated,
    UserCreated,
    UserDeleted,
    UserUpdated,
)
from rill.server.core.core import Core
from rill.server.core.memory_catalog import MemoryCatalog
from rill.server.core.types import TopicSpec


class RewritingCatalog(MemoryCatalog):
    """A twin that confirms every row with its own creation time and settings (what another
    implementation may hold, e.g. a controller's clock)."""

    async def create_stream(self, row):
        return await super().create_stream(replace(row, created_at=42))

    async def create_topic(self, row, partitions):
        partitions = [replace(p, created_at=43) for p in partitions]
        return await super().create_topic(replace(row, message_expiry=7), partitions)

    async def update_topic(self, row):
        return await super().update_topic(replace(row, max_topic_size=9))

    async def create_user(self, row):
        return await super().create_user(replace(row, created_at=44))

    async def store_position(self, row):
        return await super().store_position(replace(row, next_offset=0, note="kept"))


def config_at(tmp_path) -> ServerConfig:
    config = ServerConfig()
    config.system.path = str(tmp_path / "data")
    config.root.password_hash_cost = 4
    return config


async def logged_in(core: Core):
    """The core's broker and a session of the root user on it."""
    session = core.broker.connect("127.0.0.1:1", "tcp")
    await core.broker.authenticate(session, "iggy", "iggy")
    return core.broker, session


def test_the_model_holds_what_the_catalog_confirmed(tmp_path):
    config = config_at(tmp_path)
    catalog = RewritingCatalog()

    async def main() -> None:
        core = Core(config, catalog=catalog)
        await core.start()
        try:
            broker, session = await logged_in(core)
            stream = await broker.create_namespace(session, "ns")
            topic = await broker.create_topic(session, "ns", TopicSpec("t", partitions_count=1))
            assert stream.created_at == 42 and core.state.streams[1].created_at == 42
            assert topic.message_expiry == 7 and topic.partitions[1].created_at == 43
            await broker.catalog.update_topic(session, "ns", "t",
                                              TopicSpec("t", max_topic_size=1 << 40))
            assert topic.max_topic_size == 9
            user = await broker.access.create_user(session, "someone", "password", 1, None)
            assert user.created_at == 44 and core.users.users[user.id].created_at == 44
            await broker.commit_offset(session, "c", PartitionRef("ns", "t", 1), 1, "note")
            partition = topic.partitions[1]
            assert (partition.positions["c"], partition.position_notes["c"]) == (0, "kept")
        finally:
            await core.stop()
        assert [row.created_at for row in catalog.load_streams()] == [42]

    asyncio.run(main())


def test_a_change_made_elsewhere_is_applied_as_the_same_change_made_here(tmp_path):
    config = config_at(tmp_path)
    catalog = MemoryCatalog()

    async def main() -> None:
        core = Core(config, catalog=catalog)
        await core.start()
        try:
            broker, session = await logged_in(core)
            here = await broker.create_namespace(session, "here")
            there = await broker.create_namespace(session, "there")
            mine = await broker.create_topic(session, "here", TopicSpec("t", partitions_count=1))
            theirs = await broker.create_topic(session, "there",
                                               TopicSpec("t", partitions_count=1))
            paths = core.state.paths

            # a consumer position, with its note and leader epoch, then one without them
            for note, epoch in (("n", 3), (None, None)):
                await broker.commit_offset(session, "c", PartitionRef("here", "t", 1), 1, note,
                                           epoch)
                await catalog.change_elsewhere(PositionStored(PositionRow(
                    there.id, theirs.id, 1, "c", 1, note, epoch)))
                assert [(p.positions, p.position_notes, p.position_epochs)
                        for p in (mine.partitions[1], theirs.partitions[1])] == [
                    ({"c": 1}, {"c": note} if note else {}, {"c": epoch} if epoch else {})] * 2

            # a renamed stream: found by its new name only, its manifest says it
            await broker.catalog.update_stream(session, "here", "here-renamed")
            await catalog.change_elsewhere(StreamRenamed(there.id, "there-renamed"))
            for stream, name in ((here, "here-renamed"), (there, "there-renamed")):
                assert broker.catalog.get_stream(session, name) is stream
                assert f'"name":"{name}"'.encode() in \
                    paths.stream_manifest(stream.id).read_bytes()
            assert {stream.name for stream in broker.catalog.get_streams(session)} == {
                "here-renamed", "there-renamed"}
            with pytest.raises(CatalogConflict):  # refused elsewhere: nothing is delivered
                await catalog.change_elsewhere(StreamRenamed(there.id, "here-renamed"))
            assert there.name == "there-renamed"

            # a topic's new name and settings
            await broker.catalog.update_topic(session, here.id, "t", TopicSpec(
                "u", message_expiry=5_000_000, max_topic_size=1 << 30))
            held = catalog.load_topics()[0]
            assert (held.stream_id, held.name, held.message_expiry) == (here.id, "u", 5_000_000)
            await catalog.change_elsewhere(TopicUpdated(replace(held, stream_id=there.id,
                                                                id=theirs.id)))
            for stream, topic in ((here, mine), (there, theirs)):
                assert broker.catalog.get_topic(session, stream.id, "u") is topic
                assert (topic.message_expiry, topic.max_topic_size) == (5_000_000, 1 << 30)
                assert b'"name":"u"' in paths.topic_manifest(stream.id, topic.id).read_bytes()

            # a consumer group, then its deletion with its positions
            mine_group = await broker.groups.create_consumer_group(session, here.id, "u", "g")
            await catalog.change_elsewhere(GroupCreated(ConsumerGroupRow(
                there.id, theirs.id, mine_group.id, "g")))
            theirs_group = broker.groups.get_consumer_group(session, there.id, "u", "g")
            assert [(group.id, group.name, group.partitions_count, group.key)
                    for group in (mine_group, theirs_group)] == [
                (1, "g", 1, "group:1")] * 2
            await broker.commit_offset(session, "group:1", PartitionRef(here.id, "u", 1), 1)
            await catalog.change_elsewhere(PositionStored(PositionRow(
                there.id, theirs.id, 1, "group:1", 1)))
            await broker.groups.delete_consumer_group(session, here.id, "u", "g")
            await catalog.change_elsewhere(GroupDeleted(there.id, theirs.id, 1, "group:1"))
            for stream in (here, there):
                assert broker.groups.get_consumer_groups(session, stream.id, "u") == []
            assert [(p.positions, p.position_notes, p.position_epochs)
                    for p in (mine.partitions[1], theirs.partitions[1])] == [
                ({"c": 1}, {}, {})] * 2

            # a change of what this node deleted meanwhile (delivered late) is dropped
            await broker.catalog.delete_topic(session, there.id, "u")
            core.apply(PositionStored(PositionRow(there.id, theirs.id, 1, "c", 1)))
            core.apply(TopicUpdated(replace(held, stream_id=there.id, id=theirs.id)))
            core.apply(GroupCreated(ConsumerGroupRow(there.id, theirs.id, 1, "g")))
            assert list(there.topics) == []
            assert (there.id, theirs.id) not in core.consumer_groups.topics
        finally:
            await core.stop()

    asyncio.run(main())


def test_a_user_changed_elsewhere_is_applied_as_the_same_change_made_here(tmp_path):
    """Users too: created, given permissions, deactivated (logged out everywhere), renamed
    and deleted by another node, each as the same change made here."""
    config = config_at(tmp_path)
    catalog = MemoryCatalog()
    readers = Permissions(GlobalPermissions(read_streams=True))

    async def main() -> None:
        core = Core(config, catalog=catalog)
        await core.start()
        try:
            broker = core.broker
            root = broker.connect("127.0.0.1:1", "tcp")
            await broker.authenticate(root, "iggy", "iggy")
            local = await broker.access.create_user(root, "here", "password", 1, None)
            held = next(row for row in catalog.load_users() if row.id == local.id)
            await catalog.change_elsewhere(UserCreated(replace(held, id=9, username="there")))
            users = core.users.users
            sessions = {}
            for name in ("here", "there"):
                sessions[name] = broker.connect(f"127.0.0.1:{len(sessions) + 2}", "tcp")
                assert await broker.authenticate(sessions[name], name, "password") == \
                    users[local.id if name == "here" else 9].id
            assert core.users._next_id == 10  # ids go on past the other node's

            await broker.access.update_permissions(root, "here", readers)
            await catalog.change_elsewhere(UserUpdated(replace(
                catalog.load_users()[-1], permissions=readers.to_bytes())))
            for name in ("here", "there"):
                broker.catalog.get_streams(sessions[name])  # READ_STREAMS granted
                assert broker.access.get_user(root, name).permissions == readers

            await broker.access.update_user(root, "here", "here-renamed",
                                            int(UserStatus.INACTIVE))
            await catalog.change_elsewhere(UserUpdated(replace(
                catalog.load_users()[-1], username="there-renamed",
                status=int(UserStatus.INACTIVE))))
            for name in ("here", "there"):
                assert sessions[name].user_id == 0  # logged out
                user = broker.access.get_user(root, f"{name}-renamed")
                assert (user.status, user.permissions) == (UserStatus.INACTIVE, readers)
                assert core.users.find_by_username(name) is None

            await broker.access.delete_user(root, "here-renamed")
            await catalog.change_elsewhere(UserDeleted(9))
            assert sorted(users) == [1]
            assert [row.id for row in catalog.load_users()] == [1]
        finally:
            await core.stop()

    asyncio.run(main())


def test_a_topic_and_a_stream_deleted_elsewhere_lose_their_files_off_the_event_loop(
        tmp_path, monkeypatch):
    """A deletion applied from elsewhere frees the directory's path at once (a topic made again
    under the same ids finds it free) and unlinks the files in a worker thread, not on the
    event loop every client of this node waits on."""
    from rill.server.core import applying
    from rill.server.core.catalog import StreamDeleted, TopicDeleted

    config = config_at(tmp_path)
    removed_in: list[str] = []
    remove_trees = applying.remove_trees

    def watched(paths):  # the real removal, noting where it ran
        removed_in.append(threading.current_thread().name)
        remove_trees(paths)

    monkeypatch.setattr(applying, "remove_trees", watched)

    async def main() -> None:
        core = Core(config, catalog=MemoryCatalog())
        await core.start()
        try:
            broker, session = await logged_in(core)
            stream = await broker.create_namespace(session, "s")
            topic = await broker.create_topic(session, "s", TopicSpec("t", partitions_count=2))
            await broker.append(session, PartitionRef("s", "t", 1), encode_messages([b"x"] * 10))
            paths = core.state.paths
            topic_dir, stream_dir = paths.topic_dir(stream.id, topic.id), paths.stream_dir(stream.id)
            assert topic_dir.is_dir()
            core.apply(TopicDeleted(stream.id, topic.id))
            assert not topic_dir.exists() and topic.id not in stream.topics
            core.apply(StreamDeleted(stream.id))
            assert not stream_dir.exists()
            for _ in range(200):
                if len(removed_in) == 2 and not any(stream_dir.parent.iterdir()):
                    break
                await asyncio.sleep(0.01)
            assert list(stream_dir.parent.iterdir()) == []  # the tombstones are gone too
            assert len(removed_in) == 2 and threading.main_thread().name not in removed_in
        finally:
            await core.stop()

    asyncio.run(main())
