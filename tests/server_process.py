"""A real rill server in a child process, for integration tests: port 0, a temp data dir.

``RillProcess.start()`` waits for the "rill listening on tcp HOST:PORT" line (and the
"rill listening on quic HOST:PORT" / "rill listening on http HOST:PORT" ones unless
RILL_QUIC_ENABLED / RILL_HTTP_ENABLED is false, and "rill listening on kafka HOST:PORT" with
RILL_KAFKA_ENABLED or --kafka-address, "rill listening on tank HOST:PORT" with RILL_TANK_ENABLED
or --tank-address); ``stop()`` sends
SIGTERM (a clean shutdown), ``kill()`` sends SIGKILL (a crash). Restarting reuses the data dir
and the ports. ``open_files=N`` starts the server with RLIMIT_NOFILE soft = hard = N, so it
cannot raise its own limit; ``open_files=(soft, hard)`` sets the two apart.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STARTUP_TIMEOUT = 30.0


class RillProcess:
    def __init__(self, data_dir: Path, env: dict[str, str] | None = None, config: Path | None = None,
                 args: list[str] | None = None,
                 open_files: int | tuple[int, int] | None = None):
        self.data_dir = Path(data_dir)
        self.extra_env = dict(env or {})
        self.config = config
        self.args = list(args or [])  # more `rill serve` options
        self.open_files = open_files  # RLIMIT_NOFILE of the server process: N or (soft, hard)
        self.process: subprocess.Popen[str] | None = None
        self.tcp_address: tuple[str, int] | None = None
        self.http_address: tuple[str, int] | None = None
        self.quic_address: tuple[str, int] | None = None  # UDP
        self.kafka_address: tuple[str, int] | None = None  # with RILL_KAFKA_ENABLED
        self.tank_address: tuple[str, int] | None = None  # with RILL_TANK_ENABLED
        self.last_port = 0  # restart() binds the same port again
        self.last_http_port = 0
        self.last_quic_port = 0
        self.output: list[str] = []

    @property
    def address(self) -> str:
        assert self.tcp_address is not None, "server not started"
        return f"{self.tcp_address[0]}:{self.tcp_address[1]}"

    @property
    def certificate(self) -> str:
        """The server's self-signed QUIC certificate: what a client trusts (``ca_file``)."""
        return str(self.data_dir / "secrets" / "self_signed_cert.pem")

    @property
    def http_url(self) -> str:
        assert self.http_address is not None, "HTTP not started"
        return f"http://{self.http_address[0]}:{self.http_address[1]}"

    def start(self, tcp_port: int = 0, http_port: int = 0, quic_port: int = 0) -> RillProcess:
        env = dict(os.environ)
        env.update(self.extra_env)
        env.setdefault("RILL_LOGGING_LEVEL", "warning")
        expect_http = env.get("RILL_HTTP_ENABLED", "true").strip().lower() not in ("false", "0", "no", "off")
        expect_quic = env.get("RILL_QUIC_ENABLED", "true").strip().lower() not in ("false", "0", "no", "off")
        expect_kafka = (env.get("RILL_KAFKA_ENABLED", "false").strip().lower() in ("true", "1", "yes", "on")
                        or "--kafka-address" in self.args)
        expect_tank = (env.get("RILL_TANK_ENABLED", "false").strip().lower() in ("true", "1", "yes", "on")
                       or "--tank-address" in self.args)
        command = [sys.executable, "-m", "rill", "serve", "--data-dir", str(self.data_dir),
                   "--tcp-address", f"127.0.0.1:{tcp_port}", "--http-address", f"127.0.0.1:{http_port}",
                   "--quic-address", f"127.0.0.1:{quic_port}"]
        if self.config is not None:
            command += ["--config", str(self.config)]
        command += self.args
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            preexec_fn=self._limit_open_files if self.open_files is not None else None,
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.process is not None and self.process.stdout is not None
            for line in self.process.stdout:
                self.output.append(line)
                if line.startswith("rill listening on tcp "):
                    host, _, port = line.split()[-1].rpartition(":")
                    self.tcp_address = (host, int(port))
                    self.last_port = int(port)
                    if not expect_http and not expect_quic and not expect_kafka and not expect_tank:
                        ready.set()
                elif line.startswith("rill listening on quic "):
                    host, _, port = line.split()[-1].rpartition(":")
                    self.quic_address = (host, int(port))
                    self.last_quic_port = int(port)
                    if not expect_http:
                        ready.set()
                elif line.startswith("rill listening on kafka "):
                    host, _, port = line.split()[-1].rpartition(":")
                    self.kafka_address = (host, int(port))
                    if not expect_http and not expect_quic and not expect_tank:  # (after tcp's)
                        ready.set()
                elif line.startswith("rill listening on tank "):
                    host, _, port = line.split()[-1].rpartition(":")
                    self.tank_address = (host, int(port))
                    if not expect_http and not expect_quic:  # (after tcp's and kafka's)
                        ready.set()
                elif line.startswith("rill listening on http "):
                    host, _, port = line.split()[-1].rpartition(":")
                    self.http_address = (host, int(port))
                    self.last_http_port = int(port)
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        ready.wait(STARTUP_TIMEOUT)
        if (self.tcp_address is None or (expect_http and self.http_address is None)
                or (expect_quic and self.quic_address is None)):
            self.kill()
            raise RuntimeError("rill did not start:\n" + "".join(self.output))
        return self

    def _limit_open_files(self) -> None:
        """In the child, before exec: the descriptor limit (soft = hard: cannot be raised)."""
        limits = self.open_files
        assert limits is not None
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           limits if isinstance(limits, tuple) else (limits, limits))

    def open_descriptors(self) -> int:
        """How many descriptors the server process has open now (Linux: /proc)."""
        assert self.process is not None
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def stop(self, timeout: float = 20.0) -> int:
        """Clean shutdown (SIGTERM); returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout)
        if code < 0:  # killed by a signal (a crash): what it printed, for the failure report
            print(f"rill died of signal {-code}; its output:\n" + "".join(self.output[-300:]))
        self.tcp_address = self.http_address = self.quic_address = None
        return code

    def kill(self) -> None:
        """Crash (SIGKILL)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.tcp_address = self.http_address = self.quic_address = None

    def restart(self) -> RillProcess:
        port, http_port, quic_port = self.last_port, self.last_http_port, self.last_quic_port
        if self.process is not None and self.process.poll() is None:
            self.stop()
        return self.start(port, http_port, quic_port)

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@contextmanager
def session(server, username: str | None = "iggy", password: str = "iggy") -> Iterator:
    """A blocking client connected to ``server`` (anything with ``.address``), logged in as
    ``username`` unless it is None, closed on exit."""
    from rill.client import Client

    with Client(server.address, reconnect=False) as client:
        if username is not None:
            client.login_user(username, password)
        yield client
