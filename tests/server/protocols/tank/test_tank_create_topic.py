"""TANK CreateTopic of 1,000 partitions does not stop everyone (issue 28 item 5): TANK needs
no login, and the event loop used to make every partition's files itself, so one such
request held every client of every protocol for seconds. PINGs on an Iggy connection keep
being answered while it runs, and the topic is whole afterwards."""

from __future__ import annotations

import asyncio
import threading

from rill.client.tank import TankClient
from rill.protocol.iggy.commands.system import Ping
from rill.protocol.tank.errors import CreateTopicError
from raw_link import RawLink
from server_process import RillProcess

TANK_ENV = {"RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "127.0.0.1:0",
            "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false"}


def test_pings_are_answered_while_tank_creates_1000_partitions(tmp_path):
    server = RillProcess(tmp_path / "data", env=TANK_ENV).start()
    answered = 0
    stop = threading.Event()

    def ping() -> None:
        nonlocal answered
        link = RawLink(server.tcp_address)
        link.sock.settimeout(300)  # the old code holds a PING as long as the creation
        link.login()  # (an idle stranger's connection is closed)
        while not stop.is_set():
            assert link.ask(Ping().to_frame()) == (0, b"")
            answered += 1
        link.close()

    async def create() -> tuple[int, int, int]:
        host, port = server.tank_address
        async with TankClient(host, port) as client:
            before = answered
            code = await client.create_topic("wide", 1000)
            meanwhile = answered - before
            partitions = len((await client.discover_partitions("wide")).partitions)
        return code, meanwhile, partitions

    pinger = threading.Thread(target=ping, daemon=True)
    pinger.start()
    try:
        code, meanwhile, partitions = asyncio.run(create())
    finally:
        stop.set()
        pinger.join()
        server.kill()
    assert code == CreateTopicError.OK and partitions == 1000
    assert meanwhile >= 10  # before: 0 or 1, the loop was held for the whole creation
