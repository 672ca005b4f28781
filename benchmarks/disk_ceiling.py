"""What this machine's disk lets a replicated cluster on it write: ``--nodes`` processes (one
per node) append 1 MB chunks to ``--partitions`` files each, as fast as they can, and sync every
dirty file each ``--interval`` seconds from a thread (rill's ``fsync = interval``), for
``--seconds``; prints the MB/s that reached the disk in total, median of ``--runs``.

    .venv/bin/python benchmarks/disk_ceiling.py --runs 3
    .venv/bin/python benchmarks/disk_ceiling.py --nodes 1   # one node's files alone

With every replica on one disk, each MB a producer sends at RF 3 is written three times: the
disk's total divided by the replication factor is the most RF 3 can take in under that fsync
policy, whatever the server does (``rill bench cluster`` compares it with RF 1's msg/s).
Writes go to a temporary directory under ``--directory`` (default: the system's, the one
``rill bench cluster`` puts its nodes in), removed afterwards.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

CHUNK = b"r" * (1 << 20)


def _node(directory: Path, partitions: int, seconds: float, interval: float, results: object
          ) -> None:
    """One node: append round robin to its files until ``seconds`` pass; a thread syncs them
    every ``interval``; puts (bytes written, bytes synced by the end) on ``results``."""
    descriptors = [os.open(directory / f"p{n}.log", os.O_WRONLY | os.O_CREAT, 0o644)
                   for n in range(partitions)]
    written = [0] * partitions
    synced = [0] * partitions
    done = threading.Event()

    def syncer() -> None:
        while not done.wait(interval):
            for n, descriptor in enumerate(descriptors):
                upto = written[n]
                os.fdatasync(descriptor)
                synced[n] = upto

    thread = threading.Thread(target=syncer, daemon=True)
    thread.start()
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        os.pwrite(descriptors[n], CHUNK, written[n])
        written[n] += len(CHUNK)
        n = (n + 1) % partitions
    done.set()
    thread.join()
    for n, descriptor in enumerate(descriptors):  # what is still unsynced counts once synced
        os.fdatasync(descriptor)
        synced[n] = written[n]
        os.close(descriptor)
    results.put(sum(synced))  # type: ignore[attr-defined]


def one_run(base: Path, nodes: int, partitions: int, seconds: float, interval: float) -> float:
    """MB per second that reached the disk (the final syncs' time included)."""
    directory = Path(tempfile.mkdtemp(prefix="rill-disk-ceiling-", dir=base))
    try:
        results: multiprocessing.Queue[int] = multiprocessing.Queue()
        workers = []
        for node in range(nodes):
            (directory / f"node{node}").mkdir()
            workers.append(multiprocessing.Process(
                target=_node, args=(directory / f"node{node}", partitions, seconds, interval,
                                    results)))
        began = time.perf_counter()
        for worker in workers:
            worker.start()
        total = sum(results.get(timeout=seconds + 120) for _ in workers)
        for worker in workers:
            worker.join()
        return total / 1e6 / (time.perf_counter() - began)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=3, help="files per node")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between syncs")
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--directory", default=tempfile.gettempdir())
    options = parser.parse_args()
    rates = [one_run(Path(options.directory), options.nodes, options.partitions,
                     options.seconds, options.interval) for _ in range(options.runs)]
    median = statistics.median(rates)
    print(f"{options.nodes} writer(s) x {options.partitions} file(s), sync every "
          f"{options.interval} s: {median:.0f} MB/s to disk (median of {options.runs}: "
          f"{', '.join(f'{rate:.0f}' for rate in rates)})")
    print(f"at replication factor {options.replication_factor} on this one disk: at most "
          f"{median / options.replication_factor:.0f} MB/s of produced data")


if __name__ == "__main__":
    main()
