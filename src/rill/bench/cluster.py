"""``rill bench cluster``: what replication costs, and how long a leader's crash stops writes.

Owns: ``ClusterBenchOptions`` (and ``validate``) and ``run_cluster(options)``, which starts a
local cluster (``cluster_launch.LocalCluster``: etcd of 1 or 3 members and 3 rill nodes) unless
``http`` names an existing one, runs the two parts below and returns the report's parts
({"scenarios", "summary": [throughput table, failover table], "cluster"}).

1. Throughput. Each case runs on a fresh topic of 3 partitions: 3 producers (one per partition,
   each its own process) send ``batches`` batches to their partition's leader, then 3 consumers
   read everything back from it. Iggy: the bench's own producers and offset consumers
   (``rill.bench.actors``) connected to the leader the cluster map names (``GET /cluster`` read
   with the SDK's ``ClusterMap``, as ``ClusterRouting`` routes); a SEND on a replicated topic
   waits for the ISR. Kafka: confluent-kafka clients (``cluster_kafka``) that follow Metadata.
   The cases: Iggy RF 1, Iggy RF 3 (acks=all), Kafka RF 1 acks=all (the clients' default),
   Kafka RF 3 acks=1, Kafka RF 3 acks=all. Every case's ratio is its msg/s over its protocol's
   RF 1 case **in the same run**; the table gives the median over ``runs`` of each figure.
2. Failover (a cluster the bench started only). Per cycle, a fresh 3-partition RF 3 topic and
   3 SDK producers (``ClusterRouting``, one per partition, acks=all as every Iggy SEND on a
   replicated topic); once each has an acknowledged write, kill -9 a node that leads one of its
   partitions and is not the controller (``GET /cluster`` names both). A cycle's figure is the
   seconds from the kill to the acknowledgement of the first write begun after the kill on
   each partition the node led (the latest of those when it led several): writes in flight at
   the kill are not counted. The node is then restarted (once the cluster dropped it) and the
   cycle ends when every partition has its full ISR again. Median and max over ``failovers``.

Every figure is measured, never assumed; MB = 10**6 bytes of payload.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rill import errors
from rill.bench.actors import ActorSpec, send_region
from rill.bench.cpu import CpuMeter
from rill.bench.cluster_kafka import (
    KafkaActor,
    create_topic,
    delete_topic,
    run_kafka_actors,
    wait_in_sync,
)
from rill.bench.options import FSYNC_POLICIES, MAX_STREAM_ID, OptionsError
from rill.bench.results import scenario_report
from rill.bench.runner import BenchError, run_actors

PARTITIONS = 3
READY_TIMEOUT = 60.0  # seconds for a topic's leaders and ISR, or a dropped member, to show
RETRY_PAUSE = 0.01  # seconds a failover producer waits after a refused or failed write


@dataclass(frozen=True)
class Case:
    key: str
    protocol: str  # "iggy" | "kafka"
    replication_factor: int
    acks: str  # what the producer asks for ("all" | "1"), as the table shows it
    label: str


CASES = (
    Case("iggy-rf1", "iggy", 1, "-", "Iggy SEND, RF 1"),
    Case("iggy-rf3-all", "iggy", 3, "all", "Iggy SEND, RF 3 (waits for the ISR)"),
    Case("kafka-rf1", "kafka", 1, "all", "Kafka, RF 1, acks=-1 (default)"),
    Case("kafka-rf3-1", "kafka", 3, "1", "Kafka, RF 3, acks=1"),
    Case("kafka-rf3-all", "kafka", 3, "all", "Kafka, RF 3, acks=-1"),
)
PROTOCOLS = ("iggy", "kafka")
THROUGHPUT_COLUMNS = ("Case", "RF", "acks", "send msg/s", "send MB/s", "send ÷ RF 1",
                      "read msg/s", "read MB/s", "read ÷ RF 1", "server CPU-s/GB sent")
FAILOVER_COLUMNS = ("Cycle", "Killed node", "Controller", "Partitions it led", "Seconds to a write",
                    "Failed writes")


@dataclass
class ClusterBenchOptions:
    messages_per_batch: int = 1000
    message_size: int = 1000
    batches: int = 100  # per producer: 100 MB each at the default sizes
    # Iggy producers on each partition, each with one SEND in flight (rill's SDK waits for each
    # answer: more of them keep more batches in flight, as a Kafka client's in-flight requests do)
    producers_per_partition: int = 1
    # batches each Kafka producer keeps unanswered at most; 1 waits for each answer, as rill's
    # Iggy SDK producers do (Kafka's Java client allows 5 by default)
    in_flight: int = 1
    runs: int = 3
    failovers: int | None = None  # None: 1 on a cluster the bench starts, 0 on an existing one
    etcd_members: int = 3
    http: str | None = None  # an existing cluster: any node's HTTP API
    bootstrap: str | None = None  # its Kafka bootstrap (default: a member's kafka listener)
    protocols: tuple[str, ...] = PROTOCOLS
    fsync: str = "interval"
    username: str = "iggy"
    password: str = "iggy"
    start_stream_id: int = 3_100_000
    progress: bool = True
    request_timeout: float = 60.0

    @property
    def failover_cycles(self) -> int:
        return (0 if self.http else 1) if self.failovers is None else self.failovers

    def report_options(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["password"] = "***"
        values["failovers"] = self.failover_cycles
        return values


_ADDRESS = re.compile(r"^[^\s:/]+:\d{1,5}$")


def validate(options: ClusterBenchOptions) -> None:
    """Raise ``OptionsError`` (one line) when ``options`` cannot run."""
    for name, flag in (("messages_per_batch", "--messages-per-batch"), ("message_size", "--message-size"),
                       ("batches", "--batches"), ("runs", "--runs"),
                       ("producers_per_partition", "--producers-per-partition"),
                       ("in_flight", "--in-flight")):
        value = getattr(options, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise OptionsError(f"{flag} must be a positive whole number (got {value!r})")
    if options.failovers is not None and options.failovers < 0:
        raise OptionsError(f"--failovers must be 0 or more (got {options.failovers})")
    if options.etcd_members not in (1, 3):
        raise OptionsError(f"--etcd-members must be 1 or 3 (got {options.etcd_members})")
    for value, flag in ((options.http, "--http"), (options.bootstrap, "--bootstrap")):
        if value is not None and not _ADDRESS.match(value):
            raise OptionsError(f"{flag} must be HOST:PORT (got {value!r})")
    if options.bootstrap and not options.http:
        raise OptionsError("--bootstrap needs --http too (the cluster map and the Iggy side come from it)")
    if options.http and options.failover_cycles:
        raise OptionsError("--failovers needs a cluster the bench starts (it kills a node): "
                           "give --failovers 0 with --http")
    unknown = [name for name in options.protocols if name not in PROTOCOLS]
    if unknown or not options.protocols:
        raise OptionsError(f"--protocols must be some of {','.join(PROTOCOLS)} (got {','.join(options.protocols)})")
    if options.fsync not in FSYNC_POLICIES:
        raise OptionsError(f"unknown fsync policy {options.fsync!r} (known: {', '.join(FSYNC_POLICIES)})")
    last = options.start_stream_id + len(CASES) * options.runs + 100 + options.failover_cycles
    if options.start_stream_id < 0 or last > MAX_STREAM_ID:
        raise OptionsError("--start-stream-id leaves no room for the bench's streams under 2**32")


# --- the cluster as the bench sees it ------------------------------------------------------------


@dataclass
class Target:
    """Where the run goes: HTTP addresses to read ``GET /cluster`` from, a Kafka bootstrap,
    and (a cluster the bench started) the launcher that can kill and restart nodes."""

    http: list[str]
    bootstrap: str | None
    label: str
    launcher: Any = None  # cluster_launch.LocalCluster

    def live_http(self) -> list[str]:
        if self.launcher is None:
            return self.http
        return [node.addresses["http"] for node in self.launcher.nodes.values() if node.running]


async def _client(address: str, transport: str, options: ClusterBenchOptions, http: str | None = None) -> Any:
    from rill.client import AsyncClient, ClusterRouting

    client = AsyncClient(address, transport=transport, reconnect=False, timeout=options.request_timeout,
                         cluster=ClusterRouting(http) if http else None)
    await client.connect()
    try:
        await client.login_user(options.username, options.password)
    except BaseException:
        await client.close()
        raise
    return client


async def cluster_status(target: Target, options: ClusterBenchOptions) -> dict[str, Any]:
    """``GET /cluster`` of the first live node that answers."""
    failure: Exception | None = None
    for address in target.live_http():
        try:
            client = await _client(address, "http", options)
        except (errors.CannotEstablishConnection, errors.Disconnected, OSError) as error:
            failure = error
            continue
        try:
            status = await client.get_cluster()
        finally:
            await client.close()
        if status.get("mode") != "cluster":
            raise BenchError(f"{address} is a standalone server, not a cluster node")
        return status
    raise BenchError(f"no cluster node answered GET /cluster: {failure}")


def _rows(status: dict[str, Any], stream_id: int) -> list[dict[str, Any]]:
    return sorted((row for row in status["partitions"] if row["stream_id"] == stream_id and row["topic_id"] == 1),
                  key=lambda row: row["partition_id"])


def _in_sync(rows: list[dict[str, Any]], replication_factor: int) -> bool:
    return len(rows) == PARTITIONS and all(
        row["leader"] is not None and len(row["replicas"]) == replication_factor
        and set(row["isr"]) == set(row["replicas"]) and not row.get("offline") for row in rows)


async def wait_until(what: str, check: Callable[[dict[str, Any]], bool], target: Target,
                     options: ClusterBenchOptions, timeout: float = READY_TIMEOUT) -> dict[str, Any]:
    """Read ``GET /cluster`` until ``check(status)``; BenchError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        status = await cluster_status(target, options)
        if check(status):
            return status
        if time.monotonic() > deadline:
            raise BenchError(f"{what} within {timeout:g} s")
        await asyncio.sleep(0.1)  # the cluster's state, read from its HTTP API: polled


