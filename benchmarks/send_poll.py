"""Send and poll throughput of one producer and one consumer over loopback.

Starts a rill server (fsync interval by default) in a temporary directory, then per run:
one producer sends ``--batches`` batches of 1,000 messages of 1 KB to one partition, and one
consumer polls them back by offset, 1,000 at a time. Prints MB/s (10^6 bytes of payload) and
msg/s for each phase and the median of ``--runs`` runs.

    python benchmarks/send_poll.py [--batches 300] [--runs 3] [--fsync interval]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time

from rill.client import AsyncClient, Partitioning, PollingStrategy
from rill.protocol.messages import Message, encode_messages


def start_server(data_dir: str, fsync: str) -> tuple[subprocess.Popen[str], str]:
    env = dict(os.environ, RILL_SYSTEM_FSYNC=fsync, RILL_LOGGING_LEVEL="warning")
    process = subprocess.Popen(
        [sys.executable, "-m", "rill", "serve", "--data-dir", data_dir,
         "--tcp-address", "127.0.0.1:0", "--quic-address", "127.0.0.1:0"],
        stdout=subprocess.PIPE, text=True, env=env,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("rill listening on tcp "):
            return process, line.split()[-1]
    raise RuntimeError("server did not start")


async def one_run(address: str, run: int, batches: int, batch_size: int, size: int) -> tuple[float, float]:
    payload = bytes((97 + i % 26) for i in range(size))
    region = encode_messages([Message(payload, id=i + 1) for i in range(batch_size)])
    async with AsyncClient(address) as client:
        await client.login_user("iggy", "iggy")
        await client.create_stream(f"bench{run}", stream_id=run)
        await client.create_topic(run, "t", partitions_count=1)
        partitioning = Partitioning.partition_id(1)
        started = time.perf_counter()
        for _ in range(batches):
            await client.send_messages_raw(run, 1, partitioning, region)
        send_seconds = time.perf_counter() - started
        started = time.perf_counter()
        received = 0
        offset = 0
        while received < batches * batch_size:
            polled = await client.poll_messages(run, 1, consumer=1, partition_id=1,
                                                strategy=PollingStrategy.offset(offset),
                                                count=batch_size)
            received += polled.count
            offset += polled.count
        poll_seconds = time.perf_counter() - started
    return send_seconds, poll_seconds


def main() -> None:
    try:  # the client side of the benchmark runs on uvloop too, like the server
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--message-size", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fsync", default="interval", choices=["never", "interval", "always"])
    args = parser.parse_args()
    messages = args.batches * args.batch_size
    megabytes = messages * args.message_size / 1e6
    with tempfile.TemporaryDirectory(prefix="rill-bench-") as data_dir:
        process, address = start_server(data_dir, args.fsync)
        try:
            sends, polls = [], []
            for run in range(1, args.runs + 1):
                send_s, poll_s = asyncio.run(
                    one_run(address, run, args.batches, args.batch_size, args.message_size))
                sends.append(send_s)
                polls.append(poll_s)
                print(f"run {run}: send {megabytes / send_s:8.1f} MB/s {messages / send_s:12,.0f} msg/s"
                      f" | poll {megabytes / poll_s:8.1f} MB/s {messages / poll_s:12,.0f} msg/s",
                      flush=True)
        finally:
            process.terminate()
            process.wait(30)
    send_s, poll_s = statistics.median(sends), statistics.median(polls)
    print(f"median of {args.runs} ({messages:,} x {args.message_size} B, batches of "
          f"{args.batch_size}, fsync {args.fsync}):")
    print(f"  send {megabytes / send_s:8.1f} MB/s {messages / send_s:12,.0f} msg/s")
    print(f"  poll {megabytes / poll_s:8.1f} MB/s {messages / poll_s:12,.0f} msg/s")


if __name__ == "__main__":
    main()
