"""The HTTP side of the web console against a real server: its files (``/console``), the
``/server`` overview it shows, and the live ``.../messages/follow`` stream of server-sent events.
The Consumers view's ``.../consumers`` (Kafka groups beside Iggy's) runs on a second server with
the Kafka listener on. The console in a browser: test_console_browser.py."""

from __future__ import annotations

import base64
import json
import re
import socket
import struct
import threading
import time
from queue import Empty, Queue

import httpx
import psutil
import pytest
from http_helpers import assigned_kafka_member, bearer, error_of, start_with_kafka, unique
from server_process import RillProcess

import rill
from rill.server.transports.http.routes import console

WAIT = 30.0  # seconds: the most anything that must happen may take


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def send(api: httpx.Client, stream: int | str, topic: str, payloads: list[bytes], partition: int = 1) -> None:
    answer = api.post(f"/streams/{stream}/topics/{topic}/messages", json={
        "partitioning": {"kind": "partition_id", "value": b64(struct.pack("<I", partition))},
        "messages": [{"payload": b64(payload)} for payload in payloads]})
    assert answer.status_code == 201, answer.text


def read_only_user(api: httpx.Client, base_url: str) -> dict[str, str]:
    """A user who may read streams and topics but not manage them nor poll messages."""
    name = unique("viewer")
    created = api.post("/users", json={"username": name, "password": "secret1", "permissions": {
        "global": {"read_streams": False, "read_topics": True}, "streams": None}})
    assert created.status_code == 200, created.text
    return bearer(base_url, name, "secret1")


# -- the console's files ----------------------------------------------------------------------


def test_the_console_page_is_public_with_a_strict_policy(anonymous):
    for path in ("/console", "/console/"):
        page = anonymous.get(path)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "<title>rill console</title>" in page.text
        policy = page.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "script-src 'self'" in policy
        assert "frame-ancestors 'none'" in policy
        assert page.headers["x-content-type-options"] == "nosniff"


def test_every_console_file_is_served_with_its_type_and_loads_nothing_from_elsewhere(anonymous):
    for name, media_type in console.FILES.items():
        answer = anonymous.get(f"/console/{name}")
        assert answer.status_code == 200, name
        assert answer.headers["content-type"] == media_type, name
        assert "content-security-policy" in answer.headers
        # no CDN, no other origin: every URL a file names is a path of this server
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", answer.text), name
        assert not re.search(r"""(import|from)\s*\(?["'](https?:)?//""", answer.text), name
        assert not re.search(r"""url\(["']?(https?:)?//""", answer.text), name
    page = anonymous.get("/console").text
    for reference in re.findall(r"""(?:src|href)="/console/([^"]+)\"""", page):
        assert reference in console.FILES
    modules = "".join(anonymous.get(f"/console/{name}").text for name in console.FILES if name.endswith(".js"))
    for imported in re.findall(r"""from "\./([^"]+)\"""", modules):
        assert imported in console.FILES


def test_every_file_of_the_console_directory_is_named_and_shipped():
    from importlib import resources
    from pathlib import Path

    directory = resources.files("rill.server.transports.http") / "console"
    assert {entry.name for entry in directory.iterdir()} == set(console.FILES)
    pyproject = (Path(__file__).resolve().parents[4] / "pyproject.toml").read_text()
    assert '"server/transports/http/console/*"' in pyproject  # package data: in the wheel too


def test_only_the_named_console_files_are_served(anonymous):
    assert anonymous.get("/console/routes.py").status_code == 404
    assert anonymous.get("/console/..%2Fapp.py").status_code == 404
    assert anonymous.get("/console/../auth.py").status_code == 404
    assert anonymous.get("/console/nope.js").status_code == 404


# -- GET /server --------------------------------------------------------------------------------


def test_server_needs_a_login(anonymous):
    assert error_of(anonymous.get("/server")) == (401, "unauthenticated")


def test_server_says_version_uptime_listeners_fsync_and_disk(http_server, api):
    before = api.get("/server").json()
    assert before["version"] == rill.__version__
    assert before["run_time"] > 0 and before["start_time"] > 1_600_000_000 * 10**6
    listeners = {entry["protocol"]: entry["address"] for entry in before["listeners"]}
    host, port = http_server.http_address
    assert listeners["http"] == f"{host}:{port}"
    assert listeners["tcp"] == http_server.address
    assert {"quic", "tcp", "http"} <= set(listeners)
    assert before["fsync"] == {"policy": "interval", "interval_ms": 1000}  # the defaults
    disk = before["disk"]
    assert 0 < disk["free_bytes"] <= disk["total_bytes"]
    time.sleep(0.01)  # (so that the run time visibly grows: not a timing assertion)
    assert api.get("/server").json()["run_time"] > before["run_time"]


class ExecedLate(RillProcess):
    """A server whose process was made two seconds before it exec'd ``rill serve``, as
    ``./run serve`` does after installing what serving needs (the wait runs in the child
    between fork and exec: the preexec hook RillProcess uses for its descriptor limit)."""

    PAUSE = 2.0

    def __init__(self, data_dir):
        super().__init__(data_dir, open_files=0)  # (not None: the hook runs)

    def _limit_open_files(self) -> None:
        time.sleep(self.PAUSE)


