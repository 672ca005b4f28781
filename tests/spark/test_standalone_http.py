"""'servers' naming an HTTP API on a standalone server (``pyspark_rill.leaders``, the JVM's
``Leaders``): ``GET /cluster`` says "standalone" -- or is 404, as on a server from before the
route -- and the query reads as it always did, on both implementations."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class BeforeTheRoute(BaseHTTPRequestHandler):
    """An HTTP API without ``GET /cluster``: logins answer a token, everything else 404."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer(200, {"user_id": 1, "access_token": {"token": "t", "expiry": 4e9}})

    def do_GET(self) -> None:  # noqa: N802
        self._answer(404, {"detail": "Not Found"})

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def old_http_api():
    server = ThreadingHTTPServer(("127.0.0.1", 0), BeforeTheRoute)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("api", ["its own", "one without GET /cluster"])
def test_a_standalone_server_is_read_as_before(spark, implementation, rill, admin, stream,
                                               old_http_api, api) -> None:
    admin.create_topic(stream, "t", partitions_count=2)
    for partition in (1, 2):
        admin.send_messages(stream, "t", [f"{partition}-{n}" for n in range(20)],
                            partitioning=partition)
    http = rill.http_url if api == "its own" else old_http_api
    frame = (spark.read.format("rill")
             .options(servers=f"{rill.address},{http}", username="iggy", password="iggy",
                      stream=stream, topic="t", **implementation)
             .load().selectExpr("partition", "offset", "cast(value as string) as value"))
    assert sorted(tuple(row) for row in frame.collect()) == sorted(
        (p, n, f"{p}-{n}") for p in (1, 2) for n in range(20))
