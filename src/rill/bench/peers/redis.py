"""Redis Streams as a peer: Debian's ``redis-server`` driven by ``redis-py`` with ``hiredis``.

Owns: finding the binary, starting it on 127.0.0.1 with an append-only file in the work
directory (``--appendonly yes``, ``--appendfsync everysec`` for fsync ``interval`` or
``always``, no RDB snapshots), stopping it, and the client side of the workload as a fair
redis-py user would write it:

* publish: ``XADD key * d <payload>`` (no MAXLEN) in non-transactional pipelines of ``batch``
  commands; a batch round trip is one ``pipeline.execute()``;
* consume: ``XRANGE key <start> + COUNT batch``, walking the ids with an exclusive start
  (``(<last id>``); a batch round trip is one XRANGE.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from rill.bench.peers import Peer, PeerUnavailable, Workload, wait_for_port
from rill.bench.results import ActorResult

STREAM_KEY = b"rillbench"
FIELD = b"d"
APPENDFSYNC = {"interval": "everysec", "always": "always"}
DEBIAN_BINARY = "/usr/bin/redis-server"


def find_redis_server() -> str | None:
    """``redis-server``: $RILL_REDIS_SERVER, Debian's /usr/bin/redis-server, then PATH."""
    explicit = os.environ.get("RILL_REDIS_SERVER")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    if os.access(DEBIAN_BINARY, os.X_OK):
        return DEBIAN_BINARY
    return shutil.which("redis-server")


class RedisPeer(Peer):
    name = "redis"
    client = "redis-py + hiredis, blocking client (XADD pipelines, XRANGE COUNT)"

    def __init__(self, workload: Workload, binary: str | None = None):
        super().__init__(workload)
        self.binary = binary
        self.arguments: list[str] = []

    def start(self, workdir: Path) -> None:
        binary = self.binary = self._prepare(
            workdir, "redis", "redis-py", self.binary or find_redis_server(),
            "redis-server binary not found ({binary}); apt-get install redis-server",
        )
        log = workdir / "redis-server.log"
        self.arguments = [
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--protected-mode", "yes",
            "--daemonize", "no",
            "--dir", str(workdir),
            "--appendonly", "yes",
            "--appendfsync", APPENDFSYNC[self.workload.fsync],
            "--save", "",
            "--logfile", str(log),
        ]
        try:
            self.process = subprocess.Popen(
                [binary, *self.arguments], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        except OSError as error:
            raise PeerUnavailable(f"cannot run {binary}: {error}") from error
        wait_for_port(self.port, self.process, log=log)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "binary": self.binary,
            "appendfsync": APPENDFSYNC[self.workload.fsync],
            "arguments": self.arguments,
        }

    def _connect(self) -> Any:
        """A blocking redis-py client (hiredis parser): on this machine it pipelines about 1.5x
        faster than ``redis.asyncio`` (52k vs 34k XADD/s), so Redis gets its better client."""
        from redis import Redis

        client = Redis(host="127.0.0.1", port=self.port, decode_responses=False)
        for _ in range(100):  # the port is open a moment before the AOF is loaded
            try:
                client.ping()
                return client
            except Exception as error:  # BusyLoadingError, ConnectionError
                last = error
                time.sleep(0.05)
        client.close()
        raise PeerUnavailable(f"redis-server does not answer PING: {last}")

    async def config(self, name: str) -> str:
        """One of the running server's settings (CONFIG GET), for tests."""
        return await asyncio.to_thread(self._config, name)

    def _config(self, name: str) -> str:
        client = self._connect()
        try:
            settings = client.config_get(name)
            value = settings.get(name, settings.get(name.encode()))
            return value.decode() if isinstance(value, bytes) else value
        finally:
            client.close()

    async def publish(self) -> ActorResult:
        return await asyncio.to_thread(self._publish)

    async def consume(self) -> ActorResult:
        return await asyncio.to_thread(self._consume)

    def _publish(self) -> ActorResult:
        workload = self.workload
        payloads = workload.payloads()
        size = workload.message_size
        client = self._connect()
        try:
            perf_counter = time.perf_counter
            recorder = self.recorder("producer")
            recorder.start()
            for count in workload.batch_sizes():
                started = perf_counter()
                pipeline = client.pipeline(transaction=False)
                xadd = pipeline.xadd
                for index in range(count):
                    xadd(STREAM_KEY, {FIELD: payloads[index]})
                pipeline.execute()
                recorder.record(perf_counter() - started, count, count * size)
            return recorder.finish()
        finally:
            client.close()

    def _consume(self) -> ActorResult:
        workload = self.workload
        client = self._connect()
        try:
            perf_counter = time.perf_counter
            recorder = self.recorder("consumer")
            start: bytes = b"-"
            remaining = workload.messages
            recorder.start()
            while remaining > 0:
                started = perf_counter()
                entries = client.xrange(
                    STREAM_KEY, min=start, max=b"+", count=min(workload.batch, remaining)
                )
                if not entries:
                    raise RuntimeError(f"redis: stream ended with {remaining} messages unread")
                nbytes = sum(len(fields[FIELD]) for _, fields in entries)
                recorder.record(perf_counter() - started, len(entries), nbytes)
                remaining -= len(entries)
                start = b"(" + entries[-1][0]
            return recorder.finish()
        finally:
            client.close()
