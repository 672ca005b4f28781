"""Reads cross offset holes (issue 27 item 2) on a real server: TANK's explicit sequence numbers
leave holes in a partition's offsets (seqs 10-12 then 10000-10001: records at offsets 9, 10,
11, 9999, 10000, seq = offset + 1), and every reader answers from the next stored record, as
Kafka does for a sparse log: the Iggy SDK's poll with every strategy (NEXT with auto-commit
too), the HTTP API, the columnar read and the Spark connector's fetch loop over it, the CLI's
``--exit-at-end``; counts are records (``messages_count``, ``rill topic get``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid

import httpx
import pytest

from rill.client import Client, Consumer, PollingStrategy
from rill.client.tank import TankClient
from server_process import RillProcess

from pyspark_rill.arrow_read import RangeSpec, read_range
from pyspark_rill.connection import connect
from pyspark_rill.options import ConnectionOptions

ENV = {"RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "127.0.0.1:0",
       "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "true"}
TS = 1_700_000_000_000  # ms
STORED = [9, 10, 11, 9999, 10000]  # the offsets that hold a record
VALUES = [b"a", b"b", b"c", b"x", b"y"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = RillProcess(tmp_path_factory.mktemp("tank-holes") / "data", env=ENV).start()
    yield process
    process.kill()


@pytest.fixture
def iggy(server):
    with Client(server.address, reconnect=False) as client:
        client.login_user("iggy", "iggy")
        yield client


@pytest.fixture
def topic(server) -> str:
    """A topic whose partition 1 (TANK's 0) holds records at ``STORED`` only."""
    name = "holes-" + uuid.uuid4().hex[:8]

    async def write():
        async with TankClient(*server.tank_address) as client:
            assert await client.create_topic(name, 1) == 0
            await client.produce(name, 0, VALUES[:3], seqs=[10, 11, 12],
                                 timestamps=[TS, TS + 1, TS + 2])
            await client.produce(name, 0, VALUES[3:], seqs=[10000, 10001],
                                 timestamps=[TS + 3, TS + 4])

    asyncio.run(write())
    return name


def poll(iggy: Client, name: str, strategy: PollingStrategy, count: int, **options) -> list[int]:
    polled = iggy.poll_messages("kafka", name, partition_id=1, strategy=strategy, count=count,
                                **options)
    return [message.offset for message in polled.messages]


@pytest.mark.parametrize(("offset", "count", "expected"), [
    (0, 3, STORED[:3]),  # the example: offsets 0..2 are a hole
    (3, 2, STORED[:2]),
    (11, 3, STORED[2:]),  # across the hole between the bundles
    (500, 1, [9999]),
    (10001, 3, []),  # the end
])
def test_a_poll_by_offset_answers_from_the_next_stored_record(iggy, topic, offset, count,
                                                              expected):
    assert poll(iggy, topic, PollingStrategy.offset(offset), count) == expected


def test_first_last_and_timestamp_count_records(iggy, topic):
    assert poll(iggy, topic, PollingStrategy.first(), 2) == [9, 10]
    assert poll(iggy, topic, PollingStrategy.last(), 3) == [11, 9999, 10000]
    assert poll(iggy, topic, PollingStrategy.last(), 10) == STORED
    assert poll(iggy, topic, PollingStrategy.timestamp((TS + 2) * 1000), 2) == [11, 9999]


def test_a_consumer_loop_with_next_and_auto_commit_reads_everything_once(iggy, topic):
    consumer = Consumer.regular(7)
    seen, polls = [], 0
    while polls < 10:  # 3 polls of 2 read the 5 records; then an empty one
        polls += 1
        found = poll(iggy, topic, PollingStrategy.next(), 2, consumer=consumer, auto_commit=True)
        if not found:
            break
        seen += found
    assert seen == STORED and polls == 4
    stored = iggy.get_consumer_offset("kafka", topic, consumer, partition_id=1)
    assert stored.stored_offset == 10000


def test_the_http_api_polls_from_the_next_stored_record(server, topic):
    login = httpx.post(f"{server.http_url}/users/login",
                       json={"username": "iggy", "password": "iggy"})
    token = login.json()["access_token"]["token"]
    answer = httpx.get(f"{server.http_url}/streams/kafka/topics/{topic}/messages",
                       params={"partition_id": 1, "kind": "offset", "value": 0, "count": 3},
                       headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert [m["offset"] for m in answer.json()["messages"]] == STORED[:3]


def test_the_columnar_read_answers_from_the_next_stored_record(iggy, topic):
    reply = iggy.poll_messages_columnar("kafka", topic, 1, 0, 3)
    assert (reply.base_offset, reply.count, reply.next_offset) == (9, 3, 10001)
    assert [m.offset for m in reply.messages] == STORED[:3]
    assert reply.end_offset == 12  # where the SDK's reader goes on
    across = iggy.poll_messages_columnar("kafka", topic, 1, 11, 2)
    assert [m.offset for m in across.messages] == [11, 9999] and across.end_offset == 10000
    assert iggy.poll_messages_columnar("kafka", topic, 1, 12, 10).base_offset == 9999


@pytest.mark.parametrize(("start", "end", "expected"), [
    (0, 10001, STORED), (0, 3, []), (0, 11, [9, 10]), (100, 9000, []), (11, 10000, [11, 9999]),
])
def test_the_spark_fetch_loop_reads_a_planned_range_with_holes_and_finishes(
        server, topic, start, end, expected):
    client = connect(ConnectionOptions(server.address, "tcp", "iggy", "iggy", None))  # pooled
    spec = RangeSpec("kafka", topic, 1, start, end)
    batches = list(read_range(client, spec, False, max_messages=2, max_bytes=1 << 20,
                              fail_on_data_loss=True))
    rows = [row for batch in batches for row in batch.to_pylist()]
    assert [row["offset"] for row in rows] == expected
    assert [row["value"] for row in rows] == [VALUES[STORED.index(o)] for o in expected]


def cli(server, tmp_path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RILL_")}
    env.update(RILL_HOME=str(tmp_path), RILL_ADDRESS=server.address, RILL_USERNAME="iggy",
               RILL_PASSWORD="iggy", NO_COLOR="1", TERM="dumb")
    rill = os.path.join(os.path.dirname(os.sys.executable), "rill")
    done = subprocess.run([rill, "--json", *args], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_messages_count_counts_records(iggy, server, topic, tmp_path):
    details = iggy.get_topic("kafka", topic)
    assert details.topic.messages_count == 5 and details.partitions[0].messages_count == 5
    shown = json.loads(cli(server, tmp_path, "topic", "get", "kafka", topic))
    assert shown["messages_count"] == 5, shown


def test_the_cli_exit_at_end_reads_every_record(server, topic, tmp_path):
    out = cli(server, tmp_path, "message", "poll", "kafka", topic, "--partition", "1",
              "--first", "--exit-at-end", "--batch-size", "2")
    offsets = [json.loads(line)["offset"] for line in out.splitlines() if line.strip()]
    assert offsets == STORED
