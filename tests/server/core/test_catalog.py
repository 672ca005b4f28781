"""``core.catalog``: the core changes its catalog only through the port and applies the model
from what the port confirmed, not from what it proposed (as a catalog fed by a controller's
watch confirms the row as the controller holds it). Runs on the memory twin."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from rill.server.config import ServerConfig
from rill.server.core.broker import PartitionRef
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


def test_the_model_holds_what_the_catalog_confirmed(tmp_path):
    config = ServerConfig()
    config.system.path = str(tmp_path / "data")
    config.root.password_hash_cost = 4
    catalog = RewritingCatalog()

    async def main() -> None:
        core = Core(config, catalog=catalog)
        await core.start()
        try:
            broker = core.broker
            session = broker.connect("127.0.0.1:1", "tcp")
            await broker.authenticate(session, "iggy", "iggy")
            stream = await broker.create_namespace(session, "ns")
            topic = await broker.create_topic(session, "ns", TopicSpec("t", partitions_count=1))
            assert stream.created_at == 42 and core.state.streams[1].created_at == 42
            assert topic.message_expiry == 7 and topic.partitions[1].created_at == 43
            await broker.catalog.update_topic(session, "ns", "t",
                                              TopicSpec("t", max_topic_size=1 << 40))
            assert topic.max_topic_size == 9
            user = await broker.access.create_user(session, "someone", "password", 1, None)
            assert user.created_at == 44 and core.users.users[user.id].created_at == 44
            broker.commit_offset(session, "c", PartitionRef("ns", "t", 1), 1, "note")
            partition = topic.partitions[1]
            assert (partition.positions["c"], partition.position_notes["c"]) == (0, "kept")
        finally:
            await core.stop()
        assert [row.created_at for row in catalog.load_streams()] == [42]

    asyncio.run(main())
