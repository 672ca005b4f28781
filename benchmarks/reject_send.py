"""Cost of stamping a SEND region: accepted, or rejected for a malformed tail (issue 10, item 4).

Times ``records.stamp_batch`` (what the server runs for a SEND, C twin when built) on three
regions of about 59 MB: 2.3 million one-byte messages (valid), the same with a malformed tail,
and one message whose header map has 3.5 million entries with a broken last one. Each code
variant (``--code NAME=SRC_DIR``, first on ``PYTHONPATH``) runs in its own process, the
variants interleaved run by run; prints the median seconds and the ratio to the first variant.

    python benchmarks/reject_send.py --code main=/tmp/rill-base/src --code new=src --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_WORKER = r"""
import json, struct, sys, time
from rill.server.storage.formats import iggy_v1 as records
u32 = struct.Struct("<I").pack
message = b"\x01" * 16 + u32(0) + u32(1) + b"m"
valid = message * 2_350_000
tail = valid + bytes(16) + u32(0) + u32(9) + b"short"
entries = b"".join(u32(7) + b"h%06d" % n + b"\x01" + u32(1) + b"v" for n in range(3_500_000))
entries += u32(7) + b"broken"
headers = bytes(16) + u32(len(entries)) + entries + u32(1) + b"p"
found = {}
for name, region in (("accepted", valid), ("malformed tail", tail), ("3.5M headers", headers)):
    started = time.perf_counter()
    try:
        records.stamp_batch(region, 0, 1_700_000_000_000_000, 0, 0)
    except Exception as error:
        pass
    found[name] = time.perf_counter() - started
print(json.dumps(found))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", action="append", required=True, metavar="NAME=SRC_DIR")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    variants = {name: os.path.abspath(path)
                for name, path in (item.split("=", 1) for item in args.code)}
    times: dict[str, dict[str, list[float]]] = {name: {} for name in variants}
    for run in range(1, args.runs + 1):
        for name, code in variants.items():
            output = subprocess.run([sys.executable, "-c", _WORKER], check=True, text=True,
                                    capture_output=True, env={**os.environ, "PYTHONPATH": code})
            found = json.loads(output.stdout)
            for case, seconds in found.items():
                times[name].setdefault(case, []).append(seconds)
            print(f"run {run} {name:>8}: " + " | ".join(
                f"{case} {seconds:.3f} s" for case, seconds in found.items()), flush=True)
    baseline = next(iter(variants))
    print(f"median of {args.runs} runs; ratio to {baseline}")
    for name in variants:
        for case, values in times[name].items():
            median = statistics.median(values)
            ratio = median / statistics.median(times[baseline][case])
            print(f"{name:>8} {case:>15}: {median:8.3f} s (x{ratio:.3f})")


if __name__ == "__main__":
    main()
