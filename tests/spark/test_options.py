"""Option parsing: defaults, and one clear message naming the option for each bad input."""

from __future__ import annotations

import pytest

from pyspark_rill.options import ReadOptions, RillOptionError, WriteOptions, check_known

BASE = {"servers": "127.0.0.1:8090", "username": "u", "password": "p", "stream": "s",
        "topic": "t"}


def lowered(**extra: str) -> dict[str, str]:
    """Options as Spark hands them over: keys lower-cased."""
    return {key.lower(): value for key, value in {**BASE, **extra}.items()}


def test_read_defaults() -> None:
    batch = ReadOptions.parse(lowered(), streaming=False)
    assert (batch.starting, batch.ending, batch.fail_on_data_loss, batch.typed_headers) == (
        "earliest", "latest", True, False)
    streaming = ReadOptions.parse(lowered(), streaming=True)
    assert streaming.starting == "latest" and streaming.topics == ("t",)
    assert streaming.connection.servers == "127.0.0.1:8090"


def test_reconnect_defaults_ride_out_a_restart_and_can_be_changed() -> None:
    connection = ReadOptions.parse(lowered(), streaming=True).connection
    assert (connection.reconnect_attempts, connection.reconnect_backoff) == (10, 1.0)
    changed = ReadOptions.parse(lowered(reconnectAttempts="0", reconnectBackoff="0.25"),
                                streaming=True).connection
    assert (changed.reconnect_attempts, changed.reconnect_backoff) == (0, 0.25)


def test_topics_json_offsets_and_timestamps() -> None:
    options = {key: value for key, value in lowered().items() if key != "topic"}
    parsed = ReadOptions.parse({**options, "topics": "a,b",
                                "startingoffsets": '{"s/a": {"1": 5, "2": -2}}',
                                "maxoffsetspertrigger": "100"}, streaming=True)
    assert parsed.topics == ("a", "b")
    assert parsed.starting == {"s/a": {"1": 5, "2": -2}}
    assert parsed.max_offsets_per_trigger == 100
    at = ReadOptions.parse(lowered(startingTimestamp="2024-01-02T03:04:05"), streaming=False)
    assert at.starting_timestamp_us == 1704164645_000_000
    assert ReadOptions.parse(lowered(startingTimestamp="1000"), streaming=False
                             ).starting_timestamp_us == 1_000_000


@pytest.mark.parametrize("extra, named", [
    ({"startingoffsets": "{not json"}, "startingOffsets"),
    ({"startingoffsets": '{"t": {"1": 0}}'}, "startingOffsets"),  # key is not stream/topic
    ({"startingoffsets": '{"s/t": {"0": 0}}'}, "startingOffsets"),  # partitions are 1-based
    ({"startingoffsets": '{"s/t": {"1": -7}}'}, "startingOffsets"),
    ({"startingoffsets": "oldest"}, "startingOffsets"),
    ({"endingoffsets": "earliest"}, "endingOffsets"),
    ({"maxoffsetspertrigger": "0"}, "maxOffsetsPerTrigger"),
    ({"failondataloss": "maybe"}, "failOnDataLoss"),
    ({"headersformat": "json"}, "headersFormat"),
    ({"servers": "nowhere"}, "servers"),
    ({"servers": "127.0.0.1:8090,nowhere:x"}, "servers"),
    ({"servers": " , "}, "servers"),
    ({"transport": "http"}, "transport"),
    ({"startingtimestamp": "yesterday"}, "startingTimestamp"),
    ({"stream": ""}, "stream"),
    ({"topic": ""}, "topic"),
    ({"topci": "t"}, "topci"),
    ({"reconnectattempts": "-1"}, "reconnectAttempts"),
    ({"reconnectattempts": "many"}, "reconnectAttempts"),
    ({"reconnectbackoff": "0"}, "reconnectBackoff"),
    ({"reconnectbackoff": "soon"}, "reconnectBackoff"),
    ({"failovertimeout": "0"}, "failoverTimeout"),
    ({"failovertimeout": "never"}, "failoverTimeout"),
    ({"servers": "http://10.0.0.1:3000"}, "servers"),
    ({"servers": "127.0.0.1:8090,http://10.0.0.1"}, "servers"),
])
def test_bad_read_options_name_the_option(extra: dict[str, str], named: str) -> None:
    with pytest.raises(RillOptionError, match=named):
        ReadOptions.parse({**lowered(), **extra}, streaming=False)


def test_streaming_only_and_batch_only_options() -> None:
    with pytest.raises(RillOptionError, match="maxOffsetsPerTrigger"):
        ReadOptions.parse(lowered(maxOffsetsPerTrigger="5"), streaming=False)
    with pytest.raises(RillOptionError, match="endingOffsets"):
        ReadOptions.parse(lowered(endingOffsets="latest"), streaming=True)


def test_credentials_may_come_from_the_environment(monkeypatch) -> None:
    options = {key: value for key, value in lowered().items() if key not in ("username", "password")}
    with pytest.raises(RillOptionError, match="credentials"):
        ReadOptions.parse(options, streaming=False)
    monkeypatch.setenv("RILL_TOKEN", "secret-token")
    assert ReadOptions.parse(options, streaming=False).connection.token == "secret-token"


def test_write_options() -> None:
    parsed = WriteOptions.parse(lowered(sinkMode="exactlyOnce", producerId="job-1"))
    assert (parsed.exactly_once, parsed.producer_id, parsed.topic) == (True, "job-1", "t")
    assert not WriteOptions.parse(lowered()).exactly_once
    with pytest.raises(RillOptionError, match="sinkMode"):
        WriteOptions.parse(lowered(sinkMode="twice"))
    with pytest.raises(RillOptionError, match="maxRequestBytes"):
        WriteOptions.parse(lowered(maxRequestBytes="20000000"))


def test_spark_options_are_known() -> None:
    check_known({"path": "x", "checkpointlocation": "/tmp/c"})
    with pytest.raises(RillOptionError, match="unknown option 'startingoffset'"):
        check_known({"startingoffset": "earliest"})


def test_servers_may_be_a_list() -> None:
    parsed = ReadOptions.parse(lowered(servers=" 10.0.0.1:8090, 10.0.0.2:8090 "), streaming=False)
    assert parsed.connection.servers == "10.0.0.1:8090,10.0.0.2:8090"


def test_servers_may_name_a_cluster_nodes_http_api() -> None:
    default = ReadOptions.parse(lowered(), streaming=True).connection
    assert (default.cluster_http, default.failover_timeout) == ("", 60.0)
    parsed = ReadOptions.parse(lowered(
        servers="10.0.0.1:8090, http://10.0.0.1:3000,10.0.0.2:8090,https://10.0.0.2:3000/",
        failoverTimeout="12.5"), streaming=True).connection
    assert parsed.servers == "10.0.0.1:8090,10.0.0.2:8090"
    assert parsed.cluster_http == "http://10.0.0.1:3000,https://10.0.0.2:3000/"
    assert parsed.failover_timeout == 12.5
