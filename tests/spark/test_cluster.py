"""The pipeline on a Spark standalone cluster (README "Running on a Spark cluster"): a master
and two workers on 127.0.0.1, the streaming job of stream_job.py (topic ``in`` -> transform
-> topic ``out``, exactly once, JVM reads and writes) run with ``spark-submit --master
spark://...``. Mid-stream one worker is killed with SIGKILL together with its executor (a
machine lost): the job goes on, on the other worker. Then the driver is killed with SIGKILL
and submitted again from its checkpoint (``Trigger.AvailableNow``): it finishes, and ``out``
holds the transform of every input message, each once (count and content)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from standalone import StandaloneCluster
from stream_job import assert_exactly_once, feed, out_count

JOB = Path(__file__).with_name("stream_job.py")
PER_PARTITION = 3000  # 20 micro-batches of 300 rows


@pytest.fixture
def cluster(tmp_path, spark):
    """A master and two workers (``spark``: the connector's jar is built by then)."""
    cluster = StandaloneCluster(tmp_path / "cluster", workers=2)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def wait_for_output(admin, stream, cluster, job, at_least: int, what: str) -> int:
    deadline = time.monotonic() + 120
    while (count := out_count(admin, stream)) < at_least:
        assert job.poll() is None, cluster.logs()
        assert time.monotonic() < deadline, f"the job made no progress {what}\n{cluster.logs()}"
        time.sleep(0.1)
    return count


def test_a_worker_and_the_driver_killed_mid_stream_then_exactly_once(rill, admin, stream,
                                                                    cluster, tmp_path):
    sent = feed(admin, stream, PER_PARTITION)
    checkpoint = str(tmp_path / "checkpoint")
    job = cluster.submit("driver", JOB, rill.address, stream, checkpoint, "continuous")
    try:
        before = wait_for_output(admin, stream, cluster, job, 600, "on two workers")
        cluster.kill_worker(0)  # with its executor, mid-stream
        wait_for_output(admin, stream, cluster, job, before + 600, "after a worker was lost")
    finally:
        os.killpg(job.pid, signal.SIGKILL)  # the driver (spark-submit's JVM and its Python)
        job.wait(30)
    assert out_count(admin, stream) < len(sent), "the job finished before the driver was killed"
    again = cluster.submit("restarted-driver", JOB, rill.address, stream, checkpoint,
                           "available-now")
    assert again.wait(180) == 0, cluster.logs()
    assert_exactly_once(admin, stream, sent)
