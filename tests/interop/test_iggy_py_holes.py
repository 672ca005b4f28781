"""The real Iggy Python SDK (iggy-py 0.4.0) reads across offset holes (issue 27 item 2): a
partition written by TANK with explicit sequence numbers (seqs 10-12 then 10000-10001) holds
records at offsets 9, 10, 11, 9999 and 10000 only; iggy-py's consumer loops (by offset, and
NEXT with auto-commit) read every record once and stop at the end instead of polling a hole
for ever."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from pathlib import Path

import pytest

from rill.client.tank import TankClient
from server_process import RillProcess
from test_iggy_py import iggy_python

SCRIPT = Path(__file__).with_name("iggy_py_holes_script.py")
ENV = {"RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "127.0.0.1:0",
       "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false"}

pytestmark = pytest.mark.interop


def test_iggy_py_consumer_loops_cross_offset_holes(tmp_path):
    server = RillProcess(tmp_path / "data", env=ENV).start()
    name = "holes-" + uuid.uuid4().hex[:8]
    try:
        async def write():
            async with TankClient(*server.tank_address) as client:
                assert await client.create_topic(name, 1) == 0
                await client.produce(name, 0, [b"a", b"b", b"c"], seqs=[10, 11, 12])
                await client.produce(name, 0, [b"x", b"y"], seqs=[10000, 10001])

        asyncio.run(write())
        result = subprocess.run([iggy_python(), str(SCRIPT), server.address, name],
                                capture_output=True, text=True, timeout=120)
    finally:
        server.kill()
    assert result.returncode == 0, result.stderr + result.stdout
    report = json.loads(result.stdout.strip().splitlines()[-1])
    for loop in ("by_offset", "next"):  # 3 polls of 2 records, then the empty one at the end
        assert report[loop] == {"offsets": [9, 10, 11, 9999, 10000], "polls": 4}, report
