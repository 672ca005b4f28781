"""``rill bench cluster`` as a user runs it (the command in a subprocess, on a real etcd and 3
real rill nodes it starts itself): a bounded run prints sane figures and leaves no process
behind, Ctrl-C or SIGTERM mid-run stops every process it started, and a bad option is one
``error:`` line. Bounded sizes; no timing asserts (the figures are only checked to be sane)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from rill.bench.cluster import CASES, ClusterBenchOptions, validate
from rill.bench.options import OptionsError

BOUNDED = ["--batches", "3", "--messages-per-batch", "50", "--message-size", "200", "--runs", "1",
           "--failovers", "1", "--no-progress", "--producers-per-partition", "2", "--in-flight", "2"]


def bench(*args: str, cwd, env=None, **popen) -> subprocess.Popen[str]:
    env = {**os.environ, "RILL_HOME": str(cwd), "COLUMNS": "220", **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "rill", "bench", "cluster", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _gone(pids: list[int]) -> list[int]:
    """The pids still running (a zombie is gone: it runs nothing)."""
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def _kill_leftovers(pids) -> None:
    """A failing test must not leave the processes the bench should have stopped."""
    for pid in _gone(sorted(pids)):
        try:
            psutil.Process(pid).kill()
        except psutil.NoSuchProcess:
            pass


def _started_in(directory: str) -> list[int]:
    """Processes whose command line names ``directory`` (the nodes' and etcd's data dirs)."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        if any(directory in part for part in process.info["cmdline"] or ()):
            found.append(process.info["pid"])
    return found


def test_a_bounded_run_prints_sane_figures_and_stops_every_process(tmp_path):
    out = tmp_path / "reports"
    process = bench(*BOUNDED, "--output-dir", str(out), cwd=tmp_path)
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr + stdout

    assert "Cluster throughput" in stdout and "Failover under load" in stdout
    for case in CASES:
        assert case.label in stdout
    reports = list(out.glob("cluster-*.json"))
    assert len(reports) == 1 and reports[0].with_suffix(".html").exists()
    report = json.loads(reports[0].read_text())
    throughput, failover = report["summary"]  # the report's conclusion, at the top of the HTML
    assert report["tables"] == []
    html = reports[0].with_suffix(".html").read_text()
    assert 'class="summary"' in html and "Cluster throughput" in html and 'class="ratio"' in html

    runs = throughput["figures"]["runs"]
    assert sorted(runs) == sorted(case.key for case in CASES)
    for case in CASES:
        (figures,) = runs[case.key]
        for key in ("send_msg", "send_mb", "read_msg", "read_mb", "send_ratio", "read_ratio"):
            assert figures[key] > 0 and math.isfinite(figures[key]), (case.key, key, figures)
        if case.replication_factor == 1:
            assert figures["send_ratio"] == figures["read_ratio"] == 1.0
        (cpu,) = throughput["figures"]["server_cpu_s_per_gb_sent"][case.key]  # the nodes' CPU
        assert cpu > 0 and math.isfinite(cpu), (case.key, cpu)
    for scenario in report["scenarios"]:  # every message sent was read back
        overall = scenario["overall"]
        producers = 2 * 3 if scenario["options"]["case"].startswith("iggy") else 3  # 2 a partition
        assert overall["producers"]["messages"] == overall["consumers"]["messages"] == producers * 3 * 50

    (cycle,) = failover["figures"]["cycles"]
    assert cycle["seconds"] > 0 and cycle["killed"] != cycle["controller"]
    assert failover["figures"]["median"] == failover["figures"]["max"] == cycle["seconds"]

    cluster = report["cluster"]
    try:
        assert len(cluster["pids"]) == 3 + 3 + 1  # etcd members, nodes, the killed node's restart
        assert _gone(cluster["pids"]) == []
        assert _started_in(cluster["directory"]) == []
        assert not os.path.exists(cluster["directory"])
    finally:
        _kill_leftovers([*cluster["pids"], *_started_in(cluster["directory"])])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_mid_run_it_stops_every_process_it_started(tmp_path, signum):
    """The signal goes to the bench's own process only (not its group, as a terminal's Ctrl-C
    would): the bench itself must stop the etcd and nodes it started."""
    process = bench("--etcd-members", "1", "--batches", "200", "--runs", "3", "--no-progress",
                    "--output-dir", str(tmp_path), cwd=tmp_path, start_new_session=True)
    bench_process = psutil.Process(process.pid)
    started: set[int] = set()
    try:
        _interrupt(process, bench_process, started, signum)
    finally:
        _kill_leftovers(started)


