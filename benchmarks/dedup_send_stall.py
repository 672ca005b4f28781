"""What large SENDs with message deduplication on cost everyone else: the longest time a PING
on another connection waits for its answer while they are written.

Starts a rill server (TCP only, ``fsync = interval``, ``[system.message_deduplication]`` on;
``--plain``: off) and, per run, on one connection sends PINGs back to back the whole time
(``partition_stall.Pinger``: raw sockets, no client-side work that could hold the PINGs up)
while a second connection sends ``--sends`` SENDs of ``--messages`` messages of ``--size``
bytes, each with its own id, to one partition (the frames built before the clock starts).
Prints the longest time without a PING answer before the SENDs (quiet) and during them, per
run, and the medians; with ``--baseline PATH`` (the ``src`` of another checkout) the same runs
against that code, interleaved, and the ratio of the medians.

    python benchmarks/dedup_send_stall.py [--runs 3] [--baseline /tmp/base/src] [--plain]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from partition_stall import Pinger, call, connect

from rill.bench.server import RillServer
from rill.protocol.iggy.commands.messages import SendMessages
from rill.protocol.iggy.commands.streams import CreateStream
from rill.protocol.iggy.commands.topics import CreateTopic
from rill.protocol.iggy.messages import Message, encode_messages
from rill.protocol.iggy.primitives import Identifier, Partitioning
from rill.protocol.primitives import CompressionAlgorithm


def one_run(args: argparse.Namespace, frames: list[bytes], pythonpath: str | None
            ) -> tuple[float, float]:
    """(quiet, during the SENDs): the longest time without a PING answer, seconds."""
    env = {"RILL_SYSTEM_MESSAGE_DEDUPLICATION_ENABLED": "false" if args.plain else "true",
           "RILL_ROOT_PASSWORD_HASH_COST": "4"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    with tempfile.TemporaryDirectory(prefix="dedup-stall-") as directory, \
            RillServer(directory, fsync="interval", env=env) as server:
        host, port = server.addresses["tcp"].rsplit(":", 1)
        address = (host, int(port))
        sender = connect(address)
        call(sender, CreateStream(1, "s").to_frame())
        call(sender, CreateTopic(Identifier(1), 1, 1, CompressionAlgorithm.NONE, 0, 0, 0,
                                 "t").to_frame())
        pinger = Pinger(address)
        pinger.start()
        time.sleep(0.5)
        quiet = pinger.stall(0.0, time.monotonic())
        began = time.monotonic()
        for frame in frames:
            call(sender, frame)
        ended = time.monotonic()
        pinger.done.set()
        pinger.join()
        sender.close()
        return quiet, pinger.stall(began, ended)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sends", type=int, default=10)
    parser.add_argument("--messages", type=int, default=16, help="messages a SEND")
    parser.add_argument("--size", type=int, default=500_000, help="bytes a message")
    parser.add_argument("--plain", action="store_true", help="deduplication off")
    parser.add_argument("--baseline", help="the src directory of another checkout")
    args = parser.parse_args()
    frames = [SendMessages(Identifier(1), Identifier(1), Partitioning.partition_id(1),
                           encode_messages([Message(b"x" * args.size, id=1 + n + send * 1000)
                                            for n in range(args.messages)])).to_frame()
              for send in range(args.sends)]
    variants = {"this tree": None}
    if args.baseline:
        variants["baseline"] = args.baseline
    results: dict[str, list[float]] = {name: [] for name in variants}
    for run in range(1, args.runs + 1):
        for name, path in variants.items():
            quiet, during = one_run(args, frames, path)
            results[name].append(during)
            print(f"run {run} {name:10s} quiet {quiet * 1000:7.1f} ms, during the SENDs "
                  f"{during * 1000:7.1f} ms", flush=True)
    medians = {name: statistics.median(rows) for name, rows in results.items()}
    kind = "plain" if args.plain else "deduplicated"
    print(f"\nmedians of {args.runs} runs, {args.sends} {kind} SENDs of "
          f"{args.messages * args.size / 1e6:g} MB, longest time without a PING answer:")
    for name, median in medians.items():
        print(f"  {name:10s} {median * 1000:7.1f} ms")
    if args.baseline:
        print(f"  this tree ÷ baseline: {medians['this tree'] / medians['baseline']:.2f}")


if __name__ == "__main__":
    main()
