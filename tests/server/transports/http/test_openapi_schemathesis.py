"""Property-based run of the published OpenAPI document against the live server (schemathesis):
for generated valid and invalid requests to every documented operation, the server never
answers 5xx, answers only documented statuses and content types, and its bodies conform to the
documented schemas. Bounded: a few examples per operation, one shared server.

Left out: operations that would end the run's own session (logout, refresh, changing, renaming,
deactivating or deleting users -- a generated user id can be the caller's), the snapshot
(slow, and covered by test_routes) and following a partition (a stream of events that waits for
new messages; covered by test_console).
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from http_helpers import bearer
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]

schema = (
    schemathesis.pytest.from_fixture("rill_schema")
    .exclude(path="/users/logout")
    .exclude(path="/users/refresh-token")
    .exclude(path="/snapshot")
    .exclude(path="/streams/{stream_id}/topics/{topic_id}/messages/follow")
    .exclude(method=["PUT", "DELETE"], path_regex=r"^/users/\{user_id\}")
)


@pytest.fixture(scope="module")
def rill_schema(http_server):
    return schemathesis.openapi.from_url(f"{http_server.http_url}/openapi.json")


@pytest.fixture(scope="module")
def root_headers(http_server) -> dict[str, str]:
    headers = bearer(http_server.http_url)
    # something for the generated ids to find: stream 1 with topic 1 (2 partitions) and a group
    with httpx.Client(base_url=http_server.http_url, headers=headers) as client:
        client.post("/streams", json={"stream_id": 1, "name": "fuzz"})
        client.post("/streams/1/topics", json={"topic_id": 1, "name": "fuzz", "partitions_count": 2})
        client.post("/streams/1/topics/1/consumer-groups", json={"group_id": 1, "name": "fuzz"})
    return headers


@schema.parametrize()
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_live_server_conforms_to_its_openapi_document(case, root_headers):
    case.headers = {**(case.headers or {}), **root_headers}  # a real token, not a generated one
    case.call_and_validate(checks=CHECKS)


def test_the_document_describes_the_api(http_server):
    document = httpx.get(f"{http_server.http_url}/openapi.json").json()
    paths = document["paths"]
    # 42 commands + /, /ping, /health, /ready, /metrics, /server, follow, consumers,
    # topic-record-formats, users/{user_id}/unlock, cluster
    assert len([op for ops in paths.values() for op in ops]) == 53
    assert "204" in paths["/users/{user_id}/unlock"]["post"]["responses"]
    send = paths["/streams/{stream_id}/topics/{topic_id}/messages"]["post"]
    assert "requestBody" in send and "201" in send["responses"]
    for operations in paths.values():
        for operation in operations.values():
            assert "422" not in operation["responses"]
    assert "bearer" in str(document["components"]["securitySchemes"]).lower()
    assert httpx.get(f"{http_server.http_url}/docs").status_code == 200
