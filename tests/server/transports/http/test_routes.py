"""Every endpoint family of the HTTP API (wire §8.4) against a real server: happy paths, the
documented statuses and shapes, and the common errors of each family."""

from __future__ import annotations

import base64
import io
import struct
import zipfile

import pytest

import rill
from http_helpers import bearer, error_of, unique

from rill.client import Client


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- system -----------------------------------------------------------------------------------


def test_public_system_endpoints(anonymous, api):
    home = anonymous.get("/", follow_redirects=False)  # a browser lands on the console
    assert home.status_code == 307 and home.headers["location"] == "/console"
    assert "<title>" in anonymous.get("/", follow_redirects=True).text
    assert anonymous.get("/ping").text == "pong"
    assert anonymous.get("/stats").status_code == 401  # it names the host: a login is needed
    stats = api.get("/stats")
    assert stats.status_code == 200
    data = stats.json()
    assert data["memory_usage"].endswith(" B") and isinstance(data["run_time"], int)
    assert data["streams_count"] >= 0 and data["hostname"]
    assert data["server_version"] == rill.__version__


def test_clients_list_tcp_clients_but_never_http_callers(http_server, api):
    with Client(http_server.address) as tcp:
        tcp.login_user("iggy", "iggy")
        clients = api.get("/clients").json()
        assert clients, "the TCP client is listed"
        assert {client["transport"] for client in clients} == {"TCP"}
        mine = next(c for c in clients if c["user_id"] == 1)
        details = api.get(f"/clients/{mine['client_id']}").json()
        assert details["address"] == mine["address"] and details["consumer_groups"] == []
    assert api.get("/clients/0").json()["code"] == "not_found"
    assert error_of(api.get("/clients/123456")) == (404, "not_found")


def test_snapshot_is_a_zip_attachment(api):
    answer = api.post("/snapshot", json={"snapshot_types": ["Test"], "compression": "Stored"})
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/zip"
    assert answer.headers["content-disposition"].startswith('attachment; filename="rill_snapshot_')
    with zipfile.ZipFile(io.BytesIO(answer.content)) as archive:
        assert archive.read("test.txt").strip() == b"test"
    assert error_of(api.post("/snapshot", json={"snapshot_types": ["Nope"]})) == (400, "invalid_format")


# -- streams, topics, partitions --------------------------------------------------------------


def test_stream_lifecycle(api):
    name = unique("life")
    created = api.post("/streams", json={"name": name})
    assert created.status_code == 200
    stream = created.json()
    assert stream["name"] == name and stream["size"] == "0 B" and stream["topics"] == []
    sid = stream["id"]
    assert any(s["id"] == sid for s in api.get("/streams").json())
    assert api.get(f"/streams/{sid}").json()["name"] == name
    assert api.get(f"/streams/{name}").json()["id"] == sid  # by name
    assert api.put(f"/streams/{sid}", json={"name": name + "-x"}).status_code == 204
    assert api.get(f"/streams/{sid}").json()["name"] == name + "-x"
    assert api.delete(f"/streams/{sid}/purge").status_code == 204
    assert api.delete(f"/streams/{sid}").status_code == 204
    assert error_of(api.get(f"/streams/{sid}")) == (404, "not_found")
    assert error_of(api.delete(f"/streams/{sid}")) == (404, "stream_id_not_found")
    assert error_of(api.delete("/streams/no-such-name")) == (400, "stream_name_not_found")


def test_stream_create_errors(api):
    name = unique("dup")
    assert api.post("/streams", json={"name": name}).status_code == 200
    assert error_of(api.post("/streams", json={"name": name})) == (400, "stream_name_already_exists")
    assert error_of(api.post("/streams", json={"stream_id": 0, "name": unique("z")})) == (400, "invalid_stream_id")
    assert error_of(api.post("/streams", json={"name": "bad/name"})) == (400, "invalid_stream_name")
    explicit = api.post("/streams", json={"stream_id": 4242, "name": unique("explicit")})
    assert explicit.json()["id"] == 4242
    assert error_of(api.post("/streams", json={"stream_id": 4242, "name": unique("y")})) == (
        400, "stream_id_already_exists")


