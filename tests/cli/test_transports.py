"""The CLI over each transport: the same verbs over tcp, quic and http against one server."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("transport", ["quic", "http"])
def test_the_same_verbs_over_quic_and_http(cli, rill_server, transport):
    host, port = getattr(rill_server, f"{transport}_address")
    address = f"{host}:{port}"
    stream = {"quic": "over-quic", "http": "over-http"}[transport]
    trust = ("--ca-file", rill_server.certificate) if transport == "quic" else ()
    run = lambda *args, **options: cli.run("--transport", transport, "--address", address,  # noqa: E731
                                           *trust, *args, **options)
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


def test_quic_verifies_the_certificate_unless_told_otherwise(cli, rill_server):
    host, port = rill_server.quic_address
    over_quic = ("--transport", "quic", "--address", f"{host}:{port}")
    refused = cli.run(*over_quic, "stream", "list", ok=False)
    assert refused.returncode == 3
    assert refused.stderr.strip() == (
        f"error: the certificate of {host}:{port} is not trusted: pass --ca-file with it (a rill "
        "server's own is <data dir>/secrets/self_signed_cert.pem), or --insecure")
    cli.run(*over_quic, "--ca-file", rill_server.certificate, "stream", "list")
    cli.run(*over_quic, "--insecure", "stream", "list")
    # a saved context keeps the trusted certificate
    cli.run(*over_quic, "--ca-file", rill_server.certificate, "-u", "iggy", "login",
            input="iggy\n", login=False)
    cli.run(*over_quic, "stream", "list", login=False)
