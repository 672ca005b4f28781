"""The README's examples work as printed: its Python example, then its command-line example,
against one fresh server (what a new user runs after the quick start; they must not collide)."""

from __future__ import annotations

import os
import re
import shlex
import signal
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
    for run in (1, 2):  # a user runs it again: it must not fail on what the first run made
        ran = subprocess.run([sys.executable, "-c", python], capture_output=True, text=True,
                             timeout=60)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.count("b'hello'") == run and ran.stdout.count("b'world'") == run

    (tmp_path / "events.txt").write_text("first\nsecond\n")
    (tmp_path / "keyed.txt").write_text("user-1:clicked\nuser-2:scrolled\n")
    env = dict(os.environ, RILL_ADDRESS=server.address, RILL_HOME=str(tmp_path / "home"), COLUMNS="100",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for line in _block("The command-line tool", "bash").splitlines():
        if not shlex.split(line, comments=True):
            continue
        assert line.startswith("rill ")
        if " --follow" in line:  # runs until stopped: it must print what is there, then wait
            following = subprocess.Popen(line, shell=True, cwd=tmp_path, env=env, text=True,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            try:
                out, err = following.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(following.pid, signal.SIGTERM)
                out, err = following.communicate()
            assert "user-1 " in out and "clicked" in out, f"{line}\n{out}\n{err}"
            continue
        ran = subprocess.run(line, shell=True, cwd=tmp_path, env=env, input="iggy\nS3cret-pass\n",
                             capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, f"{line}\n{ran.stdout}\n{ran.stderr}"
    assert len((tmp_path / "all.jsonl").read_text().splitlines()) == 6  # hello, world, 2 lines, 2 keyed


KAFKA_DOC = Path(__file__).resolve().parents[1] / "docs" / "kafka.md"
KAFKA_DOC_ADDRESS = "127.0.0.1:9092"


def _blocks(path: Path, section: str, language: str) -> list[str]:
    text = path.read_text()
    start = text.index(f"## {section}\n")
    end = text.index("\n## ", start + 1)
    return re.compile(rf"```{language}\n(.*?)```", re.S).findall(text, start, end)


def test_the_kafka_quick_start_runs_as_printed(tmp_path) -> None:
    """docs/kafka.md opens with a recipe (issue 27 item 7): its `rill serve` line starts the
    server (the port made free), then its kcat lines, its confluent-kafka and its kafka-python
    examples run unchanged but for the address."""
    bash = _blocks(KAFKA_DOC, "Quick start (local)", "bash")
    serve = shlex.split(bash[0])
    assert serve[:2] == ["rill", "serve"]
    args = [arg.replace(KAFKA_DOC_ADDRESS, "127.0.0.1:0") for arg in serve[2:]]
    server = RillProcess(tmp_path / "data", args=args).start()
    try:
        address = "%s:%d" % server.kafka_address
        outputs = []
        for line in bash[1].splitlines():
            assert line.startswith(("printf ", "kcat ")), line
            ran = subprocess.run(line.replace(KAFKA_DOC_ADDRESS, address), shell=True,
                                 capture_output=True, text=True, timeout=60)
            assert ran.returncode == 0, f"{line}\n{ran.stdout}\n{ran.stderr}"
            outputs.append(ran.stdout)
        assert outputs[-1].splitlines() == ["k1 hello", "k2 world"]
        printed = []
        for example in _blocks(KAFKA_DOC, "Quick start (local)", "python"):
            code = example.replace(KAFKA_DOC_ADDRESS, address)
            ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 timeout=120)
            assert ran.returncode == 0, ran.stderr
            printed.append(ran.stdout.strip())
    finally:
        server.kill()
    assert printed == ["[b'hello', b'world', b'from confluent-kafka']",
                       "[b'hello', b'world', b'from confluent-kafka', b'from kafka-python']"]


def test_the_tank_client_example_runs_against_the_tank_listener(tmp_path) -> None:
    """The TANK section's TankClient example, run twice (it must be rerunnable)."""
    server = RillProcess(tmp_path / "data", env={"RILL_TANK_ENABLED": "true",
                                                 "RILL_TANK_ADDRESS": "127.0.0.1:0"}).start()
    try:
        host, port = server.tank_address
        python = _block("TANK listener", "python").replace('"127.0.0.1", 11011',
                                                           f'"{host}", {port}')
        assert f"{port}" in python
        outputs = []
        for _ in range(2):
            ran = subprocess.run([sys.executable, "-c", python], capture_output=True, text=True,
                                 timeout=60)
            assert ran.returncode == 0, ran.stderr
            outputs.append(ran.stdout.splitlines())
    finally:
        server.kill()
    assert outputs[0] == ["first available 1 last 2", "1 b'user-1' b'hello'", "2 None b'world'"]
    assert outputs[1][0] == "first available 1 last 4"
    assert outputs[1][1:] == outputs[0][1:] + ["3 b'user-1' b'hello'", "4 None b'world'"]