def test_server_uptime_counts_from_the_server_start_not_the_process_creation(tmp_path):
    server = ExecedLate(tmp_path / "data").start()
    try:
        created_us = int(psutil.Process(server.process.pid).create_time() * 10**6)
        answer = httpx.get(f"{server.http_url}/server", headers=bearer(server.http_url)).json()
        assert answer["start_time"] >= created_us + ExecedLate.PAUSE * 10**6
        now_us = time.time_ns() // 1000
        assert answer["start_time"] + answer["run_time"] <= now_us
    finally:
        server.kill()


def test_server_counts_messages_in_and_out_and_the_stored_figures(api, stream):
    before = api.get("/server").json()
    send(api, stream["id"], "t", [b"x" * 100, b"y" * 100, b"z" * 100])
    polled = api.get(f"/streams/{stream['id']}/topics/t/messages",
                     params={"partition_id": 1, "kind": "offset", "value": 0, "count": 10})
    assert len(polled.json()["messages"]) == 3
    after = api.get("/server").json()
    assert after["throughput"]["messages_in"] - before["throughput"]["messages_in"] == 3
    assert after["throughput"]["messages_out"] - before["throughput"]["messages_out"] == 3
    assert after["throughput"]["bytes_in"] - before["throughput"]["bytes_in"] >= 300
    assert after["throughput"]["bytes_out"] - before["throughput"]["bytes_out"] >= 300
    assert after["counts"]["messages"] == before["counts"]["messages"] + 3
    assert after["counts"]["streams"] >= 1 and after["counts"]["partitions"] >= 3
    assert after["disk"]["messages_bytes"] > before["disk"]["messages_bytes"]


def clients(api: httpx.Client) -> dict[tuple[str, str], int]:
    return {(row["protocol"], row["transport"]): row["count"] for row in api.get("/server").json()["clients"]}


def wait_for_clients(api: httpx.Client, expected: dict[tuple[str, str], int]) -> None:
    deadline = time.monotonic() + WAIT
    while clients(api) != expected:
        assert time.monotonic() < deadline, f"clients stayed {clients(api)}, not {expected}"
        time.sleep(0.05)


def test_server_counts_the_clients_connected_by_protocol_and_transport(http_server, api):
    assert clients(api) == {}  # HTTP callers have no connection
    with socket.create_connection(http_server.tcp_address):
        wait_for_clients(api, {("iggy", "tcp"): 1})
    wait_for_clients(api, {})


# -- GET .../messages/follow ----------------------------------------------------------------------


def events(response: httpx.Response, into: Queue) -> None:
    """Parse server-sent events into ``into`` as (name, data) until the stream ends."""
    name, data = None, []
    try:
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and data:
                into.put((name, json.loads("\n".join(data))))
                name, data = None, []
    except httpx.HTTPError:
        pass
    into.put(("closed", None))


def next_event(queue: Queue) -> tuple[str, object]:
    try:
        return queue.get(timeout=WAIT)
    except Empty:
        raise AssertionError("no event arrived") from None


