"""A Core in this process, with no wire protocol: the harness of the tests that call the
neutral broker API directly (what a Kafka or TANK handler calls)."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from rill.server.config import ServerConfig
from rill.server.core.core import Core
from rill.server.core.types import TopicSpec


def run_with_broker(tmp_path, scenario: Callable[..., Awaitable[None]],
                    partitions_count: int = 2) -> None:
    """``scenario(core, broker, session)`` on a fresh Core in ``tmp_path``, the session logged
    in as root, with namespace ``ns`` holding topic ``t``."""
    async def main() -> None:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        config.root.password_hash_cost = 4
        core = Core(config)
        await core.start()
        try:
            broker = core.broker
            session = broker.connect("127.0.0.1:1", "tcp")
            await broker.authenticate(session, "iggy", "iggy")
            await broker.create_namespace(session, "ns")
            await broker.create_topic(session, "ns",
                                      TopicSpec("t", partitions_count=partitions_count))
            await scenario(core, broker, session)
        finally:
            await core.stop()

    asyncio.run(main())
