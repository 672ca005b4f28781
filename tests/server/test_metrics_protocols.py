"""``/metrics`` counts the requests of every protocol the same way: Iggy's, Kafka's (kafka-python)
and TANK's (rill's TANK client), each under its protocol, its own request name, the transport and
the outcome, with a duration histogram; taken in the generic connection loop."""

from __future__ import annotations

import asyncio
import socket
import struct

import httpx
import pytest
from kafka import KafkaProducer

from rill.client import Client
from rill.client.tank import TankClient
from server_process import RillProcess

ENV = {"RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ADDRESS": "127.0.0.1:0",
       "RILL_KAFKA_ANONYMOUS_USER": "iggy",
       "RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "127.0.0.1:0",
       "RILL_QUIC_ENABLED": "false"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = RillProcess(tmp_path_factory.mktemp("metrics") / "data", env=ENV).start()
    yield process
    process.kill()


def scrape(server) -> dict[str, float]:
    text = httpx.get(f"{server.http_url}/metrics").text
    return {name: float(value) for name, _, value in
            (line.rpartition(" ") for line in text.splitlines() if line and line[0] != "#")}


def requests(protocol: str, command: str, outcome: str = "ok", transport: str = "tcp") -> str:
    return (f'rill_requests_total{{protocol="{protocol}",command="{command}",'
            f'transport="{transport}",outcome="{outcome}"}}')


def durations(protocol: str, command: str, transport: str = "tcp") -> str:
    return (f'rill_request_duration_seconds_count{{protocol="{protocol}",command="{command}",'
            f'transport="{transport}"}}')


def test_kafka_requests_are_counted_and_timed_by_api(server):
    before = scrape(server)
    producer = KafkaProducer(bootstrap_servers="%s:%d" % server.kafka_address)
    try:
        producer.send("counted", b"one").get(timeout=30)
    finally:
        producer.close()
    after = scrape(server)

    def moved(name: str) -> float:
        return after.get(name, 0) - before.get(name, 0)

    for api in ("api_versions", "metadata", "produce"):
        assert moved(requests("kafka", api)) >= 1, api
        assert moved(durations("kafka", api)) == moved(requests("kafka", api)), api
    bucket = ('rill_request_duration_seconds_bucket{protocol="kafka",command="produce",'
              'transport="tcp",le="+Inf"}')
    assert moved(bucket) == moved(requests("kafka", "produce"))


def test_a_refused_kafka_request_of_an_unknown_api_is_counted_without_its_code(server):
    before = scrape(server)
    header = struct.pack(">hhih", 999, 0, 7, -1)  # API key 999: no such API
    with socket.create_connection(server.kafka_address, timeout=10) as link:
        link.sendall(struct.pack(">i", len(header)) + header)
        assert link.recv(16) == b""  # closed unanswered, as a Kafka broker does
    after = scrape(server)
    key = requests("kafka", "unknown", "refused")
    assert after[key] - before.get(key, 0) == 1
    assert not any("999" in name for name in after)  # a client cannot name new series


def test_tank_requests_are_counted_and_timed_by_msg_id(server):
    before = scrape(server)

    async def talk() -> None:
        async with TankClient(*server.tank_address) as client:
            await client.create_topic("tallied", 1)
            await client.produce("tallied", 0, [b"a", b"b"])
            fetched = await client.consume([("tallied", 0, 1)])
            assert fetched[0].values == [b"a", b"b"]

    asyncio.run(talk())
    after = scrape(server)
    for request in ("create_topic", "produce", "consume"):
        key = requests("tank", request)
        assert after[key] - before.get(key, 0) == 1, request
        assert after[durations("tank", request)] - before.get(durations("tank", request), 0) == 1


def test_iggy_requests_keep_their_command_names_beside_the_others(server):
    before = scrape(server)
    with Client(server.address) as client:
        client.ping()
        # not logged in: Iggy's dialect answers a get-single command with an empty OK, and the
        # metrics say why
        assert client.get_stream(123) is None
    after = scrape(server)
    assert after[requests("iggy", "ping")] - before.get(requests("iggy", "ping"), 0) == 1
    failed = requests("iggy", "get_stream", "unauthenticated")
    assert after[failed] - before.get(failed, 0) == 1
