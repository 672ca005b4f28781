"""``rill pat ...`` against a live server. Needs the server's token commands (41-44)."""

from __future__ import annotations

from .helpers import assert_error_line


def test_token_verbs_token_login_and_errors(cli):
    token = cli.run("pat", "create", "deploy-bot").stdout.strip()
    assert len(token) > 20 and "\n" not in token

    streams = cli.run("--token", token, "--json", "stream", "list", login=False).json()
    assert streams == []

    timed = cli.run("--json", "pat", "create", "short-lived", "--expiry", "1h").json()
    assert (timed["name"], timed["expiry"]) == ("short-lived", 3_600_000_000) and timed["token"]

    listed = {t["name"]: t["expiry_at"] for t in cli.run("--json", "pat", "list").json()}
    assert listed["deploy-bot"] is None and listed["short-lived"] > 0

    cli.run("pat", "delete", "deploy-bot")
    with cli.sdk() as client:
        assert "deploy-bot" not in [t.name for t in client.get_personal_access_tokens()]
    rejected, missing, bad_name = cli.run_many(
        {"args": ("--token", token, "stream", "list"), "login": False},
        ("pat", "delete", "nope-token"),
        ("pat", "create", "x"),
    )
    assert_error_line(rejected, "(20 resource_not_found)")
    assert_error_line(missing, "personal access token nope-token was not found (20 resource_not_found)")
    assert_error_line(bad_name, "(50 invalid_personal_access_token_name)")
