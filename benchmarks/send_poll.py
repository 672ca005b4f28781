"""Send and poll throughput of one producer and one consumer over loopback.

Starts a rill server (fsync interval by default) in a temporary directory, then per run:
one producer sends ``--batches`` batches of 1,000 messages of 1 KB to one partition, and one
consumer polls them back by offset, 1,000 at a time. Prints MB/s (10^6 bytes of payload) and
msg/s for each phase and the median of ``--runs`` runs, and the server's CPU seconds per GB of
payload in each phase (``/proc``; steadier than MB/s on a machine shared with other work). Each
run's stream is deleted after it, so every run starts from the same disk and page cache.

``--compare VARIANT ...`` starts one server per variant (each with its own environment, see
``VARIANTS``) and interleaves their runs (run 1 of each, then run 2 of each, ...), so that a
baseline and a change are measured side by side on the same noisy machine. ``--baseline PATH``
(the ``src`` directory of another checkout, e.g. ``git archive`` of main) adds the variant
``baseline``: the default server run from that code.

    python benchmarks/send_poll.py [--batches 300] [--runs 3] [--fsync interval]
    python benchmarks/send_poll.py --compare pure-python accelerated --runs 5
    python benchmarks/send_poll.py --compare default --baseline /tmp/rill-base/src --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time

from rill.bench.server import RillServer
from rill.client import AsyncClient, Partitioning, PollingStrategy
from rill.protocol.iggy.messages import Message, encode_messages

# variant name -> environment overrides of its server
VARIANTS: dict[str, dict[str, str]] = {
    "default": {},
    "pure-python": {"RILL_PURE_PYTHON": "1"},  # the reference stamp_batch, no C twin
    "accelerated": {"RILL_PURE_PYTHON": "0"},
    "inline-appends": {"RILL_SYSTEM_APPEND_THREADS": "never"},  # every append on the event loop
    # every append of 64 KiB or more in a worker thread
    "threaded-appends": {"RILL_SYSTEM_APPEND_THREADS": "always",
                         "RILL_SYSTEM_APPEND_THREAD_MIN_SIZE": "65536"},
    "sendfile": {"RILL_TCP_SENDFILE": "true"},  # large polls from the log files by sendfile
}


def start_server(data_dir: str, fsync: str, extra_env: dict[str, str] | None = None
                 ) -> tuple[subprocess.Popen[str], str]:
    """A TCP-only server (``rill.bench.server.RillServer``); the caller terminates its process."""
    server = RillServer(data_dir, fsync, env=extra_env).start()
    assert server.process is not None
    return server.process, server.addresses["tcp"]


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


async def one_run(address: str, pid: int, run: int, batches: int, batch_size: int, size: int
                  ) -> tuple[float, float, float, float]:
    """(send seconds, poll seconds, server CPU seconds of each phase)."""
    payload = bytes((97 + i % 26) for i in range(size))
    region = encode_messages([Message(payload, id=i + 1) for i in range(batch_size)])
    async with AsyncClient(address) as client:
        await client.login_user("iggy", "iggy")
        await client.create_stream(f"bench{run}", stream_id=run)
        await client.create_topic(run, "t", partitions_count=1)
        partitioning = Partitioning.partition_id(1)
        started, cpu = time.perf_counter(), cpu_seconds(pid)
        for _ in range(batches):
            await client.send_messages_raw(run, 1, partitioning, region)
        send_seconds = time.perf_counter() - started
        send_cpu = cpu_seconds(pid) - cpu
        started, cpu = time.perf_counter(), cpu_seconds(pid)
        received = 0
        offset = 0
        while received < batches * batch_size:
            polled = await client.poll_messages(run, 1, consumer=1, partition_id=1,
                                                strategy=PollingStrategy.offset(offset),
                                                count=batch_size)
            received += polled.count
            offset += polled.count
        poll_seconds = time.perf_counter() - started
        poll_cpu = cpu_seconds(pid) - cpu
        # free the disk and page cache: otherwise later runs pay the kernel's reclaim of the
        # earlier runs' pages, and run N is slower than run 1 for reasons outside rill
        await client.delete_stream(run)
    return send_seconds, poll_seconds, send_cpu, poll_cpu


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
    parser.add_argument("--compare", nargs="+", default=["default"], metavar="VARIANT",
                        help=f"one or more of {', '.join(VARIANTS)} (and baseline)")
    parser.add_argument("--baseline", help="src directory of the code to compare against "
                        "(the variant 'baseline', run after the others unless placed in --compare)")
    args = parser.parse_args()
    if args.baseline:
        VARIANTS["baseline"] = {"PYTHONPATH": args.baseline}
        if "baseline" not in args.compare:
            args.compare.append("baseline")
    unknown = [name for name in args.compare if name not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    messages = args.batches * args.batch_size
    megabytes = messages * args.message_size / 1e6
    servers: dict[str, tuple[subprocess.Popen[str], str]] = {}
    sends: dict[str, list[float]] = {name: [] for name in args.compare}
    polls: dict[str, list[float]] = {name: [] for name in args.compare}
    send_cpus: dict[str, list[float]] = {name: [] for name in args.compare}  # CPU s per GB
    poll_cpus: dict[str, list[float]] = {name: [] for name in args.compare}
    with tempfile.TemporaryDirectory(prefix="rill-bench-") as data_root:
        try:
            for name in args.compare:
                data_dir = os.path.join(data_root, name)
                servers[name] = start_server(data_dir, args.fsync, VARIANTS[name])
            for run in range(1, args.runs + 1):
                for name in args.compare:
                    process, address = servers[name]
                    send_s, poll_s, send_cpu, poll_cpu = asyncio.run(one_run(
                        address, process.pid, run, args.batches, args.batch_size,
                        args.message_size))
                    sends[name].append(send_s)
                    polls[name].append(poll_s)
                    send_cpus[name].append(1000 * send_cpu / megabytes)
                    poll_cpus[name].append(1000 * poll_cpu / megabytes)
                    print(f"run {run} {name:>16}: send {megabytes / send_s:8.1f} MB/s "
                          f"{messages / send_s:12,.0f} msg/s {send_cpus[name][-1]:5.2f} CPU s/GB"
                          f" | poll {megabytes / poll_s:8.1f} MB/s {messages / poll_s:12,.0f} "
                          f"msg/s {poll_cpus[name][-1]:5.2f} CPU s/GB", flush=True)
        finally:
            for process, _ in servers.values():
                process.terminate()
                process.wait(30)
    print(f"median of {args.runs} ({messages:,} x {args.message_size} B, batches of "
          f"{args.batch_size}, fsync {args.fsync}):")
    for name in args.compare:
        send_s, poll_s = statistics.median(sends[name]), statistics.median(polls[name])
        print(f"  {name:>16}: send {megabytes / send_s:8.1f} MB/s {messages / send_s:12,.0f} msg/s"
              f" {statistics.median(send_cpus[name]):5.2f} CPU s/GB"
              f" | poll {megabytes / poll_s:8.1f} MB/s {messages / poll_s:12,.0f} msg/s"
              f" {statistics.median(poll_cpus[name]):5.2f} CPU s/GB")


if __name__ == "__main__":
    main()
