"""What a Kafka client made, as the CLI shows it: a real kafka-python producer (with headers)
and consumer group against a rill server's Kafka listener, then ``rill consumer-offset list``,
``rill consumer-group list|get`` (the group and its lag, with the same "reads next" figure the
web console's ``/consumers`` route gives) and ``rill message poll`` (UTF-8 headers as text)."""

from __future__ import annotations

import httpx
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from .helpers import Cli

ENV = {"RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ADDRESS": "127.0.0.1:0",
       "RILL_KAFKA_ANONYMOUS_USER": "iggy"}  # loopback: Kafka clients act as root unlogged
GROUP = "kafka-readers"


@pytest.fixture
def kafka_server(rill_factory):
    return rill_factory(ENV).start()


def produce_and_consume(server) -> None:
    """5 records with headers into topic ``events``; group ``GROUP`` reads them and commits 3."""
    bootstrap = "%s:%d" % server.kafka_address
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    for index in range(5):
        producer.send("events", f"v{index}".encode(), partition=0,
                      headers=[("source", "wéb".encode()), ("blob", b"\xff\x00")])
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=30_000)
    try:
        consumer.subscribe(["events"])
        read = 0
        for _ in range(60):
            read += sum(len(batch) for batch in consumer.poll(timeout_ms=500).values())
            if read >= 5:
                break
        assert read == 5
        consumer.commit({TopicPartition("events", 0): OffsetAndMetadata(3, "", -1)})  # reads 3 next
    finally:
        consumer.close()


def test_kafka_groups_and_their_lag_are_listed_as_the_console_shows_them(kafka_server, tmp_path):
    produce_and_consume(kafka_server)
    cli = Cli(kafka_server.address, tmp_path / "home")

    rows = cli.run("--json", "consumer-offset", "list", "kafka", "events").json()
    assert {"consumer_kind": "kafka_group", "group_name": GROUP, "partition_id": 1,
            "committed_offset": 2, "reads_next": 3, "end_offset": 5, "lag": 2} in rows
    table = cli.run("consumer-offset", "list", "kafka", "events", COLUMNS="120").stdout
    assert "Reads next" in table and "Committed" not in table
    assert f"kafka group {GROUP}" in table

    listed = cli.run("--json", "consumer-group", "list", "kafka", "events").json()
    assert [(group["name"], group["protocol"], group["lag"], group["partitions_count"])
            for group in listed] == [(GROUP, "kafka", 2, 1)]
    assert GROUP in cli.run("consumer-group", "list", "kafka", "events", COLUMNS="120").stdout

    shown = cli.run("--json", "consumer-group", "get", "kafka", "events", GROUP).json()
    assert shown["protocol"] == "kafka" and shown["lag"] == 2
    assert [(p["partition_id"], p["reads_next"], p["lag"]) for p in shown["partitions"]] == [(1, 3, 2)]
    record = cli.run("consumer-group", "get", "kafka", "events", GROUP, COLUMNS="120").stdout
    assert "Reads next" in record and "kafka" in record

    # the web console's figures for the same row: one number, one wording
    with httpx.Client(base_url=kafka_server.http_url, timeout=30) as http:
        token = http.post("/users/login", json={"username": "iggy", "password": "iggy"}).json()
        positions = http.get("/streams/kafka/topics/events/consumers", headers={
            "Authorization": f"Bearer {token['access_token']['token']}"}).json()["positions"]
    assert [(p["kind"], p["name"], p["next_offset"], p["lag"]) for p in positions] == [
        ("kafka_group", GROUP, 3, 2)]


def test_kafka_headers_print_as_text_when_they_are_utf8(kafka_server, tmp_path):
    produce_and_consume(kafka_server)
    cli = Cli(kafka_server.address, tmp_path / "home")
    poll = ("message", "poll", "kafka", "events", "--partition", "1", "--first", "--count", "5")
    table = cli.run(*poll, COLUMNS="200").stdout
    assert "source=wéb" in table and "blob=hex:ff00" in table
    messages = cli.run("--json", *poll).json()["messages"]
    assert messages[0]["headers"]["source"] == {"kind": "raw", "value": "wéb", "encoding": "text"}
    assert messages[0]["headers"]["blob"] == {"kind": "raw", "value": "ff00"}  # not UTF-8: hex
    lines = cli.run(*poll, "--format", "%o %h").stdout.splitlines()
    assert lines[0] == "0 source=wéb, blob=hex:ff00"