def test_topic_and_partition_lifecycle(api, stream):
    sid = stream["id"]
    created = api.post(f"/streams/{sid}/topics", json={
        "name": "orders", "partitions_count": 2, "compression_algorithm": "gzip",
        "message_expiry": 60_000_000, "max_topic_size": 2**64 - 1, "replication_factor": 1})
    assert created.status_code == 200
    topic = created.json()
    assert topic["compression_algorithm"] == "gzip" and topic["max_topic_size"] == 2**64 - 1
    assert [p["id"] for p in topic["partitions"]] == [1, 2] and topic["partitions"][0]["size"] == "0 B"
    tid = topic["id"]
    assert {t["name"] for t in api.get(f"/streams/{sid}/topics").json()} == {"t", "orders"}
    assert api.get(f"/streams/{sid}/topics/orders").json()["id"] == tid
    assert api.put(f"/streams/{sid}/topics/{tid}", json={
        "name": "orders2", "compression_algorithm": "none", "message_expiry": 0,
        "max_topic_size": 0}).status_code == 204
    renamed = api.get(f"/streams/{sid}/topics/{tid}").json()
    assert renamed["name"] == "orders2" and renamed["compression_algorithm"] == "none"
    created_partitions = api.post(f"/streams/{sid}/topics/{tid}/partitions", json={"partitions_count": 3})
    assert created_partitions.status_code == 201 and created_partitions.content == b""
    assert api.get(f"/streams/{sid}/topics/{tid}").json()["partitions_count"] == 5
    assert api.delete(f"/streams/{sid}/topics/{tid}/partitions",
                      params={"partitions_count": 4}).status_code == 204
    assert api.get(f"/streams/{sid}/topics/{tid}").json()["partitions_count"] == 1
    assert api.delete(f"/streams/{sid}/topics/{tid}/purge").status_code == 204
    assert api.delete(f"/streams/{sid}/topics/{tid}").status_code == 204
    assert error_of(api.get(f"/streams/{sid}/topics/{tid}")) == (404, "not_found")
    assert error_of(api.delete(f"/streams/{sid}/topics/{tid}")) == (404, "topic_id_not_found")
    assert error_of(api.get("/streams/999999/topics")) == (404, "stream_id_not_found")
    assert error_of(api.post(f"/streams/{sid}/topics", json={
        "name": "r", "partitions_count": 1, "replication_factor": 0})) == (400, "invalid_replication_factor")
    assert error_of(api.post(f"/streams/{sid}/topics", json={
        "name": "big", "partitions_count": 1001})) == (400, "too_many_partitions")


def test_the_record_format_is_chosen_at_creation_and_shown(api, stream):
    """``record_format`` in the create body (optional, ``iggy`` by default) and in every topic
    JSON; ``/topic-record-formats`` lists them; another name is one 400 invalid_format."""
    sid = stream["id"]
    kafka = api.post(f"/streams/{sid}/topics", json={
        "name": "k", "partitions_count": 1, "record_format": "kafka"})
    assert kafka.status_code == 200, kafka.text
    assert kafka.json()["record_format"] == "kafka"
    iggy = api.post(f"/streams/{sid}/topics", json={
        "name": "i", "partitions_count": 1, "record_format": "iggy"}).json()
    assert iggy["record_format"] == "iggy"
    assert api.get(f"/streams/{sid}/topics/k").json()["record_format"] == "kafka"
    assert {t["name"]: t["record_format"] for t in api.get(f"/streams/{sid}/topics").json()} \
        == {"t": "iggy", "k": "kafka", "i": "iggy"}  # "t": made without the field
    assert {t["name"]: t["record_format"] for t in api.get(f"/streams/{sid}").json()["topics"]} \
        == {"t": "iggy", "k": "kafka", "i": "iggy"}
    formats = api.get(f"/streams/{sid}/topic-record-formats").json()
    assert formats == [{"topic_id": 1, "record_format": "iggy"},
                       {"topic_id": kafka.json()["id"], "record_format": "kafka"},
                       {"topic_id": iggy["id"], "record_format": "iggy"}]
    bad = api.post(f"/streams/{sid}/topics", json={
        "name": "x", "partitions_count": 1, "record_format": "avro"})
    assert error_of(bad) == (400, "invalid_format")
    assert "record_format" in bad.json()["reason"] and "avro" not in api.get(
        f"/streams/{sid}/topics").text


