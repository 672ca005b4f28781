"""``rill ping|stats|snapshot``, connection failures, transports and help texts."""

from __future__ import annotations

import re
import zipfile
from typing import Any

import typer

import rill

from rill.bench.ports import free_port
from rill.cli.main import app
from rill.client import PollingStrategy

from .helpers import Cli, assert_error_line


def test_ping_stats_and_snapshot(cli, tmp_path):
    pong = cli.run("ping", login=False)
    assert pong.stdout.startswith(f"pong from {cli.address}: ")
    assert len(cli.run("--json", "ping", "--count", "2", login=False).json()["round_trips_ms"]) == 2

    with cli.sdk() as client:
        client.create_stream("orders")
        client.create_topic("orders", "eu", 3)
    stats = cli.run("--json", "stats").json()
    assert (stats["streams_count"], stats["topics_count"], stats["partitions_count"]) == (1, 1, 3)
    assert stats["process_id"] > 0 and stats["hostname"]
    assert stats["server_version"] == rill.__version__
    assert re.search(rf"Server version\s+.\s+{re.escape(rill.__version__)}\s", cli.run("stats").stdout)

    archive = tmp_path / "snapshot.zip"
    result = cli.run("--json", "snapshot", "--output", str(archive), "--type", "test", "--compression", "stored").json()
    assert result["files"] == ["test.txt"] and result["size_bytes"] == archive.stat().st_size
    with zipfile.ZipFile(archive) as written:
        assert written.read("test.txt").strip() == b"test"


def test_connection_failures_transports_and_help(tmp_path):
    port = free_port()  # a port nobody listens on
    offline = Cli(f"127.0.0.1:{port}", tmp_path / "rill-home")
    refused, quic, usage, helped = offline.run_many(
        {"args": ("-u", "iggy", "-p", "iggy", "stream", "list"), "login": False},
        {"args": ("--transport", "quic", "ping"), "login": False},
        {"args": ("--transport", "carrier-pigeon", "ping"), "login": False},
        {"args": ("stream", "create", "--help"), "login": False},
    )
    assert_error_line(refused, f"error: cannot connect to 127.0.0.1:{port} (connection refused)", exit_code=3)
    # QUIC is available: nobody answers on that UDP port either (ICMP port unreachable)
    assert_error_line(quic, f"error: cannot connect to 127.0.0.1:{port} (connection refused)", exit_code=3)
    assert usage.returncode == 2 and "carrier-pigeon" in usage.stderr
    assert helped.returncode == 0
    assert "Examples" in helped.stdout and "rill stream create orders" in helped.stdout


def test_every_verb_has_an_example_and_a_docstring():
    root = typer.main.get_command(app)
    verbs: list[str] = []

    def walk(command: Any, path: str) -> None:
        if hasattr(command, "list_commands"):  # a group (typer vendors its own click)
            for name in command.list_commands(None):  # (the root imports its commands lazily)
                walk(command.get_command(None, name), f"{path} {name}")
        else:
            verbs.append(path)
            assert command.epilog and "rill " in command.epilog, f"{path} has no example"
            assert command.help, f"{path} has no help text"

    walk(root, "rill")
    expected = {
        "rill stream create", "rill stream purge", "rill topic update", "rill partition delete",
        "rill message send", "rill message poll", "rill message flush", "rill consumer-group join",
        "rill consumer-offset set", "rill user permissions", "rill pat create", "rill client list",
        "rill ping", "rill me", "rill stats", "rill snapshot", "rill login", "rill logout",
        "rill context use", "rill serve",
    }
    assert expected <= set(verbs)


def test_version_is_printed_without_a_server():
    import platform
    import subprocess
    import sys

    from rill import __version__

    for flag in ("--version", "-V"):
        result = subprocess.run([sys.executable, "-m", "rill", flag], capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"rill {__version__} (Python {platform.python_version()})\n"


def test_stats_read_and_written_are_the_servers_own_log_traffic(cli):
    payload = b"x" * 1024
    with cli.sdk() as client:
        client.create_stream("traffic")
        client.create_topic("traffic", "t", 1)
        fresh = cli.run("--json", "stats").json()
        # a started server has read and written no log bytes (its imports and metadata are not log traffic)
        assert (fresh["read_bytes"], fresh["written_bytes"]) == (0, 0)
        for _ in range(10):
            client.send_messages("traffic", "t", [payload] * 20, partitioning=1)
        sent = cli.run("--json", "stats").json()
        assert 200 * 1024 <= sent["written_bytes"] - fresh["written_bytes"] < 2 * 200 * 1024
        assert sent["read_bytes"] == fresh["read_bytes"]
        polled = client.poll_messages("traffic", "t", consumer=1, partition_id=1,
                                      strategy=PollingStrategy.first(), count=200)
        assert len(polled.messages) == 200
    read = cli.run("--json", "stats").json()
    # served from the page cache, still counted: every byte served was read from the log
    assert 200 * 1024 <= read["read_bytes"] - sent["read_bytes"] < 2 * 200 * 1024
    assert "Log read / written" in cli.run("stats").stdout
