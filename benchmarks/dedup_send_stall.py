"""What large SENDs with message deduplication on cost everyone else: the longest time a PING
on another connection waits for its answer while they are written.

Starts a rill server (TCP only, ``fsync = interval``, ``[system.message_deduplication]`` on)
and, per run, on one connection sends PINGs back to back the whole time while a second
connection sends ``--sends`` SENDs of ``--messages`` messages of ``--size`` bytes, each with its
own id, to one partition. Prints the longest time without a PING answer before the SENDs
(quiet) and during them, per run, and the medians; with ``--baseline PATH`` (the ``src`` of
another checkout) the same runs against that code, interleaved, and the ratio of the medians.

    python benchmarks/dedup_send_stall.py [--runs 3] [--baseline /tmp/base/src]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time

from rill.bench.server import RillServer
from rill.client import Client, Message


def one_run(args: argparse.Namespace, pythonpath: str | None) -> tuple[float, float]:
    """(quiet, during the SENDs): the longest time without a PING answer, seconds."""
    env = {"RILL_SYSTEM_MESSAGE_DEDUPLICATION_ENABLED": "true",
           "RILL_ROOT_PASSWORD_HASH_COST": "4"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    with tempfile.TemporaryDirectory(prefix="dedup-stall-") as directory, \
            RillServer(directory, fsync="interval", env=env) as server:
        address = server.addresses["tcp"]
        with Client(address) as admin:
            admin.login_user("iggy", "iggy")
            admin.create_stream("s", stream_id=1)
            admin.create_topic(1, "t", partitions_count=1)
        stop = threading.Event()
        gaps: list[float] = []

        def pinger() -> None:
            with Client(address) as client:
                client.login_user("iggy", "iggy")
                last = time.perf_counter()
                while not stop.is_set():
                    client.ping()
                    now = time.perf_counter()
                    gaps.append(now - last)
                    last = now

        thread = threading.Thread(target=pinger)
        thread.start()
        time.sleep(0.5)
        quiet = max(gaps)
        gaps.clear()
        with Client(address) as sender:
            sender.login_user("iggy", "iggy")
            next_id = 1
            for _ in range(args.sends):
                sender.send_messages(1, 1, [Message(b"x" * args.size, id=next_id + n)
                                            for n in range(args.messages)], partitioning=1)
                next_id += args.messages
        stop.set()
        thread.join()
        return quiet, max(gaps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sends", type=int, default=10)
    parser.add_argument("--messages", type=int, default=16, help="messages a SEND")
    parser.add_argument("--size", type=int, default=500_000, help="bytes a message")
    parser.add_argument("--baseline", help="the src directory of another checkout")
    args = parser.parse_args()
    variants = {"this tree": None}
    if args.baseline:
        variants["baseline"] = args.baseline
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for run in range(1, args.runs + 1):
        for name, path in variants.items():
            quiet, during = one_run(args, path)
            results[name].append((quiet, during))
            print(f"run {run} {name:10s} quiet {quiet * 1000:7.1f} ms, during the SENDs "
                  f"{during * 1000:7.1f} ms", flush=True)
    medians = {name: statistics.median(during for _, during in rows)
               for name, rows in results.items()}
    size = args.messages * args.size / 1e6
    print(f"\nmedians of {args.runs} runs, {args.sends} deduplicated SENDs of {size:g} MB, "
          "longest time without a PING answer:")
    for name, median in medians.items():
        print(f"  {name:10s} {median * 1000:7.1f} ms")
    if args.baseline:
        print(f"  this tree ÷ baseline: {medians['this tree'] / medians['baseline']:.2f}")


if __name__ == "__main__":
    main()
