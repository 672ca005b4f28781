"""Server CPU per million messages through rill's TANK listener with pipelined clients: the
measure of issue 31's first "done when" (TANK's own broker: 0.10 CPU-s per million 100 B
messages produced and consumed at 1,000 a bundle, 0.24 at 100 a bundle).

Per ``--batch`` size and per code variant (``--code NAME=SRC_DIR``, first on the server's
``PYTHONPATH``), interleaved ``--runs`` times: a fresh rill server (fsync ``--fsync``) with its
TANK listener; one producer connection keeps ``--depth`` Produce requests in flight, each one
uncompressed bundle of ``--batch`` messages of ``--size`` bytes (the frame built once and
re-sent: the client does no per-message work), until ``--messages`` are written; then one
consumer connection keeps ``--depth`` Consume requests in flight, each for the next bundle
(``fetch_size`` 1: exactly one stored bundle an answer), until every message is read back.
The server's CPU seconds (user + system, ``/proc``) over each phase, per million messages,
and the msg/s of each phase; medians of the runs. Both clients are raw asyncio (uvloop)
streams in one process, counting answers by their frame headers.

    python benchmarks/tank_pipelined.py --code new=src --batch 1000 --batch 100 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

import uvloop

from rill.bench.cpu import tree_cpu_seconds
from rill.bench.server import RillServer
from rill.client.tank import Batch, consume_request, produce_request
from rill.protocol.tank.framing import HEADER, PING_FRAME
from rill.protocol.tank.messages import CreateTopicRequest, encode_request

TOPIC = "pipelined"
TS = 1_700_000_000_000


async def _answers(reader: asyncio.StreamReader, count: int, sent: asyncio.Semaphore) -> None:
    """Read ``count`` answers (pings dropped), releasing a slot of the window for each."""
    got = 0
    while got < count:
        msg_id, size = HEADER.unpack(await reader.readexactly(HEADER.size))
        if size:
            await reader.readexactly(size)
        if msg_id == PING_FRAME[0]:
            continue
        got += 1
        sent.release()


async def _pipeline(port: int, frames, depth: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        window = asyncio.Semaphore(depth)
        reading = asyncio.ensure_future(_answers(reader, len(frames), window))
        for data in frames:
            await window.acquire()
            writer.write(data)
            if reading.done():
                break
        await reading
    finally:
        writer.close()


async def _create(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_request(CreateTopicRequest(1, TOPIC, 1, b"")))
    while True:
        msg_id, size = HEADER.unpack(await reader.readexactly(HEADER.size))
        await reader.readexactly(size)
        if msg_id != PING_FRAME[0]:
            break
    writer.close()


def one_run(src: str, args: argparse.Namespace, batch: int) -> dict[str, float]:
    bundles = args.messages // batch
    produce = encode_request(produce_request(7, [Batch(TOPIC, 0, [b"x" * args.size] * batch,
                                                       None, TS)]))
    consumes = [encode_request(consume_request(number, [(TOPIC, 0, 1 + number * batch)],
                                               fetch_size=1))
                for number in range(bundles)]
    with tempfile.TemporaryDirectory(prefix="tank-pipelined-") as data_dir:
        env = {"PYTHONPATH": src, "RILL_TANK_USER": "iggy"}
        with RillServer(data_dir, fsync=args.fsync, env=env, tank=True) as server:
            port = int(server.addresses["tank"].rsplit(":", 1)[1])
            pid = server.process.pid
            uvloop.run(_create(port))
            figures = {}
            for phase, frames in (("produce", [produce] * bundles), ("consume", consumes)):
                cpu, started = tree_cpu_seconds(pid), time.perf_counter()
                uvloop.run(_pipeline(port, frames, args.depth))
                elapsed = time.perf_counter() - started
                used = tree_cpu_seconds(pid) - cpu
                figures[f"{phase} CPU-s/M"] = used / (bundles * batch) * 1e6
                figures[f"{phase} msg/s"] = bundles * batch / elapsed
    figures["CPU-s/M"] = figures["produce CPU-s/M"] + figures["consume CPU-s/M"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", action="append", required=True, metavar="NAME=SRC_DIR")
    parser.add_argument("--batch", action="append", type=int, help="messages a bundle")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--depth", type=int, default=32, help="requests in flight")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fsync", default="interval")
    args = parser.parse_args()
    batches = args.batch or [1000, 100]
    variants = [entry.split("=", 1) for entry in args.code]
    results: dict[tuple[int, str], list[dict[str, float]]] = {}
    for run in range(args.runs):
        for batch in batches:
            for name, src in variants:
                found = one_run(src, args, batch)
                results.setdefault((batch, name), []).append(found)
                print(f"run {run + 1} {batch:>5} a bundle {name:>8}: " + "  ".join(
                    f"{key} {value:,.3f}" if "CPU" in key else f"{key} {value:,.0f}"
                    for key, value in found.items()), flush=True)
    print(f"\nmedians of {args.runs} runs, {args.messages:,} messages of {args.size} B, "
          f"{args.depth} requests in flight, fsync {args.fsync}")
    print(f"{'bundle':>6} {'variant':>8} {'produce msg/s':>14} {'consume msg/s':>14} "
          f"{'produce CPU-s/M':>16} {'consume CPU-s/M':>16} {'total CPU-s/M':>14}")
    for (batch, name), rows in results.items():
        med = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
        print(f"{batch:>6} {name:>8} {med['produce msg/s']:>14,.0f} "
              f"{med['consume msg/s']:>14,.0f} {med['produce CPU-s/M']:>16.3f} "
              f"{med['consume CPU-s/M']:>16.3f} {med['CPU-s/M']:>14.3f}")

if __name__ == "__main__":
    main()