async def _create_topic(target: Target, options: ClusterBenchOptions, stream_id: int,
                        replication_factor: int) -> dict[int, str]:
    """A stream with topic 1 of 3 partitions; returns {partition: its leader's iggy_tcp}."""
    from rill.client.cluster import ClusterMap

    status = await cluster_status(target, options)
    home = _listener(status, status["node_id"], "iggy_tcp")
    client = await _client(home, "tcp", options)
    try:
        if await client.get_stream(stream_id) is not None:
            await client.delete_stream(stream_id)
        await client.create_stream(f"bench-cluster-{stream_id}", stream_id)
        await client.create_topic(stream_id, "topic-1", PARTITIONS, replication_factor=replication_factor,
                                  topic_id=1)
    finally:
        await client.close()
    status = await wait_until(f"stream {stream_id}: no leader with a full ISR on every partition",
                              lambda status: _in_sync(_rows(status, stream_id), replication_factor),
                              target, options)
    routes = ClusterMap.from_status(status)
    leaders = {}
    for partition in range(1, PARTITIONS + 1):
        leader = routes.leader_of((str(stream_id), "1", partition))
        address = None if leader is None else routes.address(leader, "iggy_tcp")
        if address is None:
            raise BenchError(f"stream {stream_id} partition {partition}: no leader's iggy_tcp listener known")
        leaders[partition] = address
    return leaders


