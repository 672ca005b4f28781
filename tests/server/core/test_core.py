"""The Core's lifecycle as others see it: readiness from start to stop."""

from __future__ import annotations

import asyncio

from rill import errors
from rill.server.config import ServerConfig
from rill.server.core.core import Core


def test_ready_only_between_start_and_stop_and_while_writes_succeed(tmp_path) -> None:
    async def main() -> list[str | None]:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        core = Core(config)
        seen = [core.unready_because()]
        await core.start()
        seen.append(core.unready_because())
        core.messages.write_failures.failed(errors.CannotSaveMessagesToSegment())
        seen.append(core.unready_because())
        core.messages.write_failures.recovered()
        seen.append(core.unready_because())
        await core.stop()
        seen.append(core.unready_because())
        return seen

    seen = asyncio.run(main())
    assert seen[0] == seen[4] == "not running (starting or stopping)"
    assert seen[1] is None and seen[3] is None
    assert seen[2] == "writing messages fails (1 failed attempt(s) since the last success)"


def test_two_servers_in_one_process_keep_their_own_settings_and_metrics(tmp_path) -> None:
    """Nothing a server configures or counts lives in a module global that another Core in
    the same process would overwrite or share (the append-thread rule, the metrics)."""
    from rill.protocol.messages import encode_messages
    from rill.protocol.primitives import Transport
    from rill.server.core.broker import PartitionRef
    from rill.server.core.types import TopicSpec

    async def main() -> None:
        cores = []
        for name, mode in (("a", "never"), ("b", "always")):
            config = ServerConfig()
            config.system.path = str(tmp_path / name)
            config.system.append_threads = mode
            config.root.password_hash_cost = 4
            core = Core(config)
            await core.start()
            cores.append(core)
        try:
            for core in cores:
                session = core.broker.connect("127.0.0.1:1", Transport.TCP)
                await core.broker.authenticate(session, "iggy", "iggy")
                core.broker.create_namespace(session, "s")
                core.broker.create_topic(session, "s", TopicSpec("t", partitions_count=1))
                core.metrics.instrument(core)
            session = cores[0].sessions[next(iter(cores[0].sessions))]
            await cores[0].broker.append(session, PartitionRef("s", "t", 0),
                                         encode_messages([b"x"]))
            logs = [core.state.streams[1].topics[1].partitions[1].log for core in cores]
            assert [log.settings.append_threads for log in logs] == ["never", "always"]
            assert [core.metrics.messages_appended for core in cores] == [1, 0]
        finally:
            for core in cores:
                await core.stop()

    asyncio.run(main())
