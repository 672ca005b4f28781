"""The shape of the command line itself: every command's help, short flags, narrow tables."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import typer

from rill.cli.main import app

from .helpers import RILL, Cli


def commands() -> list[tuple[tuple[str, ...], object]]:
    """(path, click command) for ``rill`` and every group and verb under it."""
    found = []

    def walk(command: object, path: tuple[str, ...]) -> None:
        found.append((path, command))
        if hasattr(command, "list_commands"):  # a group (the root imports its commands lazily)
            for name in sorted(command.list_commands(None)):
                walk(command.get_command(None, name), (*path, name))

    walk(typer.main.get_command(app), ())
    return found


def test_no_help_shows_a_value_for_a_yes_no_option(tmp_path):
    cli_env = Cli("127.0.0.1:1", tmp_path).env(login=False)  # --help needs no server

    def help_of(path: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
        done = subprocess.run([RILL, *path, "--help"], capture_output=True, text=True, env=cli_env, timeout=60)
        assert done.returncode == 0, (path, done.stderr)
        return path, done.stdout

    with ThreadPoolExecutor(max_workers=8) as pool:
        helps = list(pool.map(help_of, [path for path, _ in commands()]))
    assert len(helps) > 50
    shown = [(" ".join(path), line.strip()) for path, text in helps for line in text.splitlines()
             if "<bool>" in line or "BOOLEAN" in line]
    assert shown == []
    flags = dict(helps)[("message", "poll")]
    assert "--first" in flags and "--exit-at-end" in flags


def test_a_short_flag_means_one_long_option_everywhere():
    meanings: dict[str, dict[str, list[str]]] = {}
    for path, command in commands():
        for param in getattr(command, "params", []):
            if getattr(param, "param_type_name", "") != "option":
                continue
            names = [*param.opts, *param.secondary_opts]
            long_name = next(name for name in names if name.startswith("--"))
            for short in (name for name in names if not name.startswith("--")):
                meanings.setdefault(short, {}).setdefault(long_name, []).append(" ".join(("rill", *path)))
    clashes = {short: uses for short, uses in meanings.items() if len(uses) > 1}
    assert clashes == {}
    assert set(meanings["-c"]) == {"--consumer"} and set(meanings["-n"]) == {"--count"}


def test_tables_stay_readable_at_80_columns(cli):
    with cli.sdk() as client:
        client.create_stream("orders-of-the-european-union")
        client.create_topic("orders-of-the-european-union", "payments-eu-west", 3)
        client.send_messages("orders-of-the-european-union", "payments-eu-west",
                             [b"a short payload"], partitioning=1)
    stream, topic = "orders-of-the-european-union", "payments-eu-west"
    expected = {
        ("stream", "list"): [stream, "Messages"],
        ("stream", "get", stream): [stream, topic, "Partitions"],
        ("topic", "list", stream): [topic, "Partitions", "Messages", "Size"],
        ("topic", "get", stream, topic): ["Current offset", "Messages"],
        ("message", "poll", stream, topic, "--partition", "1", "--first"): ["a short payload", "Offset"],
        ("user", "list"): ["iggy", "Username", "Status"],
        ("client", "list"): ["Client ID", "Address"],
        ("consumer-group", "list", stream, topic): ["Members"],
        ("context", "list"): ["default", "Credential"],
        ("stats",): ["Consumer groups"],
    }
    results = cli.run_many(*({"args": args, "COLUMNS": "80"} for args in expected), ok=True)
    for args, result in zip(expected, results):
        lines = result.stdout.splitlines()
        assert all(len(line.rstrip()) <= 80 for line in lines), (args, result.stdout)
        assert "…" not in result.stdout, (args, result.stdout)
        cells = [cell.strip() for line in lines for cell in line.replace("┃", "│").split("│")]
        for value in expected[args]:  # each on one line, not folded
            assert value in cells, (args, value, result.stdout)


def test_tables_fit_a_real_80_column_terminal(cli):
    """rich asks the terminal for its size: a topic list in an 80-column pty drops columns."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    with cli.sdk() as client:
        client.create_stream("orders-of-the-european-union")
        client.create_topic("orders-of-the-european-union", "payments-eu-west", 3)
    env = {key: value for key, value in cli.env().items() if key not in ("COLUMNS", "LINES")}
    pid, terminal = pty.fork()
    if pid == 0:  # the child: an 80x24 terminal, then rill
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        os.execve(RILL, [RILL, "topic", "list", "orders-of-the-european-union"], env)
    chunks = []
    while True:
        try:
            chunk = os.read(terminal, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    os.close(terminal)
    text = b"".join(chunks).decode("utf-8")
    assert os.waitstatus_to_exitcode(status) == 0, text
    lines = text.replace("\r\n", "\n").splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines), text
    cells = [cell.strip() for line in lines for cell in line.replace("┃", "│").split("│")]
    assert "payments-eu-west" in cells and "Partitions" in cells and "…" not in text
