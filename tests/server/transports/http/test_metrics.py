"""``/metrics``: Prometheus text whose counters move with the traffic of every transport."""

from __future__ import annotations

import re

import httpx
from http_helpers import bearer

from rill.client import Client, Message, PollingStrategy
from rill.protocol.iggy.primitives import Consumer


def scrape(base_url: str) -> dict[str, float]:
    answer = httpx.get(f"{base_url}/metrics")  # public, no token
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    samples = {}
    for line in answer.text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def test_metrics_text_is_well_formed(http_server):
    text = httpx.get(f"{http_server.http_url}/metrics").text
    sample = re.compile(r'^[a-z_]+(\{([a-z_]+="[^"]*",?)*\})? -?[0-9.e+]+$')
    for line in text.splitlines():
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or sample.match(line), line
    assert "# TYPE rill_request_duration_seconds histogram" in text


def test_counters_move_after_sends_and_polls(http_server, api, stream):
    url = http_server.http_url
    before = scrape(url)
    base = f"/streams/{stream['id']}/topics/t"
    api.post(f"{base}/messages", json={"partitioning": {"kind": "balanced"},
                                       "messages": [{"payload": "aGVsbG8="}, {"payload": "d29ybGQ="}]})
    api.get(f"{base}/messages", params={"partition_id": 1, "kind": "first", "count": 10})
    with Client(http_server.address) as tcp:
        tcp.login_user("iggy", "iggy")
        tcp.send_messages(stream["id"], "t", [Message(b"tcp")], partitioning=2)
        tcp.poll_messages(stream["id"], "t", partition_id=2, strategy=PollingStrategy.first())
        after = scrape(url)
        assert after['rill_connections{transport="tcp"}'] >= 1
    assert after["rill_messages_in_total"] - before.get("rill_messages_in_total", 0) == 3

    def moved(name: str) -> float:
        return after.get(name, 0) - before.get(name, 0)

    assert moved('rill_requests_total{protocol="iggy",command="send_messages",transport="http",outcome="ok"}') == 1
    assert moved('rill_requests_total{protocol="iggy",command="send_messages",transport="tcp",outcome="ok"}') == 1
    assert moved('rill_requests_total{protocol="iggy",command="poll_messages",transport="tcp",outcome="ok"}') == 1
    assert moved('rill_request_duration_seconds_count{protocol="iggy",command="poll_messages",transport="http"}') == 1
    assert moved('rill_request_duration_seconds_bucket{protocol="iggy",command="poll_messages",transport="http",le="+Inf"}') == 1
    assert moved('rill_bytes_in_total{transport="http"}') > 0
    assert moved('rill_bytes_in_total{transport="tcp"}') > 0
    assert moved('rill_messages_out_total{transport="tcp"}') == 1
    assert moved('rill_bytes_out_total{transport="http"}') > 0
    assert moved('rill_http_requests_total{method="POST",status="201"}') >= 1
    assert after["rill_partitions"] >= 3 and after["rill_streams"] >= 1


def test_failed_commands_are_counted_by_error_name(http_server):
    before = scrape(http_server.http_url)
    headers = bearer(http_server.http_url)
    httpx.delete(f"{http_server.http_url}/streams/987654", headers=headers)
    after = scrape(http_server.http_url)
    key = 'rill_requests_total{protocol="iggy",command="delete_stream",transport="http",outcome="stream_id_not_found"}'
    assert after[key] - before.get(key, 0) == 1


def test_metrics_can_be_moved_or_switched_off(rill_factory):
    moved = rill_factory({"RILL_HTTP_METRICS_ENDPOINT": "/prometheus"}).start()
    assert httpx.get(f"{moved.http_url}/prometheus").status_code == 200
    assert httpx.get(f"{moved.http_url}/metrics").status_code == 404  # no such route there
    off = rill_factory({"RILL_HTTP_METRICS_ENABLED": "false"}).start()
    assert httpx.get(f"{off.http_url}/metrics").status_code == 404  # no such route


def test_consumer_group_lag_is_a_gauge_and_an_http_route(http_server, api, stream):
    with Client(http_server.address) as tcp:
        tcp.login_user("iggy", "iggy")
        tcp.send_messages(stream["id"], "t", [Message(b"m")] * 8, partitioning=2)
        tcp.create_consumer_group(stream["id"], "t", "readers")
        tcp.store_consumer_offset(stream["id"], "t", 2, Consumer.group("readers"), 2)
        tcp.store_consumer_offset(stream["id"], "t", 6, 5, 2)

    def lag(partition: int) -> float:
        labels = f'stream="{stream["name"]}",topic="t",group="readers",partition="{partition}"'
        return samples[f"rill_consumer_group_lag{{{labels}}}"]

    samples = scrape(http_server.http_url)
    assert lag(2) == 5  # offsets 3..7
    assert lag(1) == lag(3) == 0

    rows = api.get(f"/streams/{stream['id']}/topics/t/consumer-lag").json()
    assert {"consumer_kind": "consumer_group", "consumer_id": 1, "group_name": "readers", "partition_id": 2,
            "committed_offset": 2, "end_offset": 8, "lag": 5} in rows
    assert {"consumer_kind": "consumer", "consumer_id": 5, "group_name": None, "partition_id": 2,
            "committed_offset": 6, "end_offset": 8, "lag": 1} in rows
    assert len(rows) == 3 + 1  # the group in every partition, the consumer where it committed
