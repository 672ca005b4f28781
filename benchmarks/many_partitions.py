"""What many partitions cost the server: time to create, write, read and restart N partitions,
and the descriptors and memory it holds meanwhile.

Starts a rill server (TCP only, fsync ``--fsync``) in a temporary directory, creates one stream
with ``--partitions`` partitions (topics of up to 1,000), sends one message to every partition
and polls every partition, all pipelined on one connection (``--in-flight`` requests at once),
then stops it cleanly and starts it again and polls every partition once more. Prints the
seconds of each phase, the most descriptors the server had open (``/proc/PID/fd``, sampled
every 20 ms) and its RSS at the end. ``--open-files N`` starts the server with RLIMIT_NOFILE
soft = hard = N (it cannot raise it). With ``--baseline PATH`` (the ``src`` directory of
another checkout, e.g. ``git archive`` of main) the same is measured for that code right after,
with the same settings (runs interleaved: this code, baseline, this code, ...; the baseline's
limit may differ: ``--baseline-open-files``, e.g. to compare a low limit against code that
cannot run under it), and the ratios of the medians of ``--runs`` runs printed.

    python benchmarks/many_partitions.py [--partitions 5000] [--open-files 512] [--runs 3]
                                         [--baseline /tmp/rill-base/src]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, fields

import psutil

from rill.bench.server import RillServer
from rill.client import AsyncClient, PollingStrategy

PER_TOPIC = 1000


@dataclass
class Figures:
    create: float = 0.0  # seconds
    send: float = 0.0
    poll: float = 0.0
    restart: float = 0.0  # clean stop, start until listening
    poll_after_restart: float = 0.0
    descriptors: int = 0  # most open at once
    rss: int = 0  # bytes, at the end of the first run


class DescriptorWatch(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.highest = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                self.highest = max(self.highest, len(os.listdir(f"/proc/{self.pid}/fd")))
            except OSError:
                pass
            self.done.wait(0.02)


def targets(partitions: int) -> list[tuple[int, int]]:
    return [(1 + number // PER_TOPIC, 1 + number % PER_TOPIC) for number in range(partitions)]


async def pipelined(address: str, partitions: int, in_flight: int, request) -> float:
    async with AsyncClient(address, reconnect=False, timeout=300) as client:
        await client.login_user("iggy", "iggy")
        started = time.perf_counter()
        pending = targets(partitions)
        for start in range(0, len(pending), in_flight):
            await asyncio.gather(*(request(client, topic, partition)
                                   for topic, partition in pending[start:start + in_flight]))
        return time.perf_counter() - started


async def create(address: str, partitions: int) -> float:
    async with AsyncClient(address, reconnect=False, timeout=300) as client:
        await client.login_user("iggy", "iggy")
        started = time.perf_counter()
        await client.create_stream("many", stream_id=1)
        topics = (partitions + PER_TOPIC - 1) // PER_TOPIC
        for topic in range(1, topics + 1):
            count = min(PER_TOPIC, partitions - (topic - 1) * PER_TOPIC)
            await client.create_topic(1, f"t{topic}", partitions_count=count, topic_id=topic)
        return time.perf_counter() - started


async def send(client: AsyncClient, topic: int, partition: int) -> None:
    await client.send_messages(1, topic, [b"t%d-p%d" % (topic, partition)],
                               partitioning=partition)


async def poll(client: AsyncClient, topic: int, partition: int) -> None:
    polled = await client.poll_messages(1, topic, partition_id=partition, count=10,
                                        strategy=PollingStrategy.offset(0))
    assert [m.payload for m in polled.messages] == [b"t%d-p%d" % (topic, partition)]


def measure(partitions: int, fsync: str, open_files: int | None, in_flight: int,
            pythonpath: str | None) -> Figures:
    env = {"RILL_ROOT_PASSWORD_HASH_COST": "4", "RILL_SYSTEM_METADATA_RESERVE": "0"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    figures = Figures()
    with tempfile.TemporaryDirectory(prefix="rill-many-") as data_dir:
        server = RillServer(os.path.join(data_dir, "data"), fsync, env=env, open_files=open_files)
        server.start()
        try:
            assert server.process is not None
            watch = DescriptorWatch(server.process.pid)
            watch.start()
            address = server.addresses["tcp"]
            figures.create = asyncio.run(create(address, partitions))
            figures.send = asyncio.run(pipelined(address, partitions, in_flight, send))
            figures.poll = asyncio.run(pipelined(address, partitions, in_flight, poll))
            figures.rss = psutil.Process(server.process.pid).memory_info().rss
            watch.done.set()
            watch.join()
            figures.descriptors = watch.highest
            server.stop()
            started = time.perf_counter()
            server.start()
            figures.restart = time.perf_counter() - started
            figures.poll_after_restart = asyncio.run(
                pipelined(server.addresses["tcp"], partitions, in_flight, poll))
        finally:
            server.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=5000)
    parser.add_argument("--fsync", default="interval", choices=["never", "interval", "always"])
    parser.add_argument("--open-files", type=int, help="the server's RLIMIT_NOFILE (soft = hard)")
    parser.add_argument("--in-flight", type=int, default=500)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--baseline", help="src directory of the code to compare against")
    parser.add_argument("--baseline-open-files", type=int,
                        help="the baseline server's RLIMIT_NOFILE (default: --open-files)")
    arguments = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    runs = [("this code", None)] + ([("baseline", arguments.baseline)] if arguments.baseline else [])
    results: dict[str, list[Figures]] = {label: [] for label, _ in runs}
    limits = {"this code": arguments.open_files,
              "baseline": arguments.baseline_open_files or arguments.open_files}
    print(f"{arguments.partitions} partitions, fsync {arguments.fsync}, open-file limit "
          + ", ".join(f"{limits[label] or hard} ({label})" for label, _ in runs))
    for run in range(1, arguments.runs + 1):
        for label, pythonpath in runs:
            try:
                found = measure(arguments.partitions, arguments.fsync, limits[label],
                                arguments.in_flight, pythonpath)
            except Exception as error:  # noqa: BLE001 - a baseline that cannot do it says so
                print(f"run {run} {label:>10}: failed: {type(error).__name__}: {error}")
                continue
            results[label].append(found)
            print(f"run {run} {label:>10}: {describe(found)}")
    medians = {label: median(found) for label, found in results.items() if found}
    for label, found in medians.items():
        print(f"median {label:>10}: {describe(found)}")
    if len(medians) == 2:
        this, base = medians["this code"], medians["baseline"]
        print("this code / baseline: " + ", ".join(
            f"{field.name} {getattr(this, field.name) / getattr(base, field.name):.2f}x"
            for field in fields(Figures)))


def describe(found: Figures) -> str:
    return (f"create {found.create:6.2f} s, send {found.send:6.2f} s, poll {found.poll:6.2f} s, "
            f"restart {found.restart:6.2f} s, poll after restart {found.poll_after_restart:6.2f} "
            f"s; at most {found.descriptors} descriptors, RSS {found.rss / 2**20:.0f} MiB")


def median(runs: list[Figures]) -> Figures:
    return Figures(*(statistics.median(getattr(run, field.name) for run in runs)
                     for field in fields(Figures)))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
