"""A Spark standalone cluster on 127.0.0.1 for the cluster tests: one master and N workers,
each a JVM started with pyspark's own ``spark-class`` (``org.apache.spark.deploy.master.Master``
and ``org.apache.spark.deploy.worker.Worker``), as README "Running on a Spark cluster" does.

Every process (drivers of ``submit`` too) is started in its own process group and stopped by
its pid: ``kill_worker(i)`` sends SIGKILL to worker i's group, its executors with it (a
machine lost), ``stop()`` to every group. Memory stays small: 256 MiB for a master or worker daemon, 512 MiB
for an executor (``submit`` asks for it), one core per worker. Ports are free ones found at
start; the web UIs and every service bind 127.0.0.1 (``SPARK_LOCAL_IP``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark

from rill.bench.ports import free_port

BIN = Path(pyspark.__file__).parent / "bin"
LOOPBACK = "127.0.0.1"
EXECUTOR_MEMORY = "512m"
# short-lived JVMs on a small machine: the quick JIT tier only (C2's compile threads would take
# most of the CPU a short job gets), a serial GC
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class StandaloneCluster:
    def __init__(self, directory: Path, workers: int = 2) -> None:
        self.directory = Path(directory)
        self.workers_count = workers
        self.port = free_port()
        self.ui_port = free_port()
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = []
        self.started: list[subprocess.Popen] = []  # every process, drivers too: stop() ends them
        self.env = {**os.environ, "SPARK_LOCAL_IP": LOOPBACK, "SPARK_DAEMON_MEMORY": "256m",
                    "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM,
                    "SPARK_LOG_DIR": str(self.directory / "logs"),
                    "SPARK_WORKER_DIR": str(self.directory / "work"),
                    "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}

    @property
    def url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def _spawn(self, name: str, command: list[str]) -> subprocess.Popen:
        log = open(self.directory / f"{name}.log", "w")  # noqa: SIM115 (the child keeps it)
        try:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                       env=self.env, start_new_session=True)
            self.started.append(process)
            return process
        finally:
            log.close()

    def start(self, timeout: float = 90.0) -> StandaloneCluster:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.master = self._spawn("master", [
            str(BIN / "spark-class"), "org.apache.spark.deploy.master.Master",
            "--host", LOOPBACK, "--port", str(self.port), "--webui-port", str(self.ui_port)])
        for number in range(self.workers_count):
            self.workers.append(self._spawn(f"worker{number}", [
                str(BIN / "spark-class"), "org.apache.spark.deploy.worker.Worker",
                "--host", LOOPBACK, "--port", "0", "--webui-port", str(free_port()),
                "--cores", "1", "--memory", "1g",
                "--work-dir", str(self.directory / f"work{number}"), self.url]))
        deadline = time.monotonic() + timeout
        while self.alive_workers() < self.workers_count:
            for process in [self.master, *self.workers]:
                assert process is not None and process.poll() is None, self.logs()
            assert time.monotonic() < deadline, "the cluster did not start:\n" + self.logs()
            time.sleep(0.5)
        return self

    def alive_workers(self) -> int:
        """Workers the master counts as alive (its web UI's JSON)."""
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{self.ui_port}/json", timeout=5) as reply:
                return int(json.load(reply)["aliveworkers"])
        except (OSError, ValueError, KeyError):
            return 0  # not up yet

    def submit(self, name: str, script: Path, *args: str) -> subprocess.Popen:
        """``spark-submit`` of a PySpark script to this cluster (client mode: the driver is
        this child, in its own process group), with the connector's jar for the driver and
        the executors; its output goes to ``<name>.log`` (``logs()``)."""
        jar = subprocess.run([sys.executable, "-m", "pyspark_rill", "jar"], capture_output=True,
                             text=True, check=True).stdout.strip()  # as README says
        command = [
            str(BIN / "spark-submit"), "--master", self.url, "--jars", jar,
            "--driver-memory", "512m", "--executor-memory", EXECUTOR_MEMORY,
            "--conf", "spark.executor.cores=1", "--conf", f"spark.cores.max={self.workers_count}",
            "--conf", f"spark.driver.host={LOOPBACK}", "--conf", f"spark.driver.bindAddress={LOOPBACK}",
            "--conf", "spark.ui.enabled=false", "--conf", f"spark.pyspark.python={sys.executable}",
            "--conf", f"spark.driver.extraJavaOptions={QUICK_JVM}",
            "--conf", f"spark.executor.extraJavaOptions={QUICK_JVM}",
            str(script), *args]
        return self._spawn(name, command)

    def kill_worker(self, number: int) -> None:
        """SIGKILL to worker ``number`` and its executors (its process group)."""
        worker = self.workers[number]
        assert worker is not None
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(30)
        self.workers[number] = None
        deadline = time.monotonic() + 30
        while True:  # until its executors are gone too (they are in its group)
            try:
                os.killpg(worker.pid, 0)
            except ProcessLookupError:
                return
            assert time.monotonic() < deadline, f"worker {number}'s executors outlived SIGKILL"
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGKILL to every process group started here (drivers, workers, the master)."""
        for process in reversed(self.started):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # the group is gone
            process.wait(30)
        self.started, self.workers, self.master = [], [], None

    def logs(self) -> str:
        return "\n".join(f"--- {path.name}\n" + path.read_text()[-3000:]
                         for path in sorted(self.directory.glob("*.log")))
