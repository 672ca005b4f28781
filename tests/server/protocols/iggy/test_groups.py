"""Iggy's consumer groups as the core's membership (``protocols.iggy.groups``): the name a
group's positions are stored under is Iggy's (``iggy-group:<id>``), given to the core by the
membership, and it is the name on disk: a metadata store written before (schema 1's group
offsets, migrated to ``iggy-group:<id>``; what earlier rill wrote) loads, and a group member
continues from it, storing under the same name."""

from __future__ import annotations

import asyncio
import sqlite3

from rill.protocol.iggy.commands.groups import JoinConsumerGroup
from rill.protocol.iggy.commands.offsets import GetConsumerLag, GetConsumerOffset
from rill.protocol.iggy.commands.messages import PollMessages
from rill.protocol.iggy.messages import encode_messages
from rill.protocol.iggy.primitives import Consumer, Identifier, PollingStrategy
from rill.server.config import ServerConfig
from rill.server.core.broker import PartitionRef
from rill.server.core.core import Core
from rill.server.protocols.iggy.dispatch import execute
from rill.server.protocols.iggy.groups import IggyGroupMembers, group_position_name
from rill.server.storage.paths import DataPaths

# a metadata store of schema 1 (rill's first): group 3 ("g") of topic 1 of stream 1 consumed
# offset 0 of partition 2 (consumer kind 2: a group)
SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1');
CREATE TABLE streams (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
                      created_at INTEGER NOT NULL);
CREATE TABLE topics (stream_id INTEGER NOT NULL REFERENCES streams(id) ON DELETE CASCADE,
    id INTEGER NOT NULL, name TEXT NOT NULL, created_at INTEGER NOT NULL,
    compression_algorithm INTEGER NOT NULL, message_expiry INTEGER NOT NULL,
    max_topic_size INTEGER NOT NULL, replication_factor INTEGER NOT NULL,
    PRIMARY KEY (stream_id, id), UNIQUE (stream_id, name));
CREATE TABLE partitions (stream_id INTEGER NOT NULL, topic_id INTEGER NOT NULL,
    id INTEGER NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (stream_id, topic_id, id),
    FOREIGN KEY (stream_id, topic_id) REFERENCES topics(stream_id, id) ON DELETE CASCADE);
CREATE TABLE consumer_groups (stream_id INTEGER NOT NULL, topic_id INTEGER NOT NULL,
    id INTEGER NOT NULL, name TEXT NOT NULL, PRIMARY KEY (stream_id, topic_id, id),
    UNIQUE (stream_id, topic_id, name),
    FOREIGN KEY (stream_id, topic_id) REFERENCES topics(stream_id, id) ON DELETE CASCADE);
CREATE TABLE consumer_offsets (stream_id INTEGER NOT NULL, topic_id INTEGER NOT NULL,
    partition_id INTEGER NOT NULL, consumer_kind INTEGER NOT NULL,
    consumer_id INTEGER NOT NULL, stored_offset INTEGER NOT NULL,
    PRIMARY KEY (stream_id, topic_id, partition_id, consumer_kind, consumer_id));
INSERT INTO streams VALUES (1, 's', 5);
INSERT INTO topics VALUES (1, 1, 't', 10, 1, -1, -1, 1);
INSERT INTO partitions VALUES (1, 1, 1, 6), (1, 1, 2, 6);
INSERT INTO consumer_groups VALUES (1, 1, 3, 'g');
INSERT INTO consumer_offsets VALUES (1, 1, 2, 2, 3, 0);
"""

ONE = Identifier(1)


def test_the_name_is_iggys() -> None:
    assert group_position_name(3) == "iggy-group:3"
    assert IggyGroupMembers().position_name(3) == "iggy-group:3"


def test_an_old_stores_group_offsets_load_and_a_member_continues_from_them(tmp_path) -> None:
    config = ServerConfig()
    config.system.path = str(tmp_path / "data")
    config.root.password_hash_cost = 4
    paths = DataPaths(config.data_path)
    paths.root.mkdir(parents=True)
    old = sqlite3.connect(paths.metadata_db)
    old.executescript(SCHEMA_1)
    old.close()

    async def started() -> tuple[Core, object]:
        core = Core(config, group_membership=IggyGroupMembers())
        await core.start()
        session = core.broker.connect("127.0.0.1:1", "tcp")
        await core.broker.authenticate(session, "iggy", "iggy")
        return core, session

    def stored(core: Core) -> dict[tuple[int, str], int]:
        return {(row.partition_id, row.consumer): row.next_offset
                for row in core.state.store.load_positions()}

    async def main() -> None:
        core, session = await started()
        try:
            group = Consumer.group(3)
            offset = await execute(core, session, GetConsumerOffset(group, ONE, ONE, 2))
            assert offset.stored_offset == 0  # schema 1's "offset 0 consumed"
            lag = await execute(core, session, GetConsumerLag(ONE, ONE))
            assert [(row.consumer_kind, row.consumer_id, row.group_name, row.partition_id,
                     row.committed) for row in lag] == [(2, 3, "g", 1, 0), (2, 3, "g", 2, 1)]
            await core.broker.append(session, PartitionRef(1, 1, 2),
                                     encode_messages([b"a", b"b", b"c"]))
            await execute(core, session, JoinConsumerGroup(ONE, ONE, Identifier(3)))
            polled = await execute(core, session, PollMessages(
                group, ONE, ONE, 2, PollingStrategy.next(), 10, True))
            assert polled.count == 2  # offsets 1 and 2: it continued after offset 0
            assert stored(core) == {(2, "iggy-group:3"): 3}  # the same name, on disk
        finally:
            await core.stop()
        core, session = await started()  # and again after a restart
        try:
            offset = await execute(core, session, GetConsumerOffset(group, ONE, ONE, 2))
            assert offset.stored_offset == 2
            assert stored(core) == {(2, "iggy-group:3"): 3}
        finally:
            await core.stop()

    asyncio.run(main())
