"""Exactly-once end to end through crashes: the Spark driver of a streaming job (topic to
topic, exactly-once sink; the JVM implementation where it is built) is killed with SIGKILL
mid-stream -- alone, and after the rill server itself was killed with SIGKILL under it and
restarted on its data -- then restarted from its checkpoint, and the output holds every input
message once, checked record by record. The driver runs as a subprocess (its own JVM), so
killing it leaves this test session's Spark alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rill.bench.ports import free_port
from rill.client import Client
from server_process import RillProcess
from stream_job import assert_exactly_once, feed, out_count

JOB = Path(__file__).with_name("stream_job.py")
PER_PARTITION = 1500


def run_job(rill, stream, checkpoint, mode) -> subprocess.Popen:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.Popen([sys.executable, str(JOB), rill.address, stream, str(checkpoint), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)


def test_kill_minus_9_of_the_driver_then_restart_is_exactly_once(rill, admin, stream, tmp_path):
    sent = feed(admin, stream, PER_PARTITION)
    checkpoint = tmp_path / "checkpoint"
    job = run_job(rill, stream, checkpoint, "continuous")
    try:
        deadline = time.monotonic() + 120
        while out_count(admin, stream) < 600:  # two micro-batches or more went through
            assert job.poll() is None, job.stdout.read()
            assert time.monotonic() < deadline, "the streaming job made no progress"
            time.sleep(0.1)
    finally:
        os.killpg(job.pid, signal.SIGKILL)  # the driver and its JVM, mid-stream
        job.wait(30)
    assert out_count(admin, stream) < len(sent), "the job finished before it could be killed"
    again = run_job(rill, stream, checkpoint, "available-now")
    output, _ = again.communicate(timeout=180)
    assert again.returncode == 0, output
    assert_exactly_once(admin, stream, sent)


def wait_for_output(admin, stream, job, at_least: int) -> int:
    deadline = time.monotonic() + 120
    while (count := out_count(admin, stream)) < at_least:
        assert job.poll() is None, job.stdout.read()
        assert time.monotonic() < deadline, "the streaming job made no progress"
        time.sleep(0.1)
    return count


def test_kill_minus_9_of_the_server_then_of_the_driver_is_exactly_once(tmp_path):
    """The server is killed under the running job (commits and stagings in flight) and
    restarted on its data and port; whether the job rides it out or fails, its driver is then
    killed too, and the restart from the checkpoint leaves every message in the output once."""
    port, data = free_port(), tmp_path / "data"
    server = RillProcess(data).start(tcp_port=port)
    job = None
    try:
        with Client(server.address) as admin:
            admin.login_user("iggy", "iggy")
            admin.create_stream("eo")
            sent = feed(admin, "eo", PER_PARTITION)
            checkpoint = tmp_path / "checkpoint"
            job = run_job(server, "eo", checkpoint, "continuous")
            before = wait_for_output(admin, "eo", job, 600)
        server.kill()  # SIGKILL, mid-stream
        server = RillProcess(data).start(tcp_port=port)
        with Client(server.address) as admin:
            admin.login_user("iggy", "iggy")
            deadline = time.monotonic() + 60
            while job.poll() is None and out_count(admin, "eo") <= before:
                assert time.monotonic() < deadline, "the job neither went on nor stopped"
                time.sleep(0.2)
            os.killpg(job.pid, signal.SIGKILL)  # the driver too, whatever it was doing
            job.wait(30)
            assert out_count(admin, "eo") < len(sent), "the job finished before its driver died"
            again = run_job(server, "eo", checkpoint, "available-now")
            output, _ = again.communicate(timeout=180)
            assert again.returncode == 0, output
            assert_exactly_once(admin, "eo", sent)
    finally:
        if job is not None and job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        server.kill()
