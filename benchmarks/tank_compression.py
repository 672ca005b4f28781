"""TANK Snappy bundles end to end: the bytes rill stores and serves for them, and the server CPU
they cost (issue 31 item 3: "serve TANK bundles as stored, compressed").

Per code variant (``--code NAME=SRC_DIR``, put first on the server's ``PYTHONPATH``; e.g. a
checkout of an earlier commit with its C units built by ``setup.py build_ext --inplace``), run
interleaved ``--runs`` times: a rill server with its TANK listener (fsync ``--fsync``) gets
``--messages`` event-like messages of about 100 bytes (JSON text: compressible about 4:1, as
real events are), ``--batch`` a bundle, each bundle Snappy-compressed as TANK's C++ client
sends any bundle past 1 KiB, one Produce at a time; then one consumer reads them all back
(``fetch_size`` 1 MiB a request). Printed per variant (medians): the bytes produced (the
framed bundles: what TANK's own broker stores and serves, tank-wire-reference §10), the bytes
stored (Iggy's GET_TOPIC size) and served (the Consume chunks), each as a ratio to the bytes
produced, and the server's CPU seconds per million messages for the produce and the consume
phase (``/proc``: user + system of the server process).

    python benchmarks/tank_compression.py --code new=src --code base=/tmp/rill-base/src --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import uuid

from rill.bench.cpu import tree_cpu_seconds
from rill.bench.server import RillServer
from rill.client import Client
from rill.client.tank import TankClient, consume_request
from rill.protocol.tank.bundles import CODEC_SNAPPY, decode_chunk, encode_bundle, frame_bundle

TS = 1_700_000_000_000


def events(count: int) -> list[bytes]:
    return [b'{"user":%7d,"page":"/products/%04d","action":"view","session":"%012x",'
            b'"ms":%5d,"ok":true}' % (i * 7919 % 1_000_000, i % 997, i // 50 * 2654435761
                                      % (1 << 48), i % 30_000) for i in range(count)]


async def produce(address: tuple[str, int], name: str, values: list[bytes], batch: int) -> int:
    """Every bundle sent; the bytes of the framed bundles (what TANK keeps and serves)."""
    produced = 0
    async with TankClient(*address) as client:
        assert await client.create_topic(name, 1) == 0
        for start in range(0, len(values), batch):
            part = values[start : start + batch]
            await client.produce(name, 0, part, timestamps=TS + start, codec="snappy")
            produced += len(frame_bundle(encode_bundle(part, None, TS + start,
                                                       codec=CODEC_SNAPPY)))
    return produced


async def consume(address: tuple[str, int], name: str, count: int) -> int:
    """Every message read back; the bytes of the chunks served."""
    served, seq, seen = 0, 1, 0
    async with TankClient(*address) as client:
        while seen < count:
            request = consume_request(next(client._ids), [(name, 0, seq)],
                                      fetch_size=1 << 20)
            answer = (await client._call(request)).topics[0].partitions[0]
            chunk = bytes(answer.chunk)
            served += len(chunk)
            got = decode_chunk(chunk, answer.base or seq)
            fresh = [s for s in got.seqs if s >= seq]
            if not fresh:
                raise RuntimeError(f"no progress at seq {seq}")
            seen += len(fresh)
            seq = fresh[-1] + 1
    return served


def one_run(src: str, args: argparse.Namespace, values: list[bytes]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="tank-compression-") as data_dir:
        env = {"PYTHONPATH": src, "RILL_TANK_USER": "iggy"}
        with RillServer(data_dir, fsync=args.fsync, env=env, tank=True) as server:
            host, port = server.addresses["tank"].rsplit(":", 1)
            address = (host, int(port))
            pid = server.process.pid
            name = "c-" + uuid.uuid4().hex[:8]
            before = tree_cpu_seconds(pid)
            produced = asyncio.run(produce(address, name, values, args.batch))
            middle = tree_cpu_seconds(pid)
            served = asyncio.run(consume(address, name, len(values)))
            after = tree_cpu_seconds(pid)
            with Client(server.addresses["tcp"], reconnect=False) as iggy:
                iggy.login_user("iggy", "iggy")
                stored = iggy.get_topic("kafka", name).partitions[0].size_bytes
    million = len(values) / 1e6
    return {"produced": produced, "stored": stored / produced, "served": served / produced,
            "produce_cpu": (middle - before) / million, "consume_cpu": (after - middle) / million}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", action="append", required=True, metavar="NAME=SRC_DIR")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fsync", default="interval")
    args = parser.parse_args()
    variants = [entry.split("=", 1) for entry in args.code]
    values = events(args.messages)
    print(f"{args.messages} messages of {sum(map(len, values)) // len(values)} B, "
          f"{args.batch} a Snappy bundle, fsync {args.fsync}")
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _src in variants}
    for run in range(args.runs):
        for name, src in variants:
            found = one_run(src, args, values)
            results[name].append(found)
            print(f"run {run + 1} {name:>8}: stored {found['stored']:.2f}x, served "
                  f"{found['served']:.2f}x of produced; CPU-s per million: produce "
                  f"{found['produce_cpu']:.3f}, consume {found['consume_cpu']:.3f}", flush=True)
    print(f"\nmedians of {args.runs} runs (bytes as a ratio to the {results[variants[0][0]][0]['produced']:,} "
          "bytes produced, which TANK would store and serve as they are)")
    print(f"{'variant':>8} {'stored':>8} {'served':>8} {'produce CPU-s/M':>16} "
          f"{'consume CPU-s/M':>16}")
    for name, _src in variants:
        rows = results[name]
        med = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
        print(f"{name:>8} {med['stored']:>7.2f}x {med['served']:>7.2f}x "
              f"{med['produce_cpu']:>16.3f} {med['consume_cpu']:>16.3f}")


if __name__ == "__main__":
    main()
