"""``rill client get|list`` and ``rill me`` against a live server. Needs GET_ME/GET_CLIENT(S)."""

from __future__ import annotations

from .helpers import assert_error_line


def test_client_verbs_me_and_errors(cli):
    with cli.sdk() as client:
        own_id = client.get_me().client_id
        details = cli.run("--json", "client", "get", str(own_id)).json()
        assert (details["client_id"], details["user_id"], details["transport"]) == (own_id, 1, "tcp")
        assert details["consumer_groups"] == []

        listed = cli.run("--json", "client", "list").json()
        assert own_id in [c["client_id"] for c in listed] and len(listed) >= 2
        table = cli.run("client", "list").stdout
        assert str(own_id) in table and "tcp" in table

    me, missing = cli.run_many(("--json", "me"), ("client", "get", "1"))
    assert me.returncode == 0, me.stderr
    assert me.json()["user_id"] == 1 and me.json()["client_id"] != own_id
    assert_error_line(missing, "client with ID 1 was not found (100 client_not_found)")
