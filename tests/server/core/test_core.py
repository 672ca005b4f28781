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
