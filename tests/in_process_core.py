"""A Core in this process, with no wire protocol: the harness of the tests that call the
neutral broker API directly (what a Kafka or TANK handler calls), and the core's tests' switch
to the memory twins of the catalog and of the partition logs (``twin_core``); and one with
TANK's protocol object on it (``run_with_tank``), for the tests of TANK's data rules."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from rill.server.config import ServerConfig
from rill.server.core.core import Core
from rill.server.core.memory_catalog import MemoryCatalog
from rill.server.core.types import TopicSpec
from rill.server.storage.memory_log import MemoryLogs


# the memory twin of each data directory's catalog, and of its partition logs, for this test run
_TWINS: dict[Path, MemoryCatalog] = {}
_LOGS: dict[Path, MemoryLogs] = {}


def twin_catalog(data_dir: str | Path) -> MemoryCatalog:
    """The memory twin of the catalog of ``data_dir``: the same one for every Core started on
    that directory in this test run, so a restart keeps the catalog (as a catalog kept by a
    controller outlives a node's restart) while the directory keeps the logs."""
    return _TWINS.setdefault(Path(data_dir).resolve(), MemoryCatalog())


def twin_logs(config: ServerConfig) -> MemoryLogs:
    """The memory twin of the partition logs of ``config``'s data directory: the same for every
    Core started on it in this test run, so a restart keeps the records (as the catalog)."""
    return _LOGS.setdefault(Path(config.data_path).resolve(),
                            MemoryLogs(config.system.segment.size))


def twin_core(config: ServerConfig, files: bool = False, **options: Any) -> Core:
    """A Core on ``config``'s data directory whose catalog and partition logs are the memory
    twins (the core's tests run on them; those about the metadata store's files use ``Core``
    itself). ``files``: the partition logs are segment files (tests about files, fsyncs,
    directories and I/O counts)."""
    return Core(config, catalog=twin_catalog(config.data_path),
                logs=None if files else twin_logs(config), **options)


def _config(tmp_path, configure: Callable[[ServerConfig], None] | None) -> ServerConfig:
    """The settings of a test's Core: data in ``tmp_path``, cheap password hashes, then
    ``configure``'s changes."""
    config = ServerConfig()
    config.system.path = str(tmp_path / "data")
    config.root.password_hash_cost = 4
    if configure is not None:
        configure(config)
    return config


def run_with_broker(tmp_path, scenario: Callable[..., Awaitable[None]],
                    partitions_count: int = 2,
                    configure: Callable[[ServerConfig], None] | None = None,
                    **core_options: Any) -> None:
    """``scenario(core, broker, session)`` on a fresh Core in ``tmp_path``, the session logged
    in as root, with namespace ``ns`` holding topic ``t``; ``configure`` changes the settings
    first, ``core_options`` are the Core's (e.g. ``group_membership``)."""
    async def main() -> None:
        core = twin_core(_config(tmp_path, configure), **core_options)
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


def partition_of(core: Core, ref: Any) -> Any:
    """The model's ``Partition`` that ``ref`` (a ``PartitionRef`` by names) names: for a test
    that sets its replica state (``high_watermark``) as a replication layer would."""
    stream = next(s for s in core.state.streams.values() if s.name == ref.namespace)
    topic = next(t for t in stream.topics.values() if t.name == ref.topic)
    return topic.partitions[ref.partition_id]


def run_with_tank(tmp_path, scenario: Callable[..., Awaitable[None]],
                  configure: Callable[[ServerConfig], None] | None = None) -> None:
    """``scenario(core, session, settings, call)`` on a fresh Core in ``tmp_path`` (segment
    files), ``session`` a TANK connection's (acting as root) and ``settings`` the listener's;
    ``call(request)`` is the reply of the TANK request it encodes, as the listener's handler
    makes it. ``configure`` changes the settings first."""
    from rill.protocol.tank import messages as m
    from rill.server.protocols.tank.dispatch import TankSettings
    from rill.server.protocols.tank.handler import TankProtocol

    async def main() -> None:
        config = _config(tmp_path, configure)
        core = Core(config)
        await core.start()
        try:
            settings = TankSettings(config.tank_stream, time.time())
            protocol = TankProtocol(settings, 1)
            session = core.broker.connect("127.0.0.1:1", "tcp")
            protocol.open_session(core, session)

            async def call(request):
                return await protocol.handle_request(
                    core, session, request.msg_id, memoryview(m.encode_request(request)[5:]))

            await scenario(core, session, settings, call)
        finally:
            await core.stop()

    asyncio.run(main())
