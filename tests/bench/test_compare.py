"""``rill bench compare`` end to end at tiny sizes with the real peers: the JSON report's
fields, the HTML report, the "not available" rows, and the command line. No timing asserts."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from rill.bench.compare import CompareError, median_row, run_compare
from rill.bench.compare_report import COLUMNS
from rill.cli.bench_compare import compare_command, register

MESSAGES = 2000
SIZE = 1000
RILL = Path(sys.executable).with_name("rill")



def _check_figures(figures: dict, messages: int = MESSAGES) -> None:
    assert figures["messages"] == messages
    assert figures["msg_per_s"] > 0 and figures["mb_per_s"] > 0
    assert 0 < figures["p50_ms"] <= figures["p99_ms"]
    assert figures["mb_per_s"] == pytest.approx(figures["msg_per_s"] * SIZE / 1e6, rel=1e-3)
    # the server's cost over the phase: every target's processes are metered
    assert figures["cpu_s"] > 0
    assert figures["cpu_s_per_million"] == pytest.approx(figures["cpu_s"] / messages * 1e6, rel=1e-4)


def test_compare_all_targets_both_fsync_modes(tmp_path):
    report = run_compare(MESSAGES, SIZE, 1000, progress=False, output_dir=tmp_path)

    saved = json.loads((tmp_path / "compare.json").read_text())
    html = (tmp_path / "compare.html").read_text()
    assert saved["comparison"] == report["comparison"]
    assert "rill vs NATS JetStream" in html and "not available" not in html
    assert "Conclusion: rill ÷ each target" in html and 'class="bar"' in html
    assert html.index("Conclusion") < html.index("rill vs NATS JetStream")
    assert html.count("limit") == html.count("not a limit")  # nothing is called a limit

    assert report["workload"] == {"messages": MESSAGES, "message_size": SIZE, "batch": 1000,
                                  "fsync_modes": ["interval", "always"],
                                  "targets": ["rill", "nats", "redis", "bare"], "rounds": 1,
                                  "round_trips": 0}
    rows = report["comparison"]
    assert [(row["target"], row["fsync"]) for row in rows] == [
        (target, fsync) for fsync in ("interval", "always") for target in ("rill", "nats", "redis", "bare")
    ]
    for row in rows:
        assert row["status"] == "ok", row
        _check_figures(row["publish"])
        _check_figures(row["consume"])
        ratios = row["rill_ratio"]
        if row["target"] == "rill":
            assert ratios == {"publish": None, "consume": None}
        else:
            for phase in ("publish", "consume"):
                assert set(ratios[phase]) == {"msg_per_s", "p50_ms", "p99_ms"}
                assert all(value > 0 for value in ratios[phase].values())

    # the machine alone: loopback TCP (or why not), the disk synced like each fsync mode
    capabilities = report["machine_capability"]
    assert [(row["name"], row["fsync"]) for row in capabilities] == [
        ("loopback_tcp", None), ("disk_write", "interval"), ("disk_write", "always")]
    for row in capabilities:
        assert (row["mb_per_s"] is None) == (row["reason"] is not None)
        assert row["label"].startswith("machine: ")
    assert all(row["mb_per_s"] > 0 for row in capabilities[1:])

    # every run is a scenario entry naming its target, fsync mode and phase
    scenarios = {(entry["target"], entry["fsync"], entry["phase"]): entry for entry in report["scenarios"]}
    assert len(scenarios) == 16
    for (_, _, phase), entry in scenarios.items():
        kind = "producers" if phase == "publish" else "consumers"
        assert entry["scenario"] == ("send" if phase == "publish" else "poll")
        overall = entry["overall"][kind]
        assert overall["messages"] == MESSAGES
        assert set(overall["latency_ms"]) >= {"p50", "p90", "p99", "p999", "avg", "max"}

    table, machine = report["tables"]
    assert table["columns"] == COLUMNS and len(table["rows"]) == 8 and table["notes"]
    peer_rows = [row for row in table["rows"] if row[0] != "rill"]
    assert all(row[-1].endswith("×") and row[-2].endswith("×") for row in peer_rows)
    assert machine["title"].startswith("Machine capability") and len(machine["rows"]) == 4
    conclusion, fractions = report["summary"]
    assert len(conclusion["rows"]) == 6 and len(fractions["rows"]) == 4


def test_unavailable_peer_is_a_row_not_a_gap(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RILL_NATS_SERVER", str(tmp_path / "missing" / "nats-server"))
    report = run_compare(
        MESSAGES, SIZE, 1000, fsync_modes=("interval",), peers=("nats", "bare"),
        progress=False, output_dir=tmp_path / "out", machine=False,
    )
    nats, bare = report["comparison"]
    assert nats["status"] == "not available"
    assert "nats-server binary not found" in nats["reason"]
    assert nats["publish"] is None and nats["consume"] is None
    assert bare["status"] == "ok"
    assert bare["rill_ratio"] == {"publish": None, "consume": None}  # rill was not run
    assert report["machine_capability"] == []
    row = report["tables"][0]["rows"][0]
    assert row[:2] == ["nats", "interval"] and row[3].startswith("not available: ")
    assert len(row) == len(COLUMNS)
    assert [entry["target"] for entry in report["scenarios"]] == ["bare", "bare"]
    assert "not available" in capsys.readouterr().out  # printed in the table
    assert "not available" in (tmp_path / "out" / "compare.html").read_text()


def test_a_peer_that_breaks_mid_run_is_a_failed_row(tmp_path, monkeypatch):
    async def broken(self):
        raise RuntimeError("lost the connection")

    monkeypatch.setattr("rill.bench.peers.bare.BarePeer.consume", broken)
    report = run_compare(100, 10, 10, fsync_modes=("always",), peers=("bare",), progress=False,
                         machine=False)
    (row,) = report["comparison"]
    assert row["status"] == "failed" and "lost the connection" in row["reason"]


def test_rounds_run_interleaved_and_each_row_holds_the_medians(tmp_path):
    report = run_compare(MESSAGES, SIZE, 1000, fsync_modes=("interval",), peers=("rill", "bare"),
                         progress=False, output_dir=tmp_path, machine=False, rounds=3)
    assert report["workload"]["rounds"] == 3
    # round 1 of every target, then round 2, then round 3
    assert [(entry["target"], entry["label"].rsplit(" · ", 1)[1]) for entry in report["scenarios"]
            if entry["phase"] == "publish"] == [
        (target, f"round {number} of 3") for number in (1, 2, 3) for target in ("rill", "bare")]
    rill, bare = report["comparison"]
    for row in (rill, bare):
        assert row["status"] == "ok" and len(row["rounds"]) == 3
        for phase in ("publish", "consume"):
            for one in row["rounds"]:
                _check_figures(one[phase])
            for figure in ("msg_per_s", "mb_per_s", "p50_ms", "p99_ms"):
                values = sorted(one[phase][figure] for one in row["rounds"])
                assert row[phase][figure] == values[1]  # the median of three
    assert bare["rill_ratio"]["publish"]["msg_per_s"] == pytest.approx(
        rill["publish"]["msg_per_s"] / bare["publish"]["msg_per_s"], rel=1e-3)
    for table in [*report["summary"], *report["tables"]]:
        assert any("median of 3 rounds" in note for note in table["notes"])
    assert json.loads((tmp_path / "compare.json").read_text())["comparison"][1]["rounds"] == bare["rounds"]


def test_a_target_that_fails_in_a_round_is_a_failed_row_naming_it_and_is_not_run_again(monkeypatch):
    calls = []
    real = __import__("rill.bench.peers.bare", fromlist=["BarePeer"]).BarePeer.consume

    async def second_fails(self):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("lost the connection")
        return await real(self)

    monkeypatch.setattr("rill.bench.peers.bare.BarePeer.consume", second_fails)
    report = run_compare(100, 10, 10, fsync_modes=("interval",), peers=("bare",), progress=False,
                         machine=False, rounds=3)
    (row,) = report["comparison"]
    assert row["status"] == "failed" and row["reason"] == "round 2: RuntimeError: lost the connection"
    assert len(calls) == 2  # round 3 did not run


def test_median_row_of_one_round_is_that_round():
    row = {"target": "bare", "fsync": "interval", "status": "ok", "reason": None,
           "publish": {"msg_per_s": 1.0}, "consume": {"msg_per_s": 2.0}}
    assert median_row([row]) is row


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"rounds": 0}, "rounds must be a positive"),
        ({"messages": 0}, "messages must be a positive"),
        ({"messages": 1500}, "multiple of batch"),
        ({"fsync_modes": ("sometimes",)}, "unknown fsync mode"),
        ({"peers": ("rill", "kafka")}, "unknown target"),
    ],
)
def test_bad_options_are_refused(arguments, message):
    with pytest.raises(CompareError, match=message):
        run_compare(**{"messages": 2000, "progress": False, **arguments})


# --- the command line -------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _rill_bench_compare_registered() -> bool:
    if not RILL.exists():
        return False
    answer = subprocess.run([str(RILL), "bench", "compare", "--help"], capture_output=True, text=True)
    return answer.returncode == 0


def _local_app() -> typer.Typer:
    app = typer.Typer()
    bench = typer.Typer()
    register(bench)
    app.add_typer(bench, name="bench")
    return app


def _run_cli(arguments: list[str], cwd: Path) -> tuple[int, str, str]:
    """``rill bench compare ...`` as a subprocess when the CLI has it, else on a local app."""
    if _rill_bench_compare_registered():
        answer = subprocess.run([str(RILL), "bench", "compare", *arguments], capture_output=True,
                                text=True, cwd=cwd, timeout=120)
        return answer.returncode, answer.stdout, answer.stderr
    result = CliRunner().invoke(_local_app(), ["bench", "compare", *arguments])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, getattr(result, "stderr", "")


def test_cli_compare_smoke(tmp_path):
    code, out, _ = _run_cli(
        ["--messages", "2000", "--fsync", "interval", "--peers", "rill,bare",
         "--output-dir", str(tmp_path / "reports"), "--no-progress"],
        tmp_path,
    )
    assert code == 0, out
    assert "rill ÷ target" in out and "Machine capability" in out
    assert out.count("limit") == out.count("not a limit")
    report = json.loads((tmp_path / "reports" / "compare.json").read_text())
    assert [row["target"] for row in report["comparison"]] == ["rill", "bare"]
    assert all(row["status"] == "ok" for row in report["comparison"])
    assert (tmp_path / "reports" / "compare.html").exists()


@pytest.mark.parametrize(
    ("arguments", "flag"),
    [
        (["--messages", "1500"], "--messages"),
        (["--fsync", "sometimes"], "--fsync"),
        (["--peers", "rill,kafka"], "--peers"),
        (["--batch", "0"], "--batch"),
        (["--rounds", "0"], "--rounds"),
    ],
)
def test_cli_bad_options_exit_2_with_one_line(tmp_path, arguments, flag):
    code, out, err = _run_cli(arguments + ["--output-dir", str(tmp_path)], tmp_path)
    assert code == 2
    lines = [line for line in (err or out).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and flag in lines[0]
    assert not (tmp_path / "compare.json").exists()


def test_command_signature_matches_the_brief():
    import inspect

    parameters = inspect.signature(compare_command).parameters
    assert list(parameters) == ["messages", "message_size", "batch", "fsync", "peers",
                                "output_dir", "rounds", "round_trips", "no_progress"]
