"""No false recovery (issue 27 item 4) on a real server: TANK producers set timestamps freely,
so a partition's last bundle may be stamped earlier than one before it (its batch index keeps
a running maximum). A clean stop and restart opens it without a rescan (nothing logged about
its segments), and every protocol reads it as written."""

from __future__ import annotations

import asyncio
import uuid

from rill.client import Client, PollingStrategy
from rill.client.tank import TankClient
from server_process import RillProcess

ENV = {"RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "127.0.0.1:0",
       "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false"}
TS = 1_700_000_000_000  # ms
BUNDLES = [TS + 5_000, TS + 9_000, TS + 1_000]  # the last one earlier than both before it


def test_a_last_bundle_stamped_earlier_does_not_rescan_after_a_clean_restart(tmp_path):
    server = RillProcess(tmp_path / "data", env=ENV).start()
    name = "ts-" + uuid.uuid4().hex[:8]
    try:
        async def write():
            async with TankClient(*server.tank_address) as client:
                assert await client.create_topic(name, 1) == 0
                for number, time_ms in enumerate(BUNDLES):
                    await client.produce(name, 0, [b"m%d" % number] * 2, timestamps=time_ms)

        asyncio.run(write())
        for _ in range(2):  # every start, not only the first after the write
            server.stop()
            seen = len(server.output)
            server.start(server.last_port)
            startup = "".join(server.output[seen:])
            assert "segment" not in startup, startup  # no check failed, nothing located again
            with Client(server.address, reconnect=False) as iggy:
                iggy.login_user("iggy", "iggy")
                polled = iggy.poll_messages("kafka", name, partition_id=1,
                                            strategy=PollingStrategy.first(), count=10).messages
            assert [(m.offset, m.payload, m.timestamp) for m in polled] == [
                (2 * n + i, b"m%d" % n, t * 1000) for n, t in enumerate(BUNDLES) for i in (0, 1)]

            async def consume():
                async with TankClient(*server.tank_address) as client:
                    return (await client.consume([(name, 0, 1)]))[0]

            consumed = asyncio.run(consume())
            assert consumed.seqs == [1, 2, 3, 4, 5, 6]
    finally:
        server.kill()
