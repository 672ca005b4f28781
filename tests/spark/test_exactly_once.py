"""Exactly-once end to end through a crash: the Spark driver of a streaming job (topic to
topic, exactly-once sink) is killed with SIGKILL mid-stream, restarted from its checkpoint,
and the output holds every input message once. The driver runs as a subprocess (its own JVM),
so killing it leaves this test session's Spark alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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
