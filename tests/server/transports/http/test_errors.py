"""Error answers of the HTTP API (wire §8.3): every failure is the JSON body
``{"id", "code", "reason", "field"}`` with the right status -- 400 for malformed bodies, wrong
types, unknown fields and bad query values (never FastAPI's 422), 413 for oversize bodies
(before and while streaming), 401, 403, 404 and 405 (CORS: test_cors.py)."""

from __future__ import annotations

import socket

import pytest
from http_helpers import bearer, error_of, unique


@pytest.mark.parametrize("body, field", [
    (b'{"name": ', None),  # malformed JSON
    (b'"just a string"', None),
    (b'{"name": 5}', "name"),  # wrong type
    (b'{"name": "s", "colour": "red"}', "colour"),  # unknown field
    (b'{"name": "s", "stream_id": "7"}', "stream_id"),  # a string is not a number
    (b'{"name": "s", "stream_id": -1}', "stream_id"),
    (b'{"name": "s", "stream_id": 4294967296}', "stream_id"),
    (b"{}", "name"),  # missing field
])
def test_malformed_bodies_are_400_invalid_format(api, body, field):
    answer = api.post("/streams", content=body, headers={"Content-Type": "application/json"})
    assert error_of(answer) == (400, "invalid_format")
    assert answer.json()["id"] == 4 and answer.json()["field"] == field


@pytest.mark.parametrize("path, params", [
    ("/streams/1/topics/1/messages", {"count": "ten"}),
    ("/streams/1/topics/1/messages", {"partition_id": "-1"}),
    ("/streams/1/topics/1/messages", {"kind": "sideways"}),
    ("/streams/1/topics/1/partitions", {"partitions_count": "x"}),
])
def test_bad_query_values_are_400(api, path, params):
    method = api.delete if path.endswith("partitions") else api.get
    assert error_of(method(path, params=params)) == (400, "invalid_format")


def test_nested_wrong_types_name_the_field(api, stream):
    answer = api.post(f"/streams/{stream['id']}/topics/t/messages", json={
        "partitioning": {"kind": "balanced", "value": ""},
        "messages": [{"payload": "aGk=", "headers": {"k": {"kind": "string", "value": 1}}}]})
    assert error_of(answer) == (400, "invalid_format")
    assert answer.json()["field"] == "messages.0.headers.k.value"
    bad_base64 = api.post(f"/streams/{stream['id']}/topics/t/messages", json={
        "partitioning": {"kind": "balanced"}, "messages": [{"payload": "%%%"}]})
    assert error_of(bad_base64) == (400, "invalid_format")
    assert bad_base64.json()["field"] == "messages[0].payload"


def test_oversize_body_with_content_length_is_413(api):
    body = b'{"name": "' + b"x" * 2_100_000 + b'"}'
    answer = api.post("/streams", content=body, headers={"Content-Type": "application/json"})
    assert error_of(answer) == (413, "command_length_error")


def test_oversize_streamed_body_is_413_without_content_length(api):
    def chunks():
        yield b'{"name": "'
        for _ in range(40):
            yield b"y" * 65536
        yield b'"}'

    answer = api.post("/streams", content=chunks(), headers={"Content-Type": "application/json"})
    assert "content-length" not in answer.request.headers
    assert error_of(answer) == (413, "command_length_error")


def test_a_body_just_under_the_limit_is_read(api):
    payload = "A" * 1_500_000  # base64 of 1.125 MB, the whole body < 2 MB
    answer = api.post("/streams/999999/topics/1/messages", json={
        "partitioning": {"kind": "balanced"}, "messages": [{"payload": payload}]})
    assert error_of(answer) == (404, "stream_id_not_found")


def test_401_403_404_405_bodies(http_server, api, anonymous):
    assert error_of(anonymous.get("/users")) == (401, "unauthenticated")
    name = unique("weak")
    api.post("/users", json={"username": name, "password": "secret"})
    weak = bearer(http_server.http_url, name, "secret")
    forbidden = api.get("/clients", headers=weak)
    assert error_of(forbidden) == (403, "unauthorized") and forbidden.json()["id"] == 41
    assert api.get("/streams/424242").json() == {
        "id": 404, "code": "not_found", "reason": "Resource not found", "field": None}
    assert error_of(api.get("/no/such/route")) == (404, "not_found")
    assert error_of(api.patch("/streams")) == (405, "method_not_allowed")


def test_unauthenticated_beats_a_malformed_body(anonymous):
    answer = anonymous.post("/streams", content=b"{not json", headers={"Content-Type": "application/json"})
    assert error_of(answer) == (401, "unauthenticated")


def test_a_raw_http_10_request_without_host_still_gets_json(http_server):
    host, port = http_server.http_address
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(b"GET /streams HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 401")
    assert b'"code":"unauthenticated"' in answer