def test_follow_streams_new_messages_as_they_arrive_then_ends_at_the_limit(http_server, api, stream):
    url = f"{http_server.http_url}/streams/{stream['id']}/topics/t/messages/follow"
    send(api, stream["id"], "t", [b"old"])  # before the stream: not sent (it starts at the end)
    received: Queue = Queue()
    with httpx.Client(headers=api.headers, timeout=WAIT) as client:
        with client.stream("GET", url, params={"partition_id": 1, "limit": 3}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            reader = threading.Thread(target=events, args=(response, received), daemon=True)
            reader.start()
            assert next_event(received) == ("start", {"offset": 1})
            send(api, stream["id"], "t", [b"first", b"second"])
            payloads = []
            while len(payloads) < 2:
                name, data = next_event(received)
                assert name == "messages"
                payloads += [base64.b64decode(m["payload"]) for m in data["messages"]]
            assert payloads == [b"first", b"second"]
            send(api, stream["id"], "t", [b"third", b"fourth"])
            name, data = next_event(received)
            assert name == "messages" and [m["offset"] for m in data["messages"]] == [3]  # limit 3
            assert next_event(received) == ("end", {"reason": "limit", "next_offset": 4})
            assert next_event(received) == ("closed", None)


def http_polls(anonymous: httpx.Client) -> int:
    """How many POLL_MESSAGES the server ran for HTTP callers (its metrics)."""
    line = 'rill_requests_total{protocol="iggy",command="poll_messages",transport="http",outcome="ok"} '
    return sum(int(row[len(line):]) for row in anonymous.get("/metrics").text.splitlines()
               if row.startswith(line))


def test_follow_ends_when_the_client_goes(http_server, api, stream, anonymous):
    url = f"{http_server.http_url}/streams/{stream['id']}/topics/t/messages/follow"
    with httpx.Client(headers=api.headers, timeout=WAIT) as client:
        with client.stream("GET", url, params={"partition_id": 3}) as response:
            assert next(response.iter_lines()) == "event: start"
    # gone: a new message must not wake the first stream (it would poll it); the second one does
    polls = http_polls(anonymous)
    send(api, stream["id"], "t", [b"after"], partition=3)
    with httpx.Client(headers=api.headers, timeout=WAIT) as client:
        answer = client.get(url, params={"partition_id": 3, "offset": 0, "limit": 1})
    assert "after" not in answer.text and base64.b64encode(b"after").decode() in answer.text
    assert http_polls(anonymous) == polls + 1


def test_follow_from_an_offset_sends_the_stored_messages_first(http_server, api, stream):
    send(api, stream["id"], "t", [b"a", b"b", b"c"], partition=2)
    url = f"{http_server.http_url}/streams/{stream['id']}/topics/t/messages/follow"
    with httpx.Client(headers=api.headers, timeout=WAIT) as client:
        answer = client.get(url, params={"partition_id": 2, "offset": 1, "limit": 2})
    assert answer.status_code == 200
    blocks = [block for block in answer.text.split("\n\n") if block.startswith("event: messages")]
    data = json.loads(blocks[0].split("data: ", 1)[1])
    assert [base64.b64decode(m["payload"]) for m in data["messages"]] == [b"b", b"c"]
    assert 'event: end\ndata: {"reason":"limit","next_offset":3}' in answer.text


def test_follow_refuses_unknown_topics_bad_limits_and_users_who_may_not_poll(http_server, api, stream, anonymous):
    base = f"/streams/{stream['id']}/topics"
    assert error_of(anonymous.get(f"{base}/t/messages/follow")) == (401, "unauthenticated")
    assert error_of(api.get(f"{base}/nope/messages/follow")) == (400, "topic_name_not_found")
    assert error_of(api.get(f"{base}/t/messages/follow", params={"partition_id": 9})) == (404, "partition_not_found")
    assert error_of(api.get(f"{base}/t/messages/follow", params={"limit": 0})) == (400, "invalid_format")
    assert error_of(api.get(f"{base}/t/messages/follow", params={"limit": 10_001})) == (400, "invalid_format")
    viewer = read_only_user(api, http_server.http_url)
    assert error_of(api.get(f"{base}/t/messages/follow", headers=viewer)) == (403, "unauthorized")


# -- GET .../consumers ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kafka_server(tmp_path_factory):
    server = start_with_kafka(tmp_path_factory.mktemp("console-kafka") / "data")
    yield server
    server.kill()


def test_consumers_lists_iggy_groups_iggy_consumers_and_kafka_groups_with_their_lag(kafka_server):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    bootstrap = "%s:%d" % kafka_server.kafka_address
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for n in range(10):
        producer.send("payments", value=b"p%d" % n, partition=0)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="billing", enable_auto_commit=False)
    consumer.commit({TopicPartition("payments", 0): OffsetAndMetadata(7, "", -1)})  # next: 7
    consumer.close()
    with httpx.Client(base_url=kafka_server.http_url, headers=bearer(kafka_server.http_url),
                      timeout=WAIT) as api:
        assert api.post("/streams/kafka/topics/payments/consumer-groups", json={"name": "audit"}).status_code == 201
        assert api.put("/streams/kafka/topics/payments/consumer-offsets",
                       json={"id": 5, "partition_id": 1, "offset": 1}).status_code == 204
        answer = api.get("/streams/kafka/topics/payments/consumers").json()
        rows = answer["positions"]
        assert answer["members"] == []  # nobody reads now
        with socket.create_connection(kafka_server.kafka_address):  # a Kafka client, counted as one
            wait_for_clients(api, {("kafka", "tcp"): 1})
        wait_for_clients(api, {})
        reader = assigned_kafka_member(bootstrap, "payments", "readers", "reader-app", WAIT)
        try:
            [member] = api.get("/streams/kafka/topics/payments/consumers").json()["members"]
            assert member["kind"] == "kafka_group" and member["name"] == "readers"
            assert member["client"].startswith("reader-app") and member["partitions"] == [1]
            assert member["member_id"]
            assert api.get("/streams/kafka/topics/other/consumers").status_code == 400  # no topic
        finally:
            reader.close()
        anonymous = httpx.get(f"{kafka_server.http_url}/streams/kafka/topics/payments/consumers")
        missing = api.get("/streams/kafka/topics/nope/consumers")
    assert {(row["kind"], row["name"], row["partition_id"], row["next_offset"], row["end_offset"], row["lag"])
            for row in rows} == {
        ("iggy_group", "audit", 1, None, 10, 10),  # nothing committed: every message
        ("iggy_consumer", "5", 1, 2, 10, 8),  # offset 1 consumed: reads 2 next
        ("kafka_group", "billing", 1, 7, 10, 3),  # Kafka's partition 0 is rill's 1
    }
    assert error_of(anonymous) == (401, "unauthenticated")
    assert error_of(missing) == (400, "topic_name_not_found")

