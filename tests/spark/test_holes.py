"""A local Spark reads a partition with offset holes (issue 27 item 2): TANK's explicit
sequence numbers (seqs 10-12 then 10000-10001) leave records at offsets 9, 10, 11, 9999 and
10000 only. Planned ranges [a, b) that hold holes, split into several Spark partitions and
read two records a request, yield exactly the stored rows and finish; no data loss is
reported for a hole."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from rill.client.tank import TankClient
from server_process import RillProcess

ENV = {"RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "127.0.0.1:0",
       "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false"}
STORED = {9: b"a", 10: b"b", 11: b"c", 9999: b"x", 10000: b"y"}


@pytest.fixture(scope="module")
def holed(tmp_path_factory):
    """Connection options of a server with TANK on, and a topic with holes."""
    server = RillProcess(tmp_path_factory.mktemp("spark-holes") / "data", env=ENV).start()
    name = "holes-" + uuid.uuid4().hex[:8]

    async def write():
        async with TankClient(*server.tank_address) as client:
            assert await client.create_topic(name, 1) == 0
            await client.produce(name, 0, [b"a", b"b", b"c"], seqs=[10, 11, 12])
            await client.produce(name, 0, [b"x", b"y"], seqs=[10000, 10001])

    asyncio.run(write())
    yield {"servers": server.address, "username": "iggy", "password": "iggy",
           "stream": "kafka", "topic": name, "fetchMaxMessages": "2", "failOnDataLoss": "true"}
    server.kill()


def read(spark, options, **extra) -> list[tuple[int, bytes]]:
    rows = spark.read.format("rill").options(**options, **extra).load().collect()
    return sorted((row.offset, row.value) for row in rows)


def test_a_batch_read_of_every_offset_yields_the_stored_rows(spark, holed, implementation) -> None:
    assert read(spark, holed, minPartitions="4", **implementation) == sorted(STORED.items())


@pytest.mark.parametrize(("start", "end"), [(0, 3), (0, 11), (100, 9000), (11, 10000)])
def test_ranges_with_holes_yield_their_rows_and_finish(spark, holed, implementation, start,
                                                        end) -> None:
    bounds = f'{{"kafka/{holed["topic"]}": {{"1": %d}}}}'
    rows = read(spark, holed, startingOffsets=bounds % start, endingOffsets=bounds % end,
                minPartitions="3", **implementation)
    assert rows == [(offset, value) for offset, value in sorted(STORED.items())
                    if start <= offset < end]