def _listener(status: dict[str, Any], node_id: int | None, name: str) -> str:
    for member in status["members"]:
        if member["node_id"] == node_id and member["listeners"].get(name):
            return str(member["listeners"][name])
    for member in status["members"]:  # the node asked has none: any member's
        if member["listeners"].get(name):
            return str(member["listeners"][name])
    raise BenchError(f"no cluster member has a {name} listener")


async def _delete_stream(target: Target, options: ClusterBenchOptions, stream_id: int) -> None:
    status = await cluster_status(target, options)
    client = await _client(_listener(status, status["controller_id"], "iggy_tcp"), "tcp", options)
    try:
        await client.delete_stream(stream_id)
    except errors.StreamIdNotFound:
        pass
    finally:
        await client.close()


# --- throughput ----------------------------------------------------------------------------------


def _node_meter(target: Target) -> CpuMeter | None:
    """The CPU of the nodes of a cluster the bench started (None for an existing one)."""
    if target.launcher is None:
        return None
    meter = CpuMeter([node.process.pid for node in target.launcher.nodes.values()
                      if node.running and node.process is not None])
    return meter or None


def _run_iggy_case(target: Target, options: ClusterBenchOptions, case: Case, stream_id: int
                   ) -> tuple[list[Any], float | None]:
    """The case's actors' results, and the nodes' CPU seconds over the send phase (None:
    not measured)."""
    meter = _node_meter(target)
    leaders = asyncio.run(_create_topic(target, options, stream_id, case.replication_factor))
    common: dict[str, Any] = {
        "transport": "tcp", "username": options.username, "password": options.password,
        "stream_id": stream_id, "messages_per_batch": options.messages_per_batch,
        "message_size": options.message_size, "batches": options.batches, "duration": None,
        "warmup": 0.0, "request_timeout": options.request_timeout,
    }
    try:
        each = options.producers_per_partition
        placed = [(partition, number) for partition in sorted(leaders) for number in range(1, each + 1)]
        producers = [ActorSpec(slot=index, name=f"producer-{partition}" + (f"-{number}" if each > 1 else ""),
                               kind="producer", role="producer", address=leaders[partition],
                               partitions=(partition,), **common)
                     for index, (partition, number) in enumerate(placed)]
        started = meter() if meter else None
        sent = run_actors(producers, title=f"{case.label}: send", progress=options.progress)
        send_cpu = meter() - started if meter and started is not None else None
        consumers = [ActorSpec(slot=index, name=f"consumer-{partition}", kind="consumer", role="consumer",
                               address=leaders[partition], partitions=(partition,), consumer_id=partition,
                               **{**common, "batches": options.batches * each})
                     for index, partition in enumerate(sorted(leaders))]
        read = run_actors(consumers, title=f"{case.label}: read", progress=options.progress)
    finally:
        asyncio.run(_delete_stream(target, options, stream_id))
    return [*sent, *read], send_cpu


