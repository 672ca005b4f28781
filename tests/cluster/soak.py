"""Nemesis cycles under load on a ``harness.LocalCluster``, then the checker: the body of
``benchmarks/cluster_soak.py`` and of the bounded soak test.

A run: topic ``soak`` (3 partitions, RF 3) is created, the ``workload.Workload`` starts
(3 Kafka producers, acks=all, idempotent; one Iggy and one TANK producer; 2 group
consumers), then for each cycle a victim is picked — a node leading a partition and not the
controller (Metadata's word), else any leader — and faulted:

``kill``      kill -9 of the node; restarted on its data once a new leader acknowledged (or
              after ``failover_limit``)
``kill-controller``  the same, of the controller (measured on the partitions it leads; all
              of them when it leads none)
``kill-machine``  kill -9 of the node and its machine's etcd member together; both restarted
``pause``     SIGSTOP for ``pause_seconds``, then SIGCONT
``isolate``   its machine cut off (namespaces mode) until a new leader acknowledged (or
              after ``failover_limit``), then healed

The failover time of a cycle is from the fault to the first acknowledged send on one of the
partitions the victim led, whichever node acknowledged it (a pause shorter than an election:
the resumed victim); None when there was none within ``failover_limit`` of the fault nor of
the heal. It is what a producer sees: after a pause or an isolation its requests already sent
to the old leader wait for the client's request timeout (``workload.REQUEST_WAIT``, 10 s for
every client) before it retries elsewhere, so those cycles measure at least that, or the
pause's length when the paused leader is still the leader on waking. Between cycles the run waits
until every partition has its full ISR again. At the end: the workload stops, the final read
drains every partition from its leader, the nodes stop cleanly, every replica's log is read
from its data directory, and ``logcheck`` judges the whole. Files: ``history.jsonl``,
``final.json``, ``replicas.json``, ``report.json`` and ``kafka-python.log`` (that client's
own log, INFO and up, to tell a stalled producer's cause) in ``out``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.harness import LocalCluster
from cluster.logcheck import Report, check_files
from cluster.workload import (
    History,
    Workload,
    confluent_config,
    create_topic,
    dump_replicas,
    final_read,
)

TOPIC, PARTITIONS = "soak", 3
BROKERS: dict[int, str] = {}  # node id -> Kafka address, as Metadata last told them


@dataclass
class Cycle:
    kind: str
    victim: int  # node id
    partitions: list[int]  # those it led
    failover: float | None  # seconds, None: no acknowledged send within the limit


@dataclass
class SoakResult:
    cycles: list[Cycle] = field(default_factory=list)
    report: Report | None = None
    client_errors: list[str] = field(default_factory=list)  # workload clients stuck or broken

    def lines(self) -> list[str]:
        out = []
        for number, cycle in enumerate(self.cycles, 1):
            seconds = "none" if cycle.failover is None else f"{cycle.failover:.2f} s"
            out.append(f"cycle {number:2d} {cycle.kind:<8} node {cycle.victim} "
                       f"(led {cycle.partitions}): failover {seconds}")
        for kind in sorted({cycle.kind for cycle in self.cycles}):
            times = [c.failover for c in self.cycles if c.kind == kind and c.failover is not None]
            missing = sum(1 for c in self.cycles if c.kind == kind and c.failover is None)
            if times:
                out.append(f"{kind}: {len(times)} failovers, min {min(times):.2f} s, "
                           f"median {sorted(times)[len(times) // 2]:.2f} s, max {max(times):.2f} s"
                           + (f", {missing} without one" if missing else ""))
        if self.report is not None:
            out.append(json.dumps(self.report.summary(), indent=2))
        out.extend(f"workload client: {error}" for error in self.client_errors)
        return out


def topic_state(bootstrap: str) -> dict[int, tuple[int, list[int]]]:
    """Each partition's (leader, ISR) as Metadata tells them, and under -1 the controller's
    id; {} when it cannot be read now."""
    from confluent_kafka.admin import AdminClient

    try:
        metadata = AdminClient(confluent_config(bootstrap)).list_topics(TOPIC, timeout=5)
    except Exception:  # noqa: BLE001 -- during a fault: ask again
        return {}
    topic = metadata.topics.get(TOPIC)
    if topic is None or topic.error is not None:
        return {}
    state = {p: (found.leader, sorted(found.isrs)) for p, found in topic.partitions.items()}
    state[-1] = (metadata.controller_id, [])
    BROKERS.update({broker.id: f"{broker.host}:{broker.port}" for broker in metadata.brokers.values()})
    return state


def wait_until(condition, what: str, limit: float) -> Any:
    """Poll the cluster (outside processes: no event to await) until ``condition()`` is truthy."""
    deadline = time.monotonic() + limit
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"not {what} after {limit:.0f} s")
        time.sleep(0.2)


def full_isr(bootstrap: str, size: int) -> dict[int, tuple[int, list[int]]] | None:
    state = topic_state(bootstrap)
    partitions = {p: s for p, s in state.items() if p >= 0}
    if len(partitions) == PARTITIONS and all(leader >= 0 and len(isr) == size
                                             for leader, isr in partitions.values()):
        return state
    return None


def pick_victim(state: dict[int, tuple[int, list[int]]], controller_wanted: bool = False
                ) -> tuple[int, list[int]]:
    """The node to fault and the partitions it leads: the leader of the most partitions that
    is not the controller (any leader if all are), or the controller when wanted."""
    controller = state[-1][0]
    led: dict[int, list[int]] = {}
    for partition, (leader, _isr) in sorted(state.items()):
        if partition >= 0:
            led.setdefault(leader, []).append(partition)
    if controller_wanted:
        return controller, led.get(controller, [])
    choices = [node for node in sorted(led) if node != controller] or sorted(led)
    victim = max(choices, key=lambda node: len(led[node]))
    return victim, led[victim]


def acknowledged_after(history: History, moment: float, partitions: list[int], limit: float
                       ) -> float | None:
    """Seconds from ``moment`` to the first send acknowledged on one of ``partitions`` after
    it; None when there was none within ``limit`` seconds."""
    try:
        return wait_until(lambda: history.first_ack_after(moment, partitions),
                          "a write acknowledged", limit) - moment
    except TimeoutError:
        return None


def run_soak(cluster: LocalCluster, out: Path, plan: list[str], pause_seconds: float = 5.0,
             failover_limit: float = 60.0, recovery_limit: float = 120.0, settle: float = 2.0,
             log=print, quiet_seconds: float = 0.0) -> SoakResult:
    """Run ``plan`` (a list of "kill" / "kill-controller" / "kill-machine" / "pause" /
    "isolate") on a started cluster, after ``quiet_seconds`` of load without faults."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    bootstrap = cluster.kafka_bootstrap
    create_topic(bootstrap, TOPIC, PARTITIONS, cluster.size)  # RF: every machine
    wait_until(lambda: full_isr(bootstrap, cluster.size), "every partition led with its full ISR",
               recovery_limit)
    history = History(out / "history.jsonl")
    client_log = logging.FileHandler(out / "kafka-python.log")
    client_log.setFormatter(logging.Formatter("%(at)s %(threadName)s %(name)s %(levelname)s %(message)s"))
    client_log.addFilter(lambda record: setattr(record, "at", f"{history.now():.6f}") or True)  # history's clock
    kafka_logger = logging.getLogger("kafka")
    kafka_logger.addHandler(client_log)
    kafka_logger.setLevel(logging.INFO)
    producer_ids = logging.getLogger("kafka.producer.transaction_manager")  # InitProducerId's
    producer_ids.setLevel(logging.DEBUG)  # requests and answers (rare: after a reset)
    workload = Workload(bootstrap, TOPIC, history, partitions=PARTITIONS, producers=3, consumers=2,
                        iggy_nodes=[node.address("tcp") for node in cluster.nodes],
                        tank_nodes=[node.address("tank") for node in cluster.nodes])
    result = SoakResult()
    workload.start()
    try:
        wait_until(lambda: len(history.acks) > 50, "the workload acknowledged", failover_limit)
        if quiet_seconds:
            time.sleep(quiet_seconds)
            log(f"quiet {quiet_seconds:.0f} s: {len(history.acks)} sends acknowledged")
        for kind in plan:
            state = wait_until(lambda: full_isr(bootstrap, cluster.size), "recovered", recovery_limit)
            victim, partitions = pick_victim(state, controller_wanted=kind == "kill-controller")
            index = next(node.node_id - 1 for node in cluster.nodes if node.kafka == BROKERS[victim])
            history.note(f"nemesis {kind} node {victim} (leads {partitions})")
            if kind in ("kill", "kill-controller"):
                cluster.kill9(index)
            elif kind == "kill-machine":
                cluster.kill9_machine(index)
            elif kind == "pause":
                cluster.pause(index)
            elif kind == "isolate":
                cluster.isolate(index)
            else:
                raise ValueError(f"unknown nemesis {kind!r}")
            # failover runs from the fault in place: a send begun between a clock reading
            # taken earlier and the signal could still be answered by the victim
            moment = history.now()
            if kind == "pause":
                time.sleep(pause_seconds)  # the fault's own length
                history.note(f"resume node {victim}")
                cluster.resume(index)
            watched = partitions or list(range(PARTITIONS))  # a controller leading none
            failover = acknowledged_after(history, moment, watched, failover_limit)
            history.note(f"heal {kind} node {victim}")
            if kind.startswith("kill"):
                cluster.restart(index)  # (and its etcd member after kill-machine)
            elif kind == "isolate":
                cluster.heal(index)
            if failover is None:  # no new leader took over: the healed victim answers again?
                failover = acknowledged_after(history, moment, watched, recovery_limit)
            cycle = Cycle(kind, victim, partitions, failover)
            result.cycles.append(cycle)
            log(result.lines()[len(result.cycles) - 1])
        wait_until(lambda: full_isr(bootstrap, cluster.size), "recovered", recovery_limit)
        time.sleep(settle)  # load on a healed cluster before the end
    finally:
        result.client_errors = workload.stop()
        history.close()
        kafka_logger.removeHandler(client_log)
        producer_ids.setLevel(logging.NOTSET)
        client_log.close()
    final = final_read(bootstrap, TOPIC, PARTITIONS)
    for node in cluster.nodes:
        node.stop()
    replicas = dump_replicas({str(node.node_id): node.data_dir for node in cluster.nodes}, TOPIC)
    (out / "final.json").write_text(json.dumps(final))
    (out / "replicas.json").write_text(json.dumps(replicas))
    result.report = check_files(out / "history.jsonl", out / "final.json", out / "replicas.json")
    (out / "report.json").write_text(json.dumps(
        {"cycles": [vars(cycle) for cycle in result.cycles], "report": result.report.summary()}, indent=2))
    return result
