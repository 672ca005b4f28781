"""Where a TANK request's server time goes: rill's server under cProfile, driven the way
``rill bench tank`` drives it (``rill.bench.peers.tank.RillTankPeer``: one Produce of one bundle
per request, then Consume of one bundle per request, one request in flight), then the top
functions by own time and by cumulative time, per request.

The server runs ``rill serve`` under ``cProfile.Profile(time.thread_time)`` (a wrapper the
script writes, given to ``RillServer`` as its interpreter): the event loop's thread's CPU time,
not the wall clock, so a server descheduled on a busy machine is not charged for it; the
profile is written when the server exits after SIGTERM. A second server, started and stopped with no load, is profiled the same way and
subtracted function by function, so the start-up (imports, compiling, the password hash) drops
out and what is left is the requests' own cost. cProfile sees the event loop's thread only (the
append threads run C), and it slows Python calls, so read the shares and the per-request call
counts, not the absolute times.

    .venv/bin/python benchmarks/tank_profile.py --messages 200000 --batch 100
    .venv/bin/python benchmarks/tank_profile.py --phase produce --top 30
"""

from __future__ import annotations

import argparse
import pstats
import sys
import tempfile
import time
from pathlib import Path

from rill.bench.peers import Workload, run_async
from rill.bench.peers.tank import RillTankPeer
from rill.bench.server import RillServer


# the wrapper's program: ``python -c BOOT -m rill serve ...`` runs the module under the profiler
BOOT = """
import cProfile, runpy, sys, time
flag, module, *rest = sys.argv[1:]
sys.argv = [module, *rest]
profiler = cProfile.Profile(time.thread_time)
profiler.enable()
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
except SystemExit:
    pass
finally:
    profiler.disable()
    profiler.dump_stats("{output}")
"""


def profile(messages: int, batch: int, size: int, phase: str, workdir: Path) -> tuple[Path, int]:
    """Run the load against a profiled server (none when ``messages`` is 0); (the profile,
    requests sent)."""
    workdir.mkdir(parents=True, exist_ok=True)
    output = workdir / "server.prof"
    wrapper = workdir / "python-profiled"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c \'{BOOT.format(output=output)}\' "$@"\n')
    wrapper.chmod(0o755)
    server = RillServer(data_dir=workdir / "data", fsync="interval", transports=("tcp",), tank=True,
                        python=str(wrapper))
    peer = RillTankPeer(Workload(max(messages, 1), size, batch))
    requests = 0
    server.start()
    try:
        peer.server, peer.port = server, int(server.addresses["tank"].rsplit(":", 1)[1])
        if not messages:
            time.sleep(1.0)  # the idle server settles as the loaded one did before its load
            return output, 0
        if phase in ("produce", "both"):
            requests += len(run_async(peer.publish).latencies_us)
        else:
            run_async(peer.publish)
        if phase in ("consume", "both"):
            requests += len(run_async(peer.consume).latencies_us)
    finally:
        server.stop()
    return output, requests


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=100, help="messages per bundle (request)")
    parser.add_argument("--size", type=int, default=100, help="payload bytes per message")
    parser.add_argument("--phase", choices=("produce", "consume", "both"), default="both",
                        help="which requests the profile covers (produce runs anyway for consume)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rill-tank-profile-") as workdir:
        path, requests = profile(args.messages, args.batch, args.size, args.phase, Path(workdir) / "load")
        base, _ = profile(0, args.batch, args.size, args.phase, Path(workdir) / "idle")
        loaded, idle = pstats.Stats(str(path)).stats, pstats.Stats(str(base)).stats
        costs = {}
        for key, (_, calls, own, cumulative, _) in loaded.items():
            _, idle_calls, idle_own, idle_cumulative, _ = idle.get(key, (0, 0, 0.0, 0.0, None))
            costs[key] = (calls - idle_calls, own - idle_own, cumulative - idle_cumulative)
        total = sum(own for _, own, _ in costs.values())
        print(f"{requests:,} requests ({args.phase}, {args.batch} × {args.size} B): the server's event-loop "
              f"thread spent {total:.2f} s on them under cProfile, {total / max(requests, 1) * 1e6:.0f} µs "
              "per request (an idle server's profile subtracted)")
        rows = sorted(costs.items(), key=lambda item: item[1][1], reverse=True)[:args.top]
        print(f"{'own µs/req':>10} {'cum µs/req':>10} {'calls/req':>9}  function")
        for (filename, line, name), (calls, own, cumulative) in rows:
            where = f"{Path(filename).name}:{line}" if line else filename
            print(f"{own / requests * 1e6:10.1f} {cumulative / requests * 1e6:10.1f} "
                  f"{calls / requests:9.2f}  {name} ({where})")


if __name__ == "__main__":
    main()