def _run_kafka_case(target: Target, options: ClusterBenchOptions, case: Case, topic: str
                    ) -> tuple[list[Any], float | None]:
    assert target.bootstrap is not None
    meter = _node_meter(target)
    create_topic(target.bootstrap, topic, PARTITIONS, case.replication_factor)
    try:
        wait_in_sync(target.bootstrap, topic, PARTITIONS, case.replication_factor)
        actors = [KafkaActor(f"{kind}-{partition + 1}", kind, target.bootstrap, topic, partition, case.acks,
                             options.messages_per_batch, options.message_size, options.batches,
                             options.in_flight)
                  for kind in ("producer", "consumer") for partition in range(PARTITIONS)]
        started = meter() if meter else None
        sent = run_kafka_actors([actor for actor in actors if actor.kind == "producer"])
        send_cpu = meter() - started if meter and started is not None else None
        read = run_kafka_actors([actor for actor in actors if actor.kind == "consumer"])
    finally:
        delete_topic(target.bootstrap, topic)
    return [*sent, *read], send_cpu


def run_throughput(target: Target, options: ClusterBenchOptions) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every case, ``runs`` times; returns the scenario reports and the table."""
    cases = [case for case in CASES if case.protocol in options.protocols]
    scenarios: list[dict[str, Any]] = []
    figures: dict[str, list[dict[str, float]]] = {case.key: [] for case in cases}
    cpu_per_gb: dict[str, list[float | None]] = {case.key: [] for case in cases}
    stream_id = options.start_stream_id
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
    for run in range(1, options.runs + 1):
        this_run: dict[str, dict[str, Any]] = {}
        for case in cases:
            stream_id += 1
            if case.protocol == "iggy":
                actors, send_cpu = _run_iggy_case(target, options, case, stream_id)
                producers = PARTITIONS * options.producers_per_partition
            else:
                actors, send_cpu = _run_kafka_case(target, options, case,
                                                   f"rill-bench-cluster-{stamp}-{run}-{case.key}")
                producers = PARTITIONS
            sent_gb = producers * options.batches * options.messages_per_batch * options.message_size / 1e9
            cpu_per_gb[case.key].append(None if send_cpu is None else send_cpu / sent_gb)
            report_options = {**options.report_options(), "case": case.key, "run": run,
                              "replication_factor": case.replication_factor, "acks": case.acks,
                              "transport": "kafka" if case.protocol == "kafka" else "tcp",
                              "producers": PARTITIONS, "consumers": PARTITIONS, "partitions": PARTITIONS,
                              "server": target.label}
            scenario = scenario_report(f"cluster {case.key}", report_options, actors)
            scenario["label"] = f"{case.label}, run {run}"
            scenarios.append(scenario)
            this_run[case.key] = scenario["overall"]
        for case in cases:
            overall, base = this_run[case.key], this_run[f"{case.protocol}-rf1"]
            figures[case.key].append({
                "send_msg": overall["producers"]["msg_per_s"], "send_mb": overall["producers"]["mb_per_s"],
                "read_msg": overall["consumers"]["msg_per_s"], "read_mb": overall["consumers"]["mb_per_s"],
                "send_ratio": _ratio(overall["producers"]["msg_per_s"], base["producers"]["msg_per_s"]),
                "read_ratio": _ratio(overall["consumers"]["msg_per_s"], base["consumers"]["msg_per_s"]),
            })
    rows = []
    medians: dict[str, dict[str, float]] = {}
    for case in cases:
        median = {key: statistics.median(run[key] for run in figures[case.key]) for key in figures[case.key][0]}
        medians[case.key] = median
        rows.append([case.label, case.replication_factor, case.acks, median["send_msg"], median["send_mb"],
                     _ratio_cell(median["send_ratio"], [run["send_ratio"] for run in figures[case.key]]),
                     median["read_msg"], median["read_mb"],
                     _ratio_cell(median["read_ratio"], [run["read_ratio"] for run in figures[case.key]]),
                     _cpu_cell(cpu_per_gb[case.key])])
    table = {"title": f"Cluster throughput: 3 partitions, 3 producers then 3 consumers, median of "
                      f"{options.runs} run{'s' if options.runs > 1 else ''}",
             "columns": list(THROUGHPUT_COLUMNS), "rows": rows,
             "notes": ["÷ RF 1: the case's msg/s over its protocol's RF 1 case in the same run (median of runs).",
                       (f"{options.batches} batches of {options.messages_per_batch} × {options.message_size} B "
                        "per producer; every producer and consumer talks to its partition's leader; "
                        f"a Kafka producer keeps {options.in_flight} batch{'es' if options.in_flight > 1 else ''} "
                        f"in flight at most, an Iggy producer one ({options.producers_per_partition} "
                        "per partition).")],
             "figures": {"medians": medians, "runs": figures, "server_cpu_s_per_gb_sent": cpu_per_gb}}
    table["notes"].append("server CPU-s/GB sent: the 3 nodes' CPU seconds (user + system) over the "
                          "send phase per GB of payload sent (a cluster the bench started only).")
    return scenarios, table


def _cpu_cell(values: list[float | None]) -> Any:
    measured = [value for value in values if value is not None]
    return round(statistics.median(measured), 2) if measured else "-"


def _ratio_cell(median: float, runs: list[float]) -> dict[str, Any]:
    """A ratio cell of the report (``results.new_report``): the median, each run in its title."""
    return {"ratio": round(median, 3), "text": f"{median:.3f}",
            "title": "per run: " + ", ".join(f"{value:.3f}" for value in runs)}


def _ratio(value: float, base: float) -> float:
    return value / base if base > 0 else math.nan


# --- failover ------------------------------------------------------------------------------------


class _Producers:
    """3 SDK producers with leader routing, one per partition, writing until stopped; each
    acknowledged write's (began, acknowledged) on ``time.monotonic``."""

    def __init__(self, target: Target, options: ClusterBenchOptions, stream_id: int, home: str, http: str):
        self.target, self.options, self.stream_id, self.home, self.http = target, options, stream_id, home, http
        self.acks: dict[int, list[tuple[float, float]]] = {partition: [] for partition in range(1, PARTITIONS + 1)}
        self.failed = 0
        self.stopping = asyncio.Event()
        self.changed = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        region = send_region(self.options.messages_per_batch, self.options.message_size)
        clients: list[Any] = []
        try:
            for _ in self.acks:
                clients.append(await _client(self.home, "tcp", self.options, self.http))
        except BaseException:
            for client in clients:
                await client.close()
            raise
        self.tasks = [asyncio.create_task(self._produce(client, partition, region))
                      for client, partition in zip(clients, self.acks)]

    async def _produce(self, client: Any, partition: int, region: bytes) -> None:
        clock = time.monotonic
        try:
            while not self.stopping.is_set():
                began = clock()
                try:
                    await client.send_messages_raw(self.stream_id, 1, partition, region)
                except (errors.RillError, OSError, TimeoutError):
                    self.failed += 1
                    await asyncio.sleep(RETRY_PAUSE)
                    continue
                self.acks[partition].append((began, clock()))
                self.changed.set()
        finally:
            await client.close()

    async def wait_for(self, check: Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"{what} within {timeout:g} s")
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except TimeoutError:
                pass

    def first_ack_after(self, partition: int, moment: float) -> float | None:
        return next((acknowledged for began, acknowledged in self.acks[partition] if began >= moment), None)

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def _failover_cycle(target: Target, options: ClusterBenchOptions, cycle: int, stream_id: int) -> dict[str, Any]:
    cluster = target.launcher
    await _create_topic(target, options, stream_id, 3)
    status = await cluster_status(target, options)
    controller = status["controller_id"]
    led: dict[int, list[int]] = {}
    for row in _rows(status, stream_id):
        led.setdefault(row["leader"], []).append(row["partition_id"])
    victims = sorted(node for node in led if node != controller)
    if not victims:
        raise BenchError(f"failover cycle {cycle}: the controller (node {controller}) leads every partition; "
                         "no other leader to kill")
    victim = victims[(cycle - 1) % len(victims)]  # cycles take turns when several qualify
    partitions = led[victim]
    producers = _Producers(target, options, stream_id, _listener(status, controller, "iggy_tcp"),
                           _listener(status, controller, "http"))
    await producers.start()
    try:
        await producers.wait_for(lambda: all(producers.acks.values()),
                                 f"failover cycle {cycle}: not every producer had a write acknowledged",
                                 READY_TIMEOUT)
        failed_before = producers.failed
        killed_at = time.monotonic()
        cluster.kill(victim)  # SIGKILL, and reaped: the node is gone when this returns
        dead_at = time.monotonic()
        await producers.wait_for(
            lambda: all(producers.first_ack_after(partition, dead_at) is not None for partition in partitions),
            f"failover cycle {cycle}: no write acknowledged on the partitions node {victim} led",
            READY_TIMEOUT)
        per_partition = {partition: producers.first_ack_after(partition, dead_at) - killed_at  # type: ignore[operator]
                         for partition in partitions}
        failed = producers.failed - failed_before
    finally:
        await producers.stop()
    await wait_until(f"failover cycle {cycle}: node {victim} stayed a member",
                     lambda status: victim not in [member["node_id"] for member in status["members"]],
                     target, options)
    await asyncio.to_thread(cluster.restart, victim)
    await wait_until(f"failover cycle {cycle}: the ISR did not become full again after node {victim} restarted",
                     lambda status: _in_sync(_rows(status, stream_id), 3), target, options)
    await _delete_stream(target, options, stream_id)
    return {"cycle": cycle, "killed": victim, "controller": controller, "partitions": partitions,
            "seconds": max(per_partition.values()),
            "per_partition": {str(partition): seconds for partition, seconds in per_partition.items()},
            "failed_writes": failed}


