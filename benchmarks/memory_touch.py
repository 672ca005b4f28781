"""What touching new memory costs on this machine: ms per MiB, chunk by chunk.

Maps ``--mib`` MiB of anonymous memory and writes one byte into each 4 KiB page, timing every
``--chunk`` MiB; the memory is given back at the end. On a VM whose guest reports freed memory
to its host (virtio-balloon free page reporting; ``dmesg`` says "Free page reporting enabled"),
the first chunks may reuse memory freed a moment before (cheap) while the rest is faulted in
from the host again (several times dearer). Page-cache pages a write allocates and a broker's
heap come from the same free memory, so this is part of what any broker's write costs here,
and part of why one benchmark run differs from the next (docs/performance.md section 10.7).

    python benchmarks/memory_touch.py --mib 4096 --chunk 256
"""

from __future__ import annotations

import argparse
import mmap
import statistics
import time

PAGE = 4096
MIB = 1 << 20


def touch(mib: int, chunk: int) -> list[float]:
    """ms per MiB of each ``chunk`` MiB, in order."""
    memory = mmap.mmap(-1, mib * MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        costs = []
        for start in range(0, mib, chunk):
            size = min(chunk, mib - start)
            began = time.perf_counter()
            for offset in range(start * MIB, (start + size) * MIB, PAGE):
                memory[offset] = 1
            costs.append((time.perf_counter() - began) * 1000 / size)
        return costs
    finally:
        memory.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=4096, help="MiB to touch")
    parser.add_argument("--chunk", type=int, default=256, help="MiB per timed chunk")
    options = parser.parse_args()
    if options.mib < 1 or options.chunk < 1:
        parser.error("--mib and --chunk must be positive")
    costs = touch(options.mib, options.chunk)
    print(f"ms per MiB, {options.chunk} MiB at a time: "
          + " ".join(f"{cost:.2f}" for cost in costs))
    print(f"first chunk {costs[0]:.2f}, median {statistics.median(costs):.2f}, "
          f"last {costs[-1]:.2f}")


if __name__ == "__main__":
    main()
