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

JOB = Path(__file__).with_name("stream_job.py")
PER_PARTITION = 1500


def run_job(rill, stream, checkpoint, mode) -> subprocess.Popen:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.Popen([sys.executable, str(JOB), rill.address, stream, str(checkpoint), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)


def out_count(admin, stream) -> int:
    return admin.get_topic(stream, "out").topic.messages_count


def test_kill_minus_9_of_the_driver_then_restart_is_exactly_once(rill, admin, stream, tmp_path):
    admin.create_topic(stream, "in", partitions_count=2)
    admin.create_topic(stream, "out", partitions_count=2)
    for partition in (1, 2):
        admin.send_messages(stream, "in", [f"{partition}-{i}".encode()
                                           for i in range(PER_PARTITION)], partitioning=partition)
    total = 2 * PER_PARTITION
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
    assert out_count(admin, stream) < total, "the job finished before it could be killed"
    again = run_job(rill, stream, checkpoint, "available-now")
    output, _ = again.communicate(timeout=180)
    assert again.returncode == 0, output
    values = [m.payload for p in (1, 2)
              for m in admin.poll_messages_columnar(stream, "out", p, 0, 10 * total).messages]
    assert len(values) == total and len(set(values)) == total
