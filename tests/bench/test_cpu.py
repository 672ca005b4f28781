"""``rill.bench.cpu``: a process tree's CPU seconds from /proc (a real tree of real processes:
a middle process and the child it starts, both working a known loop then waiting), the
meter a phase samples, and the cost figures. No timing asserts."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rill.bench.cpu import CpuMeter, PhaseCost, cost_figures, descendants, process_cpu_seconds, tree_cpu_seconds
from rill.bench.results import Recorder, scenario_report

WORK = "sum(i * i for i in range(3_000_000))"  # some tens of ms of CPU

# the middle process: works, starts a child that works and says "ready", then waits for a line
# on stdin ("reap": wait for its child and say "reaped"; end of input: exit)
MIDDLE = textwrap.dedent(f"""
    import subprocess, sys
    {WORK}
    child = subprocess.Popen([sys.executable, "-c", "import sys; {WORK}; print('ready', flush=True); sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    child.stdout.readline()
    print(child.pid, flush=True)
    for line in sys.stdin:
        child.stdin.close()
        child.wait()
        print("reaped", flush=True)
""")


@pytest.fixture
def tree():
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        child = int(middle.stdout.readline())
        yield middle, child
    finally:
        middle.stdin.close()
        middle.wait(30)


def test_a_tree_counts_every_process_below_it_and_its_ended_children(tree):
    middle, child = tree
    assert descendants(middle.pid) == [middle.pid, child]
    own, child_cpu = process_cpu_seconds(middle.pid), process_cpu_seconds(child)
    assert own > 0 and child_cpu > 0
    # both wait on a pipe: nothing moves while they are read
    assert tree_cpu_seconds(middle.pid) == pytest.approx(own + child_cpu, abs=0.005)
    before = tree_cpu_seconds(middle.pid)
    middle.stdin.write("reap\n")
    middle.stdin.flush()
    assert middle.stdout.readline().strip() == "reaped"
    assert descendants(middle.pid) == [middle.pid]
    # the waited-for child's time is now the middle's cutime + cstime (kept in clock ticks)
    assert tree_cpu_seconds(middle.pid) >= before - 0.02


def test_a_process_that_is_gone_costs_nothing():
    assert process_cpu_seconds(2**22 + 12345) == 0.0
    assert not CpuMeter([None]) and not PhaseCost(CpuMeter([])).pids


def test_a_meter_samples_a_phase(tree):
    middle, child = tree
    meter = CpuMeter([middle.pid])
    assert meter and meter() == pytest.approx(tree_cpu_seconds(middle.pid), abs=0.005)
    cost = PhaseCost(meter)
    cost.begin()
    cost.end()
    assert cost.seconds == pytest.approx(0.0, abs=0.005) and cost.pids == [middle.pid]


def test_a_recorder_samples_its_meter_at_start_and_finish():
    samples = iter([10.0, 12.5])
    recorder = Recorder("p", "producer", cpu=lambda: next(samples))
    recorder.start()
    recorder.record(0.001, 1000, 100_000)
    result = recorder.finish()
    assert result.server_cpu_seconds == 2.5
    again = type(result).from_dict(result.to_dict())
    assert again.server_cpu_seconds == 2.5
    report = scenario_report("send", {"message_size": 100}, [result], server_pids=[7])
    assert report["server_cpu"] == {"cpu_s": 2.5, "cpu_s_per_million": 2500.0, "cpu_s_per_gb": 25000.0,
                                    "messages": 1000, "measured": True, "pids": [7]}
    unmetered = Recorder("p", "producer")
    unmetered.start()
    assert unmetered.finish().server_cpu_seconds is None


def test_cost_figures():
    assert cost_figures(0.58, 1_000_000, 100_000_000) == {"cpu_s": 0.58, "cpu_s_per_million": 0.58,
                                                          "cpu_s_per_gb": 5.8}
    assert cost_figures(None, 10, 10)["cpu_s_per_million"] is None
    assert cost_figures(1.0, 0, 0) == {"cpu_s": 1.0, "cpu_s_per_million": None, "cpu_s_per_gb": None}
