"""Kafka produce at RF 1 and RF 3 on a local 3-node cluster, with what the machine did meanwhile:
the nodes' CPU, the whole machine's busy and I/O-wait cores (``/proc/stat``) and the MB/s the
disk wrote (``/proc/diskstats``) over each case, so a ratio can be told apart as CPU-bound,
disk-bound or waiting.

    .venv/bin/python benchmarks/cluster_write_path.py --runs 3
    .venv/bin/python benchmarks/cluster_write_path.py --fsync never --acks 1

Each run: a topic of 3 partitions at RF 1, then one at RF ``--replication-factor`` (acks
``--acks``), three confluent-kafka producers (``rill bench cluster``'s, one batch in flight
each) sending ``--batches`` batches of 1,000 × 1 KB; prints MB/s and the RF N ÷ RF 1 ratio of
the run, then the median ratio. The cluster (3 etcd members, 3 nodes) is started and stopped by
the script (``rill.bench.cluster_launch``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from rill.bench.cluster_kafka import (
    KafkaActor,
    create_topic,
    delete_topic,
    run_kafka_actors,
    wait_in_sync,
)
from rill.bench.cluster_launch import LocalCluster
from rill.bench.cpu import TICKS, CpuMeter

PARTITIONS = 3


def _machine() -> list[int]:
    with open("/proc/stat") as stat:
        return [int(field) for field in stat.readline().split()[1:]]


def _disk_written(device: str) -> tuple[int, int]:
    """(sectors written, ms spent doing I/O) of ``device``."""
    for line in Path("/proc/diskstats").read_text().splitlines():
        fields = line.split()
        if fields[2] == device:
            return int(fields[9]), int(fields[12])
    return 0, 0


def _device_of(path: str) -> str:
    """The block device (e.g. ``vda``) holding ``path``, for its /proc/diskstats line."""
    device = os.stat(path).st_dev
    major, minor = os.major(device), os.minor(device)
    name = Path(f"/sys/dev/block/{major}:{minor}").resolve().name
    return Path(f"/sys/class/block/{name}/..").resolve().name if (
        Path(f"/sys/class/block/{name}/partition").exists()) else name


def one_case(cluster: LocalCluster, topic: str, replication_factor: int, acks: str,
             batches: int, device: str) -> dict[str, float]:
    bootstrap = cluster.nodes[1].addresses["kafka"]
    create_topic(bootstrap, topic, PARTITIONS, replication_factor)
    try:
        wait_in_sync(bootstrap, topic, PARTITIONS, replication_factor)
        actors = [KafkaActor(f"p{n}", "producer", bootstrap, topic, n, acks, 1000, 1000, batches)
                  for n in range(PARTITIONS)]
        meter = CpuMeter([node.process.pid for node in cluster.nodes.values()])
        nodes_before, machine_before = meter(), _machine()
        disk_before = _disk_written(device)
        began = time.perf_counter()
        run_kafka_actors(actors)
        wall = time.perf_counter() - began
        nodes = meter() - nodes_before
        machine = [after - before for before, after in zip(machine_before, _machine())]
        disk = [after - before for before, after in zip(disk_before, _disk_written(device))]
    finally:
        delete_topic(bootstrap, topic)
    idle, iowait = machine[3], machine[4]
    return {"mb_per_s": PARTITIONS * batches * 1000 * 1000 / 1e6 / wall,
            "nodes_cores": nodes / wall,
            "busy_cores": (sum(machine) - idle - iowait) / TICKS / wall,
            "iowait_cores": iowait / TICKS / wall,
            "disk_mb_per_s": disk[0] * 512 / 1e6 / wall,
            "disk_busy": disk[1] / 1000 / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batches", type=int, default=200, help="per producer")
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--acks", default="all", choices=["all", "1"])
    parser.add_argument("--fsync", default="interval", choices=["never", "interval", "always"])
    options = parser.parse_args()
    ratios = []
    with LocalCluster(etcd_members=3, fsync=options.fsync) as cluster:
        assert cluster.root is not None
        device = _device_of(str(cluster.root))
        for run in range(1, options.runs + 1):
            figures = {}
            for rf, acks in ((1, "all"), (options.replication_factor, options.acks)):
                figures[rf] = found = one_case(cluster, f"write-path-{run}-{rf}", rf, acks,
                                               options.batches, device)
                print(f"run {run} RF {rf} acks={acks}: {found['mb_per_s']:.1f} MB/s; nodes "
                      f"{found['nodes_cores']:.2f} cores, machine busy {found['busy_cores']:.2f}"
                      f", I/O wait {found['iowait_cores']:.2f}; disk {found['disk_mb_per_s']:.0f}"
                      f" MB/s written, busy {found['disk_busy']:.0%}", flush=True)
            ratios.append(figures[options.replication_factor]["mb_per_s"] / figures[1]["mb_per_s"])
            print(f"run {run}: RF {options.replication_factor} ÷ RF 1 = {ratios[-1]:.3f}")
    print(f"median RF {options.replication_factor} ÷ RF 1 over {options.runs} runs: "
          f"{statistics.median(ratios):.3f} ({', '.join(f'{r:.3f}' for r in ratios)})")


if __name__ == "__main__":
    main()
