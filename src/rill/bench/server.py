"""A rill server the benchmark starts itself: a child ``python -m rill serve`` on port 0.

Owns: ``RillServer``, a context manager. It starts the server in a temporary data directory
(or the one given), on 127.0.0.1 with the operating system choosing the ports, for the asked
transports only (the others are disabled, so e.g. a TCP run does not pay for HTTP metrics),
with the asked fsync policy (``RILL_SYSTEM_FSYNC``) and, if asked, a descriptor limit
(``open_files``: RLIMIT_NOFILE soft = hard, so the server cannot raise it), waits for its "rill listening on
<transport> HOST:PORT" lines, exposes ``addresses`` ({"tcp": "127.0.0.1:PORT", ...}) and on
exit stops it (SIGTERM, then SIGKILL after a grace period) and removes the temporary directory.
With ``kafka=True`` the Kafka listener is enabled too (``RILL_KAFKA_ENABLED``, ``--kafka-address
127.0.0.1:0``, anonymous Kafka connections acting as ``iggy``) and ``addresses["kafka"]`` is set;
with ``tank=True`` the TANK listener (``--tank-address 127.0.0.1:0``), ``addresses["tank"]``.
``kill()`` is a crash (SIGKILL, the data directory kept): ``start()`` runs it again on its data.

Like the CLI's ``serve`` verb, this is a door into the server that never imports it: the bench
package stays on the client side of the seam (DESIGN.md, seam 4).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from pathlib import Path
from types import TracebackType

from rill.bench.options import FSYNC_POLICIES, TRANSPORTS

STARTUP_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0
_LISTENING = "rill listening on "


class ServerStartError(RuntimeError):
    """The server exited or did not announce its listeners in time."""


class RillServer:
    """``with RillServer(fsync="never", transports=("tcp", "quic")) as server: server.addresses``"""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        fsync: str = "interval",
        transports: tuple[str, ...] | list[str] = ("tcp",),
        *,
        env: dict[str, str] | None = None,
        python: str = sys.executable,
        startup_timeout: float = STARTUP_TIMEOUT,
        open_files: int | None = None,
        kafka: bool = False,
        tank: bool = False,
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"unknown fsync policy {fsync!r} (known: {', '.join(FSYNC_POLICIES)})")
        unknown = [name for name in transports if name not in TRANSPORTS]
        if unknown or not transports:
            raise ValueError(f"transports must be some of {', '.join(TRANSPORTS)} (got {list(transports)})")
        self.fsync = fsync
        self.transports = tuple(dict.fromkeys(transports))
        self.extra_env = dict(env or {})
        self.python = python
        self.startup_timeout = startup_timeout
        self.open_files = open_files
        self.kafka = kafka
        self.tank = tank
        self._given_dir = Path(data_dir) if data_dir is not None else None
        self._temp_dir: Path | None = None
        self.data_dir: Path | None = None
        self.addresses: dict[str, str] = {}
        self.process: subprocess.Popen[str] | None = None
        self.output: deque[str] = deque(maxlen=200)  # the server's last lines, for error messages

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def certificate(self) -> str:
        """The server's self-signed QUIC certificate (what its clients trust)."""
        assert self.data_dir is not None, "not started"
        return str(self.data_dir / "secrets" / "self_signed_cert.pem")

    def start(self) -> RillServer:
        self.addresses = {}  # a restart announces its listeners again (port 0: new ports)
        if self._given_dir is not None:
            self.data_dir = self._given_dir
            self.data_dir.mkdir(parents=True, exist_ok=True)
        else:
            self._temp_dir = Path(tempfile.mkdtemp(prefix="rill-bench-"))
            self.data_dir = self._temp_dir / "data"
        env = dict(os.environ)
        env.update({
            "RILL_SYSTEM_FSYNC": self.fsync,
            "RILL_LOGGING_LEVEL": "warning",
            "RILL_TCP_ENABLED": str("tcp" in self.transports).lower(),
            "RILL_QUIC_ENABLED": str("quic" in self.transports).lower(),
            "RILL_HTTP_ENABLED": str("http" in self.transports).lower(),
        })
        if self.kafka:
            env.update({"RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ANONYMOUS_USER": "iggy"})
        env.update(self.extra_env)
        command = [self.python, "-m", "rill", "serve", "--data-dir", str(self.data_dir),
                   "--tcp-address", "127.0.0.1:0", "--quic-address", "127.0.0.1:0",
                   "--http-address", "127.0.0.1:0"]
        if self.kafka:
            command += ["--kafka-address", "127.0.0.1:0"]
        if self.tank:
            command += ["--tank-address", "127.0.0.1:0"]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            stdin=subprocess.DEVNULL,
            preexec_fn=self._limit_open_files if self.open_files is not None else None,
        )
        ready = threading.Event()
        expected = (set(self.transports) | ({"kafka"} if self.kafka else set())
                    | ({"tank"} if self.tank else set()))

        def pump() -> None:  # reads every line for the server's whole life, so its pipe never fills
            assert self.process is not None and self.process.stdout is not None
            for line in self.process.stdout:
                self.output.append(line)
                if line.startswith(_LISTENING):
                    name, address = line[len(_LISTENING):].split()[:2]
                    self.addresses[name] = address
                    if expected <= self.addresses.keys():
                        ready.set()
            ready.set()  # the server exited

        threading.Thread(target=pump, name="rill-bench-server-output", daemon=True).start()
        ready.wait(self.startup_timeout)
        if not expected <= self.addresses.keys():
            self.stop()
            lines = "".join(self.output).strip()
            raise ServerStartError("the rill server did not start" + (f":\n{lines}" if lines else ""))
        return self

    def _limit_open_files(self) -> None:
        """In the child, before exec: RLIMIT_NOFILE soft = hard = ``open_files``."""
        assert self.open_files is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))

    def stop(self) -> None:
        """SIGTERM (a clean shutdown), SIGKILL after a grace period; remove the temp dir."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        self.addresses = {}
        temp_dir, self._temp_dir = self._temp_dir, None
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL (a crash: no clean shutdown) and reap it; the data directory stays, so
        ``start()`` runs it again on the same data."""
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                process.kill()
            process.wait(10)
        self.addresses = {}

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> RillServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    def describe(self) -> str:
        listeners = [*self.transports, *(["kafka"] if self.kafka else []),
                     *(["tank"] if self.tank else [])]
        return f"rill started by the benchmark (fsync {self.fsync}, {', '.join(listeners)})"
