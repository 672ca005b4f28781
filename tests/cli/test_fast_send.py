"""``rill message send``'s fast path (rill.cli.fast_send) answers exactly as the typer verb does.

Each case runs the same command line twice against one server: through the entry point
(``rill.cli.main.app``, as the installed script calls it; the case asserts it took the fast
path: the typer app was never imported, nor typer and asyncio when it succeeded) and through the typer app alone (``rill.cli.root.app``), then
compares stdout, stderr and the exit code byte for byte. Command lines the fast path does not
handle fall back to the typer app (``parse`` returns None for them).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rill.cli import fast_send

from .helpers import Cli

# the entry point as the installed script runs it; writes which of the typer app, typer and
# asyncio it imported to $PROBE_OUT
FAST = """
import os, sys
sys.argv[0] = "rill"
from rill.cli.main import app
try:
    app()
finally:
    with open(os.environ["PROBE_OUT"], "w") as out:
        out.write(json.dumps(sorted(name for name in ("rill.cli.root", "typer", "asyncio") if name in sys.modules)))
""".replace("import os, sys", "import json, os, sys")
FULL = "import sys; sys.argv[0] = 'rill'; from rill.cli.root import app; app()"


def both(cli: Cli, tmp_path, *args: str, input: str = "", login: bool = True, **env: str):
    """Run ``args`` through the fast path and through the typer app; assert they agree."""
    marker = tmp_path / "probe.json"
    results = []
    for program in (FAST, FULL):
        results.append(subprocess.run(
            [sys.executable, "-c", program, *args], input=input, capture_output=True, text=True,
            env=cli.env(login, PROBE_OUT=str(marker), **env), timeout=60))
    fast, full = results
    imported = json.loads(marker.read_text())
    assert "rill.cli.root" not in imported, "the command did not take the fast path"
    assert fast.returncode != 0 or imported == []  # typer only for an error line (fail())
    assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr)
    return fast


@pytest.fixture
def topics(cli):
    with cli.sdk() as client:
        stream = client.create_stream("fast")
        client.create_topic("fast", "t", 2)
    return stream.id


def messages_count(cli: Cli) -> int:
    with cli.sdk() as client:
        return client.get_topic("fast", "t").topic.messages_count


def test_sends_as_the_typer_verb_does(cli, tmp_path, topics):
    done = both(cli, tmp_path, "message", "send", "fast", "t", "hello", "wörld")
    assert done.returncode == 0
    assert done.stdout == "sent 2 message(s) to topic t of stream fast (balanced)\n"
    done = both(cli, tmp_path, "--json", "message", "send", " fast ", "t", "x", "--partition", "2")
    assert json.loads(done.stdout) == {"ok": True, "command": "send_messages", "stream": "fast",
                                       "topic": "t", "messages_count": 1}
    done = both(cli, tmp_path, "message", "send", str(topics), "t", "x", "--json", "-k", "k1")
    assert json.loads(done.stdout)["stream"] == topics
    done = both(cli, tmp_path, "-q", "message", "send", "fast", "t", "--key=k2", "x")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = both(cli, tmp_path, f"--address={cli.address}", "--transport", "TCP", "message", "send",
                "fast", "t", "--partition=1", "y")
    assert done.stdout == "sent 1 message(s) to topic t of stream fast (partition 1)\n"
    assert messages_count(cli) == 2 * (2 + 1 + 1 + 1 + 1)


def test_server_errors_and_connection_errors_read_alike(cli, tmp_path, topics):
    cases = [
        (("message", "send", "nope", "t", "x"), 1, "stream with name nope was not found"),
        (("message", "send", "fast", "nope", "x"), 1, "topic with name nope"),
        (("message", "send", "fast", "t", "x", "--partition", "9"), 1, "partition"),
        (("-a", "127.0.0.1:1", "message", "send", "fast", "t", "x"), 3, "cannot connect to 127.0.0.1:1"),
        (("-a", "localhost:port", "message", "send", "fast", "t", "x"), 2, "invalid address"),
        (("-t", "bogus", "message", "send", "fast", "t", "x"), 1, "personal access token"),
        (("--context", "nosuch", "message", "send", "fast", "t", "x"), 2, "no context named"),
        (("-u", "iggy", "-t", "bogus", "message", "send", "fast", "t", "x"), 2, "not both"),
    ]
    for args, code, text in cases:
        done = both(cli, tmp_path, *args)
        assert done.returncode == code, (args, done.stderr)
        assert done.stderr.startswith("error: ") and text in done.stderr, (args, done.stderr)
    done = both(cli, tmp_path, "message", "send", "fast", "t", "x", login=False)
    assert (done.returncode, done.stderr.split(" (")[0]) == (1, "error: not logged in: give "
                                                                "--username/--password or --token, or run 'rill login'")
    assert messages_count(cli) == 0


def test_credentials_from_prompt_and_saved_context(cli, tmp_path, topics):
    done = both(cli, tmp_path, "-u", "iggy", "message", "send", "fast", "t", "x", input="iggy\n",
                login=False)
    assert (done.returncode, done.stderr) == (0, "Password for iggy: \n")
    cli.home.mkdir(parents=True, exist_ok=True)
    (cli.home / "contexts.json").write_text(json.dumps(
        {"current": "default", "contexts": {"default": {"address": cli.address, "token": "bogus"}}}))
    done = both(cli, tmp_path, "message", "send", "fast", "t", "x", login=False)
    assert done.returncode == 1 and "the saved token of context 'default' was rejected" in done.stderr
    (cli.home / "contexts.json").write_text(json.dumps(
        {"current": "default", "contexts": {"default": {"address": cli.address, "token": cli.root_token()}}}))
    assert both(cli, tmp_path, "message", "send", "fast", "t", "x", login=False).returncode == 0
    done = both(cli, tmp_path, "-u", "iggy", "-p", "wrong", "message", "send", "fast", "t", "x",
                login=False)
    assert done.returncode == 1 and "invalid credentials" in done.stderr
    assert messages_count(cli) == 2 * 2


@pytest.mark.parametrize("args", [
    ("message", "send", "s", "t"),  # no message: the verb's usage error
    ("message", "send", "s", "t", "x", "--header", "a:string:b"),
    ("message", "send", "s", "t", "--file", "-"),
    ("message", "send", "s", "t", "x", "--batch-size", "5"),
    ("message", "send", "--help"),
    ("--help",),
    ("message", "send", "s", "t", "--", "-x"),
    ("message", "send", "s", "t", "-5"),
    ("message", "send", "s", "t", ""),
    ("message", "send", "s", "t", "x", "--partition", "0"),
    ("message", "send", "s", "t", "x", "--partition", "1", "--key", "k"),
    ("message", "send", "s", "t", "x", "--key", "k" * 256),
    ("message", "send", "0", "t", "x"),
    ("-qa", "h:1", "message", "send", "s", "t", "x"),
    ("-q", "message", "-q", "send", "s", "t", "x"),
    ("message", "send", "s", "t", "x", "-q"),
    ("--transport", "quic", "message", "send", "s", "t", "x"),
    ("-a", "--json", "message", "send", "s", "t", "x"),
    ("message", "poll", "s", "t", "x"),
    ("--version",),
])
def test_other_command_lines_are_left_to_the_typer_app(args):
    assert fast_send.parse(list(args)) is None


def test_a_saved_quic_context_is_left_to_the_typer_app(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "contexts.json").write_text(json.dumps(
        {"current": "default", "contexts": {"default": {"transport": "quic"}}}))
    monkeypatch.setenv("RILL_HOME", str(home))
    monkeypatch.delenv("RILL_CONTEXT", raising=False)
    assert fast_send.parse(["message", "send", "s", "t", "x"]) is not None
    assert fast_send.run(["message", "send", "s", "t", "x"]) is None
