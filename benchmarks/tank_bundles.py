"""TANK bundle encode/decode cost: microseconds per 1,000 messages of 100 bytes, C vs Python.

Times ``rill.protocol.tank.bundles``' message loops on one bundle of ``--messages`` messages
(``--size`` bytes each, 8-byte keys on every other message, one timestamp shared by runs of
ten, as TANK's C++ client writes them): ``encode_set`` (columns -> message set) and
``decode_set`` (message set -> keys, values, timestamps, seqs), the C twin (``_bundles``) and the
pure-Python reference on the same input, plus the whole ``encode_bundle`` / ``decode_bundle``
with Snappy. Each figure is the best of ``--repeat`` rounds (the least disturbed by other
processes on the machine), normalised to 1,000 messages. No server, no I/O.

    python benchmarks/tank_bundles.py [--messages 1000] [--size 100] [--repeat 7]
"""

from __future__ import annotations

import argparse
import time

from rill.protocol.tank import bundles


def best_us(function, repeat: int, loops: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(loops):
            function()
        best = min(best, (time.perf_counter() - start) / loops)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    count = args.messages
    values = [bytes([i % 256]) * args.size for i in range(count)]
    keys = [b"key%05d" % i if i % 2 else None for i in range(count)]
    timestamps = [1_700_000_000_000 + i // 10 for i in range(count)]
    message_set = bundles.encode_set_python(keys, values, timestamps, None)
    scale = 1000 / count
    c = bundles.ACCELERATOR
    if c is None:
        raise SystemExit("the C twin (_bundles) is not built: python setup.py build_ext --inplace")
    assert c.encode_set(keys, values, timestamps, None) == message_set
    assert c.decode_set(message_set, count, False, 1, 0) == bundles.decode_set_python(
        message_set, count, False, 1, 0)
    loops_c, loops_py = 200, 10
    rows = [
        ("encode_set", "C", best_us(lambda: c.encode_set(keys, values, timestamps, None),
                                     args.repeat, loops_c)),
        ("encode_set", "Python", best_us(
            lambda: bundles.encode_set_python(keys, values, timestamps, None),
            args.repeat, loops_py)),
        ("decode_set", "C", best_us(lambda: c.decode_set(message_set, count, False, 1, 0),
                                     args.repeat, loops_c)),
        ("decode_set", "Python", best_us(
            lambda: bundles.decode_set_python(message_set, count, False, 1, 0),
            args.repeat, loops_py)),
    ]
    snappy = bundles.encode_bundle(values, keys, timestamps, codec=bundles.CODEC_SNAPPY)
    rows += [
        ("encode_bundle snappy", "C", best_us(
            lambda: bundles.encode_bundle(values, keys, timestamps, codec=1), args.repeat,
            loops_c)),
        ("decode_bundle snappy", "C", best_us(lambda: bundles.decode_bundle(snappy),
                                              args.repeat, loops_c)),
    ]
    print(f"{count} messages of {args.size} bytes; us per 1,000 messages (best of "
          f"{args.repeat})")
    print(f"{'operation':<22} {'impl':<7} {'us/1000 msgs':>13}")
    for name, impl, micros in rows:
        print(f"{name:<22} {impl:<7} {micros * scale:>13.1f}")
    for name in ("encode_set", "decode_set"):
        fast = next(m for n, i, m in rows if n == name and i == "C")
        slow = next(m for n, i, m in rows if n == name and i == "Python")
        print(f"{name}: C is {slow / fast:.1f}x faster")


if __name__ == "__main__":
    main()
