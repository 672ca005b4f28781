"""The CLI over each transport: the same verbs over tcp, quic and http against one server."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("transport", ["quic", "http"])
def test_the_same_verbs_over_quic_and_http(cli, rill_server, transport):
    host, port = getattr(rill_server, f"{transport}_address")
    address = f"{host}:{port}"
    stream = {"quic": "over-quic", "http": "over-http"}[transport]
    run = lambda *args, **options: cli.run("--transport", transport, "--address", address,  # noqa: E731
                                           *args, **options)
    run("stream", "create", stream)
    run("topic", "create", stream, "t", "--partitions", "1")
    run("message", "send", stream, "t", "one", "two", "--partition", "1")
    polled = run("--json", "message", "poll", stream, "t", "--partition", "1", "--first",
                 "--count", "10").json()
    assert [(m["offset"], m["payload"]) for m in polled["messages"]] == [(0, "one"), (1, "two")]
    listed = run("--json", "stream", "list").json()
    assert stream in [s["name"] for s in listed]
    # the same data is visible over plain TCP
    assert stream in [s["name"] for s in cli.run("--json", "stream", "list").json()]
