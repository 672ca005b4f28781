"""``rill bench`` as a user runs it: the installed command in a subprocess, tiny sizes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .helpers import RILL

TINY = ["--batches", "3", "--messages-per-batch", "10", "--message-size", "100", "--no-progress"]


def bench(*args: str, cwd=None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RILL_HOME": str(cwd or "."), "COLUMNS": "200"}
    return subprocess.run([RILL, "bench", *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


def test_send_writes_json_and_html_reports(tmp_path):
    out = tmp_path / "reports"
    result = bench("send", "--producers", "2", "--partitions", "2", *TINY, "--output-dir", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    json_files = list(out.glob("send-*.json"))
    html_files = list(out.glob("send-*.html"))
    assert len(json_files) == 1 and len(html_files) == 1
    assert json_files[0].stem == html_files[0].stem  # send-<UTC timestamp>
    report = json.loads(json_files[0].read_text())
    assert report["tool"] == "rill bench" and report["title"] == "rill bench send"
    scenario = report["scenarios"][0]
    assert scenario["scenario"] == "send"
    assert scenario["overall"]["producers"]["messages"] == 2 * 3 * 10
    assert "<svg" in html_files[0].read_text()
    assert "all producers (2)" in result.stdout  # the results table
    assert str(json_files[0]) in result.stdout and str(html_files[0]) in result.stdout


def test_global_json_prints_the_report_and_json_only_skips_html(tmp_path):
    result = subprocess.run(
        [RILL, "--json", "bench", "poll", *TINY, "--output-dir", str(tmp_path), "--json-only"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["scenarios"][0]["overall"]["consumers"]["messages"] == 30
    assert len(list(tmp_path.glob("poll-*.json"))) == 1 and not list(tmp_path.glob("*.html"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["send", "--producers", "-2"], "error: --producers must be a positive whole number (got -2)"),
        (["send", "--transport", "carrier-pigeon"], "error: unknown transport 'carrier-pigeon'"),
        (["poll", "--consumers", "2"], "error: --consumers 2 over --streams 1 puts 2 consumers on one stream"),
        (["scaling", "--producers", "0,2"], "error: --producers must list positive whole numbers"),
    ],
)
def test_bad_options_fail_with_one_line_and_exit_2(tmp_path, args, message):
    result = bench(*args, "--no-progress", "--output-dir", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(message), result.stderr
    assert not list(tmp_path.glob("*.json"))


def test_no_server_at_the_address_is_a_connection_error(tmp_path):
    result = bench("send", *TINY, "--server-address", "127.0.0.1:1", "--output-dir", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 3
    assert result.stderr.startswith("error: cannot connect to 127.0.0.1:1")


def test_every_verb_has_examples_in_its_help():
    from typer.testing import CliRunner

    from rill.cli.main import app

    runner = CliRunner()
    for verb in ("send", "poll", "send-and-poll", "consumer-group-poll", "scaling"):
        result = runner.invoke(app, ["bench", verb, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0 and "Examples:" in result.output and f"rill bench {verb}" in result.output
    assert "--producers" not in runner.invoke(app, ["bench", "poll", "--help"]).output  # only flags that apply


def test_scaling_adds_the_curve_and_table(tmp_path):
    result = bench("scaling", "--producers", "1,2", *TINY, "--output-dir", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(next(tmp_path.glob("scaling-*.json")).read_text())
    labels = [scenario["label"] for scenario in report["scenarios"]]
    assert labels == ["send × 1", "poll × 1", "send × 2", "poll × 2"]
    assert report["scenarios"][2]["overall"]["producers"]["messages"] == 2 * 3 * 10
    assert report["scenarios"][3]["options"]["partitions"] == 2
    msg_curve, mb_curve = report["curves"]
    assert msg_curve["y_label"] == "msg/s" and mb_curve["y_label"] == "MB/s"
    assert [x for x, _ in msg_curve["series"]["send"]] == [1, 2]
    assert [x for x, _ in msg_curve["series"]["poll"]] == [1, 2]
    table = report["tables"][0]
    assert table["columns"][:2] == ["scenario", "actors"] and len(table["rows"]) == 4 and table["notes"]
    html = next(tmp_path.glob("scaling-*.html")).read_text()
    assert "Scaling: messages per second against actors" in html


def test_the_readmes_bench_options_exist_as_written():
    """Every ``--long`` or ``--long/-x`` the README lists for ``rill bench`` is an option of
    a ``rill bench`` verb (the README once promised ``-o`` and ``-p``, which are not)."""
    import re

    import typer

    from rill.cli.main import app

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    listed = readme[readme.index("Options: `--producers"):]
    listed = listed[:listed.index("\n\n")].split("(`rill bench send --help`")[0]
    bench = typer.main.get_command(app).get_command(None, "bench")
    options = [set(param.opts) for name in bench.list_commands(None)
               for param in bench.get_command(None, name).params]
    written = re.findall(r"`(--[a-z-]+)(?:/(-[a-zA-Z]))?`", listed)
    assert len(written) > 15
    missing = [f"{long}/{short}" if short else long for long, short in written
               if not any({long, short or long} <= opts for opts in options)]
    assert missing == []
