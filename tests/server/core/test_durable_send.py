"""Under fsync = always a SEND is acknowledged only after an fsync covering it: with the fsync
held back (a double that blocks until released), the SEND does not complete; once released it
does. (The power-loss tests in tests/powerloss show the same end to end.)"""

from __future__ import annotations

import asyncio
import os
import threading

from rill.server.protocols.iggy.dispatch import execute
from rill.protocol.iggy.commands.messages import SendMessages
from rill.protocol.iggy.commands.streams import CreateStream
from rill.protocol.iggy.commands.topics import CreateTopic
from rill.protocol.iggy.messages import Message, encode_messages
from rill.protocol.primitives import CompressionAlgorithm
from rill.protocol.iggy.primitives import Identifier, Partitioning
from rill.server.config import ServerConfig
from in_process_core import twin_core
from rill.server.core.model import Session
from rill.server.storage import durability

ROOT = Session(1, "127.0.0.1:1", "tcp", user_id=1)


class HeldFsync:
    """``os.fsync`` for the durability module: blocks every call until released."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.calls = 0
        self.fsync = os.fsync  # the real one

    def __call__(self, descriptor: int) -> None:
        self.calls += 1
        self.released.wait(30)
        self.fsync(descriptor)


def test_a_send_waits_for_the_fsync_that_covers_it(tmp_path, monkeypatch):
    async def main() -> None:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        config.system.fsync = "always"
        config.root.password_hash_cost = 4
        core = twin_core(config, files=True)  # (fsyncs of segment files)
        await core.start()
        try:
            await execute(core, ROOT, CreateStream(1, "s"))
            await execute(core, ROOT, CreateTopic(Identifier.of(1), 1, 1, CompressionAlgorithm.NONE,
                                                       0, 0, 0, "t"))
            held = HeldFsync()
            monkeypatch.setattr(durability.os, "fsync", held)
            send = SendMessages(Identifier.of(1), Identifier.of(1), Partitioning.partition_id(1),
                                encode_messages([Message(b"must be durable first")]))
            acknowledged = asyncio.ensure_future(execute(core, ROOT, send))
            await asyncio.sleep(0.5)
            assert held.calls >= 1  # the group-commit round is in its fsync
            assert not acknowledged.done()  # and the SEND waits for it
            held.released.set()
            await asyncio.wait_for(acknowledged, 10)
            log = core.state.streams[1].topics[1].partitions[1].log
            assert log.read(0, 1)[0] == 1
        finally:
            held.released.set()
            monkeypatch.undo()
            await core.stop()

    asyncio.run(main())
