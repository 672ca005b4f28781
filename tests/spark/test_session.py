"""``pyspark_rill.configure``: the README's Spark example works for a new user as printed.

The example runs as a script of its own (a fresh Spark, as a user starts it), by the
virtualenv's interpreter while ``python3`` on ``PATH`` is another interpreter without rill
(Spark's default for its Python workers); nothing of its Spark listens beyond loopback,
its web UI included.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pyspark_rill
from pyspark_rill import session
from pyspark_rill.options import KNOWN

README = Path(__file__).resolve().parents[2] / "README.md"
SRC = Path(pyspark_rill.__file__).resolve().parents[1]

CHECKS = '''
import ipaddress, json, psutil
print("ROWS", spark.read.format("rill").options(**common, topic="copy").load().count())
listening = sorted({c.laddr.ip for child in psutil.Process().children(recursive=True)
                    for c in child.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN})
print("LISTEN", json.dumps(listening))
print("UI", spark.sparkContext.uiWebUrl)
spark.stop()
'''


def spark_example() -> str:
    text = README.read_text()
    start = text.index("## Spark connector\n")
    match = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    assert match is not None
    return match.group(1)


@pytest.fixture
def other_python3(tmp_path) -> Path:
    """A directory whose ``python3`` is the system interpreter, which has no rill."""
    shims = tmp_path / "shims"
    shims.mkdir()
    shim = shims / "python3"
    shim.write_text('#!/bin/sh\nexec /usr/bin/python3 "$@"\n')
    shim.chmod(0o755)
    missing = subprocess.run([str(shim), "-c", "import pyspark_rill"], capture_output=True,
                             env={"PATH": os.environ["PATH"]})
    assert missing.returncode != 0, "the system python3 has rill: the test would prove nothing"
    return shims


def test_readme_example_runs_with_another_python3_on_path(rill, admin, other_python3) -> None:
    admin.create_stream("analytics")
    for topic in ("clicks", "views", "copy"):
        admin.create_topic("analytics", topic, partitions_count=2)
    admin.send_messages("analytics", "clicks", [b"a", b"b", b"c"])
    script = spark_example().replace("127.0.0.1:8090", rill.address) + CHECKS
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP")}
    env["PATH"] = f"{other_python3}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = str(SRC)
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=240)
    assert ran.returncode == 0, "\n".join(
        line for line in ran.stderr.splitlines() if "Error" in line or "error" in line)[-3000:]
    lines = dict(line.split(" ", 1) for line in ran.stdout.splitlines() if " " in line)
    assert lines["ROWS"] == "3"  # the example's exactly-once copy of clicks
    listening = json.loads(lines["LISTEN"])
    assert listening and all(ip in ("127.0.0.1", "::ffff:127.0.0.1") for ip in listening), listening
    assert "127.0.0.1" in lines["UI"]  # the UI is on, on loopback


class Builder:
    """What configure() uses of a SparkSession.Builder."""

    def __init__(self) -> None:
        self._options: dict[str, str] = {}

    def config(self, key: str, value: str) -> Builder:
        self._options[key] = value
        return self


def test_a_worker_python_without_rill_is_refused_in_one_line(other_python3, monkeypatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", str(other_python3 / "python3"))
    with pytest.raises(pyspark_rill.RillSetupError, match=r"^Spark's Python workers run "
                       r"PYSPARK_PYTHON=.*cannot import pyspark_rill.*unset PYSPARK_PYTHON"):
        pyspark_rill.configure(Builder())


def test_the_workers_run_this_interpreter_unless_told_otherwise(monkeypatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    pyspark_rill.configure(Builder())
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    pyspark_rill.configure(Builder())
    assert os.environ["PYSPARK_PYTHON"] == sys.executable


JAVA = Path(pyspark_rill.__file__).parent / "java"


def test_without_javac_the_build_says_so_in_one_line_and_succeeds(tmp_path) -> None:
    package = tmp_path / "pyspark_rill"
    shutil.copytree(JAVA, package / "java")
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "env", "find", "sort", "xargs", "cat", "sha256sum", "cut", "dirname"):
        (tools / tool).symlink_to(shutil.which(tool))
    built = subprocess.run([str(package / "java" / "build.sh"), sys.executable],
                           capture_output=True, text=True, env={"PATH": str(tools)})
    assert built.returncode == 0
    assert built.stderr.splitlines() == [
        "note: no JDK compiler (javac) found: the Spark connector uses its Python data source "
        "(install a JDK 17+ with javac, then run ./run again, for the JVM one)"]
    assert not (package / "jars" / "rill-spark.jar").exists()


def test_the_jar_goes_on_the_session_or_one_notice_says_why_not(monkeypatch, caplog,
                                                                tmp_path) -> None:
    built = tmp_path / "built" / "rill-spark.jar"
    built.parent.mkdir()
    built.write_bytes(b"PK")
    monkeypatch.setattr(session, "JAR", built)
    builder = pyspark_rill.configure(Builder().config("spark.jars", "/x/other.jar"))
    assert builder._options["spark.jars"] == f"/x/other.jar,{built}"
    monkeypatch.setattr(session, "JAR", tmp_path / "rill-spark.jar")
    monkeypatch.setattr(session, "_noticed", False)
    for _ in range(2):
        assert "spark.jars" not in pyspark_rill.configure(Builder())._options
    notices = [r.getMessage() for r in caplog.records if r.name == "pyspark_rill.session"]
    assert len(notices) == 1 and "the Python data source serves format('rill')" in notices[0]


def test_python_m_pyspark_rill_jar_prints_the_jar_or_one_line_why_not(monkeypatch, tmp_path,
                                                                     capsys) -> None:
    from pyspark_rill import __main__ as command

    printed = subprocess.run([sys.executable, "-m", "pyspark_rill", "jar"], capture_output=True,
                             text=True, check=True)
    assert printed.stdout == f"{session.JAR}\n" and session.JAR.is_file()
    monkeypatch.setattr(session, "JAR", tmp_path / "rill-spark.jar")
    assert command.main(["jar"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"the JVM connector is not built ({tmp_path / 'rill-spark.jar'}): install a JDK 17+ "
        f"(javac) and run src/pyspark_rill/java/build.sh {sys.executable}"]
    assert command.main([]) == 2


def test_both_implementations_know_the_same_options() -> None:
    java = (JAVA / "rill" / "spark" / "ReadOptions.java").read_text()
    listed = re.search(r"KNOWN = Arrays.asList\((.*?)\);", java, re.S).group(1)
    assert sorted(re.findall(r'"(\w+)"', listed)) == sorted(KNOWN.values())
