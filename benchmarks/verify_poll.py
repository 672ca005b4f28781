"""Poll throughput with read verification: data this server wrote, the first read of data an
earlier run wrote (verified by that read), and a second read of it (already verified).

Per run and per code variant: start a server running that code (``--code NAME=SRC_DIR``, put
first on its ``PYTHONPATH``; e.g. a checkout of main built with ``setup.py build_ext
--inplace``), send ``--batches`` batches of 1,000 messages of 1 KB to one partition, poll them
back by offset (1,000 at a time), stop the server cleanly, start it again, poll everything
twice, delete the stream. Variants are interleaved (run 1 of each, run 2 of each, ...) so they
share the machine's noise. Prints MB/s of payload and the server's CPU seconds per GB for each
poll phase, the medians, and each variant's ratio to the first one.

    python benchmarks/verify_poll.py --code new=src --code main=/tmp/rill-base/src --runs 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time

from rill.bench.server import RillServer
from rill.client import AsyncClient, Partitioning, PollingStrategy
from rill.protocol.iggy.messages import Message, encode_messages

PHASES = ("written here", "first read", "second read")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


async def send(address: str, batches: int, size: int) -> None:
    payload = bytes((97 + i % 26) for i in range(size))
    region = encode_messages([Message(payload, id=i + 1) for i in range(1000)])
    async with AsyncClient(address) as client:
        await client.login_user("iggy", "iggy")
        await client.create_stream("bench", stream_id=1)
        await client.create_topic(1, "t", partitions_count=1)
        for _ in range(batches):
            await client.send_messages_raw(1, 1, Partitioning.partition_id(1), region)


async def poll_all(address: str, pid: int, messages: int) -> tuple[float, float]:
    """(seconds, server CPU seconds) to poll every message back by offset."""
    async with AsyncClient(address) as client:
        await client.login_user("iggy", "iggy")
        started, cpu = time.perf_counter(), cpu_seconds(pid)
        offset = 0
        while offset < messages:
            polled = await client.poll_messages(1, 1, consumer=1, partition_id=1,
                                                strategy=PollingStrategy.offset(offset),
                                                count=1000)
            offset += polled.count
        return time.perf_counter() - started, cpu_seconds(pid) - cpu


async def delete(address: str) -> None:
    async with AsyncClient(address) as client:
        await client.login_user("iggy", "iggy")
        await client.delete_stream(1)


def one_run(data_dir: str, code: str, batches: int, size: int) -> list[tuple[float, float]]:
    env = {"PYTHONPATH": code, "RILL_SYSTEM_SEGMENT_SIZE": "64 MB"}
    messages = batches * 1000
    results = []
    server = RillServer(data_dir, "interval", env=env).start()
    try:
        address, pid = server.addresses["tcp"], server.process.pid
        asyncio.run(send(address, batches, size))
        results.append(asyncio.run(poll_all(address, pid, messages)))
    finally:
        server.stop()
    server = RillServer(data_dir, "interval", env=env).start()
    try:
        address, pid = server.addresses["tcp"], server.process.pid
        results.append(asyncio.run(poll_all(address, pid, messages)))
        results.append(asyncio.run(poll_all(address, pid, messages)))
        asyncio.run(delete(address))
    finally:
        server.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", action="append", required=True, metavar="NAME=SRC_DIR")
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--message-size", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    variants = dict(item.split("=", 1) for item in args.code)
    variants = {name: os.path.abspath(path) for name, path in variants.items()}
    megabytes = args.batches * 1000 * args.message_size / 1e6
    rates = {name: {phase: [] for phase in PHASES} for name in variants}
    cpus = {name: {phase: [] for phase in PHASES} for name in variants}
    with tempfile.TemporaryDirectory(prefix="rill-verify-bench-") as root:
        for run in range(1, args.runs + 1):
            for name, code in variants.items():
                found = one_run(os.path.join(root, name), code, args.batches, args.message_size)
                line = []
                for phase, (seconds, cpu) in zip(PHASES, found):
                    rates[name][phase].append(megabytes / seconds)
                    cpus[name][phase].append(1000 * cpu / megabytes)
                    line.append(f"{phase} {megabytes / seconds:7.1f} MB/s "
                                f"{1000 * cpu / megabytes:5.2f} CPU s/GB")
                print(f"run {run} {name:>8}: " + " | ".join(line), flush=True)
    baseline = next(iter(variants))
    print(f"median of {args.runs} runs, {megabytes:.0f} MB of 1 KB messages; ratio to {baseline}")
    for name in variants:
        for phase in PHASES:
            rate = statistics.median(rates[name][phase])
            cpu = statistics.median(cpus[name][phase])
            ratio = rate / statistics.median(rates[baseline][phase])
            cpu_ratio = cpu / statistics.median(cpus[baseline][phase])
            print(f"{name:>8} {phase:>13}: {rate:7.1f} MB/s (x{ratio:.2f}), "
                  f"{cpu:5.2f} CPU s/GB (x{cpu_ratio:.2f})")


if __name__ == "__main__":
    main()