def run_failover(target: Target, options: ClusterBenchOptions) -> dict[str, Any]:
    cycles = []
    for cycle in range(1, options.failover_cycles + 1):
        stream_id = options.start_stream_id + len(CASES) * options.runs + 100 + cycle
        cycles.append(asyncio.run(_failover_cycle(target, options, cycle, stream_id)))
    seconds = [cycle["seconds"] for cycle in cycles]
    rows = [[cycle["cycle"], cycle["killed"], cycle["controller"], ",".join(map(str, cycle["partitions"])),
             round(cycle["seconds"], 3), cycle["failed_writes"]] for cycle in cycles]
    rows.append(["median", "", "", "", round(statistics.median(seconds), 3), ""])
    rows.append(["max", "", "", "", round(max(seconds), 3), ""])
    return {"title": f"Failover under load: kill -9 of a leader (not the controller), {len(cycles)} "
                     f"cycle{'s' if len(cycles) > 1 else ''}",
            "columns": list(FAILOVER_COLUMNS), "rows": rows,
            "notes": [("Seconds from the kill to the acknowledgement of the first write begun after it on "
                       "each partition the node led (the latest of them); 3 SDK producers, acks=all."),
                      "Between cycles the node is restarted and the partitions get their full ISR back."],
            "figures": {"cycles": cycles, "median": statistics.median(seconds), "max": max(seconds)}}