def _interrupt(process, bench_process, started: set[int], signum: int) -> None:
    deadline = time.monotonic() + 180
    while True:  # until the nodes run and the first actors too (another process's state: polled)
        commands = {}
        for child in bench_process.children(recursive=True):
            try:
                commands[child.pid] = " ".join(child.cmdline())
            except psutil.Error:  # it ended meanwhile (an actor process)
                pass
        started |= {pid for pid, command in commands.items() if "rill-bench-cluster-" in command}
        serving = [pid for pid, command in commands.items() if " serve " in command]
        assert process.poll() is None, process.communicate()
        actors = [pid for pid, command in commands.items() if "spawn_main" in command]
        if len(serving) == 3 and actors:
            break
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.05)
    process.send_signal(signum)
    process.communicate(timeout=300)  # (its actors end first; slow on a loaded machine)
    assert process.returncode != 0
    assert len(started) >= 4
    assert _gone(sorted(started)) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--etcd-members", "2"], "error: --etcd-members must be 1 or 3 (got 2)"),
        (["--runs", "0"], "error: --runs must be a positive whole number (got 0)"),
        (["--in-flight", "0"], "error: --in-flight must be a positive whole number (got 0)"),
        (["--http", "127.0.0.1:3000", "--failovers", "2"],
         "error: --failovers needs a cluster the bench starts (it kills a node): give --failovers 0 with --http"),
        (["--http", "nowhere"], "error: --http must be HOST:PORT (got 'nowhere')"),
        (["--protocols", "amqp"], "error: --protocols must be some of iggy,kafka (got amqp)"),
    ],
)
def test_a_bad_option_is_one_error_line(tmp_path, args, message):
    process = bench(*args, cwd=tmp_path)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 2
    lines = [line for line in (stdout + stderr).splitlines() if line.strip()]
    assert lines == [message]


def test_without_etcd_it_says_so_in_one_line(tmp_path):
    process = bench("--no-progress", "--output-dir", str(tmp_path), cwd=tmp_path, env={"PATH": str(tmp_path)})
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 1
    lines = [line for line in (stdout + stderr).splitlines() if line.strip()]
    assert lines == ["error: etcd is not on PATH (Debian: apt-get install etcd-server)"]
    assert not list(tmp_path.glob("cluster-*"))


def test_failovers_default_to_one_on_a_cluster_it_starts_and_zero_on_an_existing_one():
    assert ClusterBenchOptions().failover_cycles == 1
    assert ClusterBenchOptions(http="127.0.0.1:3000").failover_cycles == 0
    with pytest.raises(OptionsError, match="--bootstrap needs --http"):
        validate(ClusterBenchOptions(bootstrap="127.0.0.1:9092"))


def test_an_existing_cluster_is_measured_without_failover_and_left_clean():
    """``--http`` (no ``--bootstrap``: the Kafka listener comes from GET /cluster): the throughput
    table only, no failover, and the bench's streams and Kafka topics are deleted afterwards."""
    from confluent_kafka.admin import AdminClient

    from rill.bench.cluster import run_cluster
    from rill.bench.cluster_launch import LocalCluster
    from rill.client import Client

    with LocalCluster(etcd_members=1, name="rill-bench-existing") as cluster:
        node = cluster.nodes[2].addresses
        result = run_cluster(ClusterBenchOptions(http=node["http"], batches=2, messages_per_batch=20,
                                                 message_size=100, runs=1, progress=False))
        (throughput,) = result["summary"]
        for case in CASES:
            (figures,) = throughput["figures"]["runs"][case.key]
            assert figures["send_ratio"] > 0 and figures["read_ratio"] > 0
        assert result["cluster"]["label"] == f"existing cluster {node['http']}"
        assert result["cluster"]["pids"] == []  # it started nothing
        with Client(node["tcp"]) as client:
            client.login_user("iggy", "iggy")
            assert [stream.name for stream in client.get_streams()
                    if stream.name.startswith("bench-cluster-")] == []
        topics = AdminClient({"bootstrap.servers": node["kafka"]}).list_topics(timeout=30).topics
        assert [name for name in topics if name.startswith("rill-bench-cluster-")] == []
