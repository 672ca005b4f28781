"""A real etcd cluster of 3 members on 127.0.0.1 for the cluster tests, every process by pid.

``EtcdCluster.start()`` picks free ports, starts Debian's ``etcd`` (found on PATH; missing:
one clear line, ``./run test`` installs ``etcd-server``) with ``--pre-vote=true`` in a
temporary directory, and returns once every member reports a leader (``GET /health``).
``kill(i)`` (SIGKILL), ``pause(i)`` (SIGSTOP), ``resume(i)`` (SIGCONT) and ``restart(i)``
inject faults; ``heal()`` undoes them all; ``stop()`` kills every member by pid.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from rill.bench.ports import free_ports

STARTUP_TIMEOUT = 60.0


def etcd_binary() -> str:
    found = shutil.which("etcd")
    assert found, ("etcd is not on PATH: install Debian's etcd-server (apt-get install "
                   "etcd-server; ./run test does it)")
    return found


class EtcdMember:
    def __init__(self, name: str, directory: Path, client_port: int, peer_port: int) -> None:
        self.name = name
        self.directory = directory
        self.client_url = f"http://127.0.0.1:{client_port}"
        self.peer_url = f"http://127.0.0.1:{peer_port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False

    def start(self, initial_cluster: str, state: str) -> None:
        with open(self.directory / f"{self.name}.log", "ab") as log:  # the child has its own
            self.process = subprocess.Popen(
                [etcd_binary(), "--name", self.name, "--data-dir", str(self.directory / self.name),
                 "--listen-client-urls", self.client_url, "--advertise-client-urls", self.client_url,
                 "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
                 "--initial-cluster", initial_cluster, "--initial-cluster-state", state,
                 "--initial-cluster-token", "rill-tests", "--pre-vote=true",
                 "--logger", "zap", "--log-level", "error"],
                stdout=log, stderr=subprocess.STDOUT)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signum)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.client_url + "/health", timeout=1) as answer:
                return json.load(answer).get("health") == "true"
        except (OSError, urllib.error.URLError, ValueError):
            return False


class EtcdCluster:
    def __init__(self, directory: Path, size: int = 3) -> None:
        ports = free_ports(2 * size)
        self.members = [EtcdMember(f"e{index}", directory, ports[2 * index], ports[2 * index + 1])
                        for index in range(size)]
        self.initial_cluster = ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    @property
    def endpoints(self) -> list[str]:
        return [member.client_url for member in self.members]

    def start(self) -> EtcdCluster:
        for member in self.members:
            member.start(self.initial_cluster, "new")
        self.wait_healthy()
        return self

    def wait_healthy(self, members: list[EtcdMember] | None = None) -> None:
        """Return once every (given) member answers /health with a leader."""
        waiting = list(members or self.members)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while waiting:
            for member in waiting:
                assert member.running, f"etcd member {member.name} exited: see {member.directory}"
            waiting = [member for member in waiting if not member.healthy()]
            assert time.monotonic() < deadline, f"etcd members {waiting} not healthy"
            if waiting:
                time.sleep(0.05)  # an external process: polled, there is no event to await

    def kill(self, index: int) -> None:
        member = self.members[index]
        member.signal(signal.SIGKILL)
        assert member.process is not None
        member.process.wait()

    def pause(self, index: int) -> None:
        self.members[index].signal(signal.SIGSTOP)
        self.members[index].paused = True

    def resume(self, index: int) -> None:
        self.members[index].signal(signal.SIGCONT)
        self.members[index].paused = False

    def restart(self, index: int) -> None:
        self.members[index].start(self.initial_cluster, "existing")

    def heal(self) -> None:
        """Every member running, none paused, a leader elected."""
        for index, member in enumerate(self.members):
            if member.paused:
                self.resume(index)
            if not member.running:
                self.restart(index)
        self.wait_healthy()

    def stop(self) -> None:
        for member in self.members:
            if member.process is not None and member.running:
                if member.paused:
                    member.signal(signal.SIGCONT)
                member.process.kill()
                member.process.wait()