# -- messages and offsets ---------------------------------------------------------------------


def test_send_and_poll_messages(api, stream):
    base = f"/streams/{stream['id']}/topics/t"
    sent = api.post(f"{base}/messages", json={
        "partitioning": {"kind": "partition_id", "value": b64(struct.pack("<I", 2))},
        "messages": [
            {"id": 2**128 - 2, "payload": b64(b"first"),
             "headers": {"trace": {"kind": "string", "value": b64(b"abc")},
                         "n": {"kind": "uint32", "value": b64(struct.pack("<I", 7))}}},
            {"payload": b64(b"second")},
        ]})
    assert sent.status_code == 201 and sent.content == b""
    polled = api.get(f"{base}/messages", params={"partition_id": 2, "kind": "first", "count": 10})
    assert polled.status_code == 200
    data = polled.json()
    assert data["partition_id"] == 2 and data["current_offset"] == 1
    first, second = data["messages"]
    assert base64.b64decode(first["payload"]) == b"first" and first["id"] == 2**128 - 2
    assert first["state"] == "available" and first["offset"] == 0
    assert first["headers"]["trace"] == {"kind": "string", "value": b64(b"abc")}
    assert second["headers"] is None and second["id"] != 0  # a server-assigned UUIDv7
    assert api.get(f"{base}/messages", params={"partition_id": 2, "kind": "last", "count": 1}
                   ).json()["messages"][0]["offset"] == 1
    assert api.get(f"{base}/messages", params={"partition_id": 2, "kind": "offset", "value": 1}
                   ).json()["messages"][0]["payload"] == b64(b"second")
    # auto commit moves the stored offset of consumer 5; "next" goes on from there
    api.get(f"{base}/messages", params={"id": 5, "partition_id": 2, "kind": "next", "count": 1,
                                        "auto_commit": "true"})
    offset = api.get(f"{base}/consumer-offsets", params={"id": 5, "partition_id": 2}).json()
    assert offset == {"partition_id": 2, "current_offset": 1, "stored_offset": 0}
    following = api.get(f"{base}/messages", params={"id": 5, "partition_id": 2, "kind": "next"}).json()
    assert [m["offset"] for m in following["messages"]] == [1]
    assert api.get(f"{base}/messages/flush/2/true").status_code == 200


def test_balanced_and_key_partitioning(api, stream):
    base = f"/streams/{stream['id']}/topics/t"
    for kind, value in (("balanced", ""), ("messages_key", b64(b"user-1"))):
        answer = api.post(f"{base}/messages", json={
            "partitioning": {"kind": kind, "value": value}, "messages": [{"payload": b64(b"x")}]})
        assert answer.status_code == 201, answer.text
    topic = api.get(f"/streams/{stream['id']}/topics/t").json()
    assert topic["messages_count"] == 2


def test_message_errors(api, stream):
    base = f"/streams/{stream['id']}/topics/t"
    no_partition = api.post(f"{base}/messages", json={
        "partitioning": {"kind": "partition_id", "value": b64(struct.pack("<I", 9))},
        "messages": [{"payload": b64(b"x")}]})
    assert error_of(no_partition) == (404, "partition_not_found")
    empty = api.post(f"{base}/messages", json={"partitioning": {"kind": "balanced"}, "messages": []})
    assert error_of(empty) == (400, "invalid_messages_count")
    assert error_of(api.get(f"{base}/messages", params={"count": 0})) == (400, "invalid_messages_count")
    assert error_of(api.get(f"{base}/messages", params={"kind": "sideways"})) == (400, "invalid_format")


