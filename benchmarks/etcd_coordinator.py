"""The Coordinator on a real etcd: latency of each call through rill's gateway client.

Starts a 3-member etcd cluster on 127.0.0.1 (Debian's etcd-server, the test suite's starter:
``tests/server/cluster/etcd_cluster.py``), then times, through ``EtcdGateway`` (one client on
the first member, another on the second): put, linearizable range, CAS transaction (compare
mod_revision, put), lease keepalive, watch delivery (a put on one member seen by a watch on
another) and election hand-over on resign. Prints p50 / p99 in ms per call, ``--count`` calls
each; every etcd process is stopped by pid at the end.

    python benchmarks/etcd_coordinator.py --count 300
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "server" / "cluster"))

from etcd_cluster import EtcdCluster  # noqa: E402

from rill.server.cluster.coordinator import Compare, Put  # noqa: E402
from rill.server.cluster.election import Election  # noqa: E402
from rill.server.cluster.etcd_gateway import EtcdGateway  # noqa: E402


def summary(name: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{name:<28} p50 {statistics.median(ordered) * 1e3:6.2f} ms   p99 {p99 * 1e3:6.2f} ms   (n={len(ordered)})"


async def measure(cluster: EtcdCluster, count: int) -> list[str]:
    first = EtcdGateway(cluster.endpoints)
    second = EtcdGateway(cluster.endpoints[1:] + cluster.endpoints[:1])
    lines = []
    try:
        timings: dict[str, list[float]] = {name: [] for name in (
            "put", "range (linearizable)", "CAS txn", "keepalive", "watch delivery",
            "election hand-over")}
        lease = await first.grant_lease(10)
        key = b"/bench/key"
        await first.put(key, b"0")
        for index in range(count):
            started = time.perf_counter()
            await first.put(b"/bench/put", b"%d" % index)
            timings["put"].append(time.perf_counter() - started)
            started = time.perf_counter()
            seen = await first.get(key)
            timings["range (linearizable)"].append(time.perf_counter() - started)
            started = time.perf_counter()
            done = await first.txn([Compare.mod_revision(key, "==", seen.mod_revision)],
                                   [Put(key, b"%d" % index)])
            timings["CAS txn"].append(time.perf_counter() - started)
            assert done.succeeded
            started = time.perf_counter()
            await first.keepalive(lease.id)
            timings["keepalive"].append(time.perf_counter() - started)
        watch = second.watch(b"/bench/watched/").__aiter__()
        await watch.__anext__()  # open
        for index in range(count):
            started = time.perf_counter()
            await first.put(b"/bench/watched/k", b"%d" % index)
            await watch.__anext__()
            timings["watch delivery"].append(time.perf_counter() - started)
        await watch.aclose()
        first_election = Election(first, b"/bench/election/")
        second_election = Election(second, b"/bench/election/")
        other = await second.grant_lease(10)
        for _ in range(max(10, count // 10)):
            leading = await first_election.campaign(lease.id, b"first")
            waiting = asyncio.ensure_future(second_election.campaign(other.id, b"second"))
            while len((await first.range(b"/bench/election/", prefix=True)).kvs) < 2:
                await asyncio.sleep(0.001)  # the second candidate stands
            started = time.perf_counter()
            await first_election.resign(leading)
            took_over = await waiting
            timings["election hand-over"].append(time.perf_counter() - started)
            await second_election.resign(took_over)
        for name, seconds in timings.items():
            lines.append(summary(name, seconds))
    finally:
        await first.close()
        await second.close()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        cluster = EtcdCluster(Path(directory)).start()
        try:
            print(f"3 etcd members healthy in {time.perf_counter() - started:.2f} s")
            for line in asyncio.run(measure(cluster, arguments.count)):
                print(line)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
