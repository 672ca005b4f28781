"""The CLI's start-up stays light (benchmarks/cli_startup.py measures its CPU; this guards the
cause without timing): a command imports only what it uses. ``rill --version`` imports no
command module, no client, no rich, no pydantic; a plain ``rill message send`` takes the fast
path (rill.cli.fast_send): no typer, no asyncio, no SDK client, only the codecs it sends; one
the fast path leaves to the typer verb (``--header``) imports the TCP client but not rich,
pydantic (typer's coercion of plain values is the CLI's own), aioquic, the HTTP transport, the
bench or the server."""

from __future__ import annotations

import json
import subprocess
import sys

from .helpers import Cli

# run the CLI in a child as the installed script does, then list the modules it imported
PROBE = """
import json, sys
sys.argv = ["rill", *json.loads(sys.argv[1])]
from rill.cli.main import app
try:
    app()
except SystemExit as exit:
    code = exit.code
else:
    code = 0
sys.stderr.write(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

NEVER = ("pydantic", "rich", "aioquic", "cryptography", "h11", "rill.server", "rill.cli.bench",
         "rill.client.http", "rill.client.quic", "importlib.metadata")


def imported(env: dict[str, str], *args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True,
                          text=True, env=env, timeout=60)
    report = json.loads(done.stderr[done.stderr.index('{"code"'):])
    assert report["code"] in (0, None), done
    return set(report["modules"])


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(module for module in modules if module.startswith(names)
                  and (module in names or module.startswith(tuple(f"{name}." for name in names))))


def test_version_imports_no_command_and_no_client(tmp_path):
    modules = imported(Cli("127.0.0.1:1", tmp_path).env(login=False), "--version")
    assert loaded(modules, (*NEVER, "asyncio", "rill.client", "rill.protocol", "rill.cli.messages",
                            "rill.cli.streams", "rill.cli.system")) == []


def test_message_send_imports_only_what_sending_needs(cli):
    with cli.sdk() as client:
        client.create_stream("light")
        client.create_topic("light", "t", 1)
    modules = imported(cli.env(), "message", "send", "light", "t", "hello", "--partition", "1",
                       "--header", "n:uint32:7")
    assert "rill.client.tcp" in modules and "rill.cli.messages" in modules  # it did send
    assert loaded(modules, (*NEVER, "rill.cli.topics", "rill.cli.users")) == []
    with cli.sdk() as client:
        assert client.get_topic("light", "t").topic.messages_count == 1


def test_plain_message_send_imports_neither_typer_nor_asyncio(cli):
    with cli.sdk() as client:
        client.create_stream("light")
        client.create_topic("light", "t", 1)
    for login in ({}, {"RILL_TOKEN": "", "RILL_USERNAME": "iggy", "RILL_PASSWORD": "iggy"}):
        modules = imported(cli.env(**login), "--json", "message", "send", "light", "t", "hello",
                           "--partition", "1")
        assert "rill.client.link" in modules and "rill.cli.fast_send" in modules  # it did send
        assert loaded(modules, (*NEVER, "typer", "click", "asyncio", "rill.cli.root",
                                "rill.cli.messages", "rill.cli.params", "rill.client.async_client",
                                "rill.client.blocking", "rill.client.tcp", "rill.client.methods",
                                "rill.protocol.permissions", "rill.protocol.iggy.commands.streams",
                                "rill.protocol.iggy.commands.topics", "ssl", "tempfile", "uuid")) == []
    with cli.sdk() as client:
        assert client.get_topic("light", "t").topic.messages_count == 2
