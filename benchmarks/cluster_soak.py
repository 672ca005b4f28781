"""The cluster soak: faults on partition leaders under load, failover seconds per cycle, and
the anomaly checker's verdict on the whole run (issue 30, "Done when" 5 and 6).

Starts a local cluster (``tests/cluster/harness.py``: 3 machines of an etcd member and a rill
node each; ``--mode namespaces`` puts each machine in a network namespace, needed for
isolations, root only), creates topic ``soak`` (3 partitions, RF 3), runs 3 producers
(kafka-python and confluent-kafka, acks=all, idempotent) and 2 group consumers, and then,
one cycle at a time on a leader that is not the controller: ``--kills`` kill -9 (restarted on
its data after the failover), ``--controller-kills`` the same of the controller,
``--machine-kills`` of a leader with its machine's etcd member, ``--pauses`` SIGSTOP for
``--pause-seconds``, ``--isolations`` network isolations (namespaces mode). Prints per cycle the failover seconds (the fault to the
first acknowledged write, begun after the fault, on a partition the victim led), a summary per
kind, and the checker's report (``tests/cluster/logcheck.py``); exits 1 on any anomaly. The
history, final reads, replica dumps and report stay in ``--out``. Every process and namespace
is removed at the end.

    python benchmarks/cluster_soak.py --mode namespaces --kills 20 --pauses 10 --isolations 10
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from cluster.harness import LocalCluster
from cluster.soak import run_soak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("loopback", "namespaces"), default="namespaces")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--controller-kills", type=int, default=3, help="kill -9 of the controller")
    parser.add_argument("--machine-kills", type=int, default=3,
                        help="kill -9 of a leader with its machine's etcd member")
    parser.add_argument("--pauses", type=int, default=10)
    parser.add_argument("--isolations", type=int, default=10)
    parser.add_argument("--pause-seconds", type=float, default=5.0)
    parser.add_argument("--quiet-seconds", type=float, default=0.0,
                        help="seconds of load without faults before the first fault")
    parser.add_argument("--failover-limit", type=float, default=60.0,
                        help="seconds to wait for a new leader's first acknowledgement")
    parser.add_argument("--out", type=Path, help="where the history and report stay (default: a new temp dir)")
    options = parser.parse_args(argv)
    if options.isolations and options.mode != "namespaces":
        parser.error("--isolations needs --mode namespaces (loopback has one network)")
    out = options.out or Path(tempfile.mkdtemp(prefix="rill-soak-"))
    plan = (["kill"] * options.kills + ["kill-controller"] * options.controller_kills
            + ["kill-machine"] * options.machine_kills + ["pause"] * options.pauses
            + ["isolate"] * options.isolations)
    with LocalCluster(out / "cluster", size=3, mode=options.mode,
                      env={"RILL_LOGGING_LEVEL": "info"}) as cluster:
        try:
            result = run_soak(cluster, out / "run", plan, pause_seconds=options.pause_seconds,
                              failover_limit=options.failover_limit,
                              quiet_seconds=options.quiet_seconds)
        finally:  # each node's log (of its last start) stays beside the history
            for number, node in enumerate(cluster.nodes, 1):
                (out / f"node{number}.log").write_text("".join(node.output))
    for line in result.lines()[len(result.cycles):]:  # the cycles were printed as they ended
        print(line)
    print(f"files: {out / 'run'}")
    return 0 if result.report is not None and result.report.valid and not result.client_errors else 1


if __name__ == "__main__":
    sys.exit(main())
