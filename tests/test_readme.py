"""The README's examples work as printed: its Python example, then its command-line example,
against one fresh server (what a new user runs after the quick start; they must not collide)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from server_process import RillProcess

README = Path(__file__).resolve().parents[1] / "README.md"
QUICK_START_ADDRESS = "127.0.0.1:8090"


def _block(section: str, language: str) -> str:
    text = README.read_text()
    start = text.index(f"## {section}\n")
    match = re.compile(rf"```{language}\n(.*?)```", re.S).search(text, start)
    assert match is not None, f"no {language} block in {section!r}"
    return match.group(1)


@pytest.fixture
def server(tmp_path):
    server = RillProcess(tmp_path / "data").start()
    yield server
    server.kill()


def test_python_then_cli_examples_run_against_one_server(server, tmp_path) -> None:
    python = _block("Using it", "python").replace(QUICK_START_ADDRESS, server.address)
    ran = subprocess.run([sys.executable, "-c", python], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert "b'hello'" in ran.stdout and "b'world'" in ran.stdout

    (tmp_path / "events.txt").write_text("first\nsecond\n")
    env = dict(os.environ, RILL_ADDRESS=server.address, RILL_HOME=str(tmp_path / "home"),
               COLUMNS="100")
    rill = str(Path(sys.executable).with_name("rill"))
    for line in _block("The command-line tool", "bash").splitlines():
        command = shlex.split(line, comments=True)
        if not command:
            continue
        assert command[0] == "rill"
        ran = subprocess.run([rill, *command[1:]], cwd=tmp_path, env=env, input="iggy\nS3cret-pass\n",
                             capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, f"{line}\n{ran.stdout}\n{ran.stderr}"