# --- the whole run --------------------------------------------------------------------------------


def run_cluster(options: ClusterBenchOptions) -> dict[str, Any]:
    """Validate, start (or find) the cluster, run throughput then failover; the report's parts."""
    from rill.bench.cluster_launch import LocalCluster

    validate(options)
    if "kafka" in options.protocols:
        import importlib.util

        if importlib.util.find_spec("confluent_kafka") is None:
            raise OptionsError("the Kafka cases need confluent-kafka (pip install 'rill[bench]'), "
                               "or give --protocols iggy")
    if options.http:
        target = Target([options.http], options.bootstrap, f"existing cluster {options.http}")
        if "kafka" in options.protocols and target.bootstrap is None:
            status = asyncio.run(cluster_status(target, options))
            target.bootstrap = _listener(status, status["node_id"], "kafka")
        return _run(target, options)
    with LocalCluster(options.etcd_members, options.fsync) as launcher:
        first = launcher.nodes[1].addresses
        target = Target([first["http"]], first["kafka"], launcher.describe(), launcher)
        result = _run(target, options)
    # what the bench started, every one stopped by now (a test checks they are gone)
    result["cluster"].update(pids=launcher.pids, directory=str(launcher.root))
    return result


def _run(target: Target, options: ClusterBenchOptions) -> dict[str, Any]:
    scenarios, throughput = run_throughput(target, options)
    tables = [throughput]
    if options.failover_cycles:
        tables.append(run_failover(target, options))
    return {"scenarios": scenarios, "summary": tables,
            "cluster": {"label": target.label, "pids": [], "directory": None,
                        "options": options.report_options()}}
