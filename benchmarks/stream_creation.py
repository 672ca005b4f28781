"""Streams per second as streams accumulate: is creating the 100,000th as cheap as the first?

Starts a rill server (TCP only, fsync as given) in a temporary directory and creates ``--streams``
streams over one connection, ``--pipeline`` requests in flight, timing every block of
``--block`` creations. Prints streams/s per block and the ratio of the first block's rate to the
last one's (1.0 = linear; a per-creation scan over all streams made it grow with the count).
With ``--python PATH`` (another checkout's interpreter / PYTHONPATH through the environment)
the same run measures other code, e.g. a baseline.

    python benchmarks/stream_creation.py [--streams 100000] [--block 10000] [--fsync interval]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from rill.bench.server import RillServer
from rill.client import AsyncClient


async def create_streams(address: str, total: int, block: int, pipeline: int) -> list[float]:
    """Streams/s of each block of ``block`` creations."""
    client = AsyncClient(address)
    await client.connect()
    await client.login_user("iggy", "iggy")
    rates = []
    try:
        for first in range(0, total, block):
            started = time.perf_counter()
            names = [f"stream-{number}" for number in range(first, min(first + block, total))]
            for start in range(0, len(names), pipeline):
                await asyncio.gather(*(client.create_stream(name)
                                       for name in names[start:start + pipeline]))
            rates.append(len(names) / (time.perf_counter() - started))
    finally:
        await client.close()
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=100_000)
    parser.add_argument("--block", type=int, default=10_000)
    parser.add_argument("--pipeline", type=int, default=32, help="requests in flight")
    parser.add_argument("--fsync", default="interval", choices=("never", "interval", "always"))
    arguments = parser.parse_args()
    with RillServer(fsync=arguments.fsync) as server:
        rates = asyncio.run(create_streams(server.addresses["tcp"], arguments.streams,
                                           arguments.block, arguments.pipeline))
    print(f"{'streams':>16}  {'streams/s':>10}")
    for number, rate in enumerate(rates):
        first = number * arguments.block
        print(f"{first:>7}..{min(first + arguments.block, arguments.streams):<7}  {rate:>10.0f}")
    print(f"first block / last block: {rates[0] / rates[-1]:.2f} (1.0 = linear)")


if __name__ == "__main__":
    main()