def test_consumer_offsets(api, stream):
    base = f"/streams/{stream['id']}/topics/t"
    # nothing stored: 200 with stored_offset 0, the binary answer (as Iggy 0.4.95; was a 404)
    assert api.get(f"{base}/consumer-offsets", params={"id": "reader"}).json() == {
        "partition_id": 1, "current_offset": 0, "stored_offset": 0}
    assert error_of(api.get(f"/streams/{stream['id']}/topics/ghost/consumer-offsets",
                            params={"id": "reader"}))[0] == 404
    assert error_of(api.get(f"{base}/consumer-offsets", params={"id": "reader", "partition_id": 9}))[0] == 404
    api.post(f"{base}/messages", json={"partitioning": {"kind": "partition_id", "value": b64(struct.pack("<I", 1))},
                                       "messages": [{"payload": b64(b"a")}, {"payload": b64(b"b")}]})
    assert api.put(f"{base}/consumer-offsets", json={"id": "reader", "offset": 1}).status_code == 204
    assert api.get(f"{base}/consumer-offsets", params={"id": "reader"}).json() == {
        "partition_id": 1, "current_offset": 1, "stored_offset": 1}
    assert error_of(api.put(f"{base}/consumer-offsets", json={"id": "reader", "offset": 5})) == (
        400, "invalid_offset")


def test_consumer_groups(api, stream):
    base = f"/streams/{stream['id']}/topics/t/consumer-groups"
    created = api.post(base, json={"name": "workers"})
    assert created.status_code == 201
    group = created.json()
    assert group == {"id": group["id"], "name": "workers", "partitions_count": 3, "members_count": 0,
                     "members": []}
    assert api.get(base).json() == [{k: v for k, v in group.items() if k != "members"}]
    assert api.get(f"{base}/workers").json()["id"] == group["id"]
    assert error_of(api.post(base, json={"name": "workers"})) == (400, "consumer_group_name_already_exists")
    assert error_of(api.post(base, json={"group_id": 0, "name": "g0"})) == (400, "invalid_consumer_group_id")
    assert api.delete(f"{base}/{group['id']}").status_code == 204
    assert error_of(api.get(f"{base}/{group['id']}")) == (404, "not_found")
    assert error_of(api.delete(f"{base}/{group['id']}")) == (404, "consumer_group_id_not_found")


# -- users and tokens -------------------------------------------------------------------------


def test_user_lifecycle(http_server, api):
    name = unique("user")
    permissions = {"global": {"read_streams": True},
                   "streams": {"1": {"read_stream": True, "topics": {"2": {"poll_messages": True}}}}}
    created = api.post("/users", json={"username": name, "password": "secret1", "permissions": permissions})
    assert created.status_code == 200
    user = created.json()
    assert user["status"] == "active" and user["username"] == name
    assert user["permissions"]["global"]["read_streams"] is True
    assert user["permissions"]["global"]["manage_servers"] is False
    assert user["permissions"]["streams"]["1"]["topics"]["2"]["poll_messages"] is True
    uid = user["id"]
    assert any(u["id"] == uid for u in api.get("/users").json())
    assert api.get(f"/users/{name}").json()["id"] == uid
    assert api.put(f"/users/{uid}/permissions", json={"permissions": None}).status_code == 204
    assert api.get(f"/users/{uid}").json()["permissions"] is None
    assert api.put(f"/users/{uid}/password", json={"current_password": "secret1",
                                                   "new_password": "secret2"}).status_code == 204
    assert error_of(api.put(f"/users/{uid}/password", json={"current_password": "wrong",
                                                           "new_password": "secret3"})) == (400, "invalid_credentials")
    headers = bearer(http_server.http_url, name, "secret2")
    own = api.get(f"/users/{uid}", headers=headers)  # oneself needs no permission
    assert own.status_code == 200
    assert api.put(f"/users/{uid}", json={"username": name + "-r", "status": "inactive"}).status_code == 204
    assert api.get(f"/users/{uid}").json() | {"created_at": 0} == {
        "id": uid, "created_at": 0, "status": "inactive", "username": name + "-r", "permissions": None}
    assert error_of(api.post("/users/login", json={"username": name + "-r", "password": "secret2"})) == (
        400, "user_inactive")
    assert api.delete(f"/users/{uid}").status_code == 204
    assert error_of(api.get(f"/users/{uid}")) == (404, "not_found")
    assert error_of(api.delete("/users/1")) == (400, "cannot_delete_user")
    assert error_of(api.post("/users", json={"username": "x", "password": "secret"})) == (400, "invalid_username")


def test_forbidden_without_permission(http_server, api):
    name = unique("plain")
    assert api.post("/users", json={"username": name, "password": "secret"}).status_code == 200
    headers = bearer(http_server.http_url, name, "secret")
    assert error_of(api.post("/streams", json={"name": unique("no")}, headers=headers)) == (403, "unauthorized")
    assert error_of(api.get("/users", headers=headers)) == (403, "unauthorized")
    assert error_of(api.get("/users/1", headers=headers)) == (404, "not_found")  # get-single


def test_personal_access_tokens(http_server, api):
    created = api.post("/personal-access-tokens", json={"name": "laptop", "expiry": 3_600_000_000})
    assert created.status_code == 200
    token = created.json()["token"]
    forever = api.post("/personal-access-tokens", json={"name": "forever"}).json()["token"]
    listed = {t["name"]: t["expiry_at"] for t in api.get("/personal-access-tokens").json()}
    assert listed["forever"] is None and listed["laptop"] > 0
    login = api.post("/personal-access-tokens/login", json={"token": token})
    assert login.status_code == 200 and login.json()["user_id"] == 1
    jwt = login.json()["access_token"]["token"]
    assert api.get("/streams", headers={"Authorization": f"Bearer {jwt}"}).status_code == 200
    assert error_of(api.post("/personal-access-tokens", json={"name": "laptop"})) == (
        400, "personal_access_token_already_exists")
    assert api.delete("/personal-access-tokens/laptop").status_code == 204
    assert api.delete("/personal-access-tokens/forever").status_code == 204
    assert error_of(api.delete("/personal-access-tokens/laptop")) == (404, "resource_not_found")
    assert error_of(api.post("/personal-access-tokens/login", json={"token": forever})) == (
        404, "resource_not_found")


@pytest.mark.parametrize("path", ["/streams", "/users", "/personal-access-tokens", "/clients"])
def test_lists_are_sorted(api, path):
    items = api.get(path).json()
    key = "name" if path == "/personal-access-tokens" else ("client_id" if path == "/clients" else "id")
    assert [item[key] for item in items] == sorted(item[key] for item in items)


def test_https_when_tls_is_enabled(rill_factory, tmp_path):
    import ssl

    import httpx

    from rill.server.auth.certificates import generate_self_signed

    certificate, key = generate_self_signed()
    (tmp_path / "cert.pem").write_bytes(certificate)
    (tmp_path / "key.pem").write_bytes(key)
    server = rill_factory({"RILL_HTTP_TLS_ENABLED": "true",
                           "RILL_HTTP_TLS_CERTIFICATE": str(tmp_path / "cert.pem"),
                           "RILL_HTTP_TLS_KEY": str(tmp_path / "key.pem")}).start()
    host, port = server.http_address
    trusted = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    assert httpx.get(f"https://{host}:{port}/ping", verify=trusted).text == "pong"
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://{host}:{port}/ping")  # plain HTTP is not spoken there
    with Client(f"https://{host}:{port}", transport="http", ssl=trusted) as client:
        client.login_user("iggy", "iggy")
        assert client.get_streams() == []
