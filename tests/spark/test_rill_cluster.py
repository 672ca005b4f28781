"""Reading a rill cluster (``pyspark_rill.leaders``, the JVM's ``Leaders``): each partition from
its leader, and a leader's kill -9 mid-query ridden out without loss or duplicates; the
at-least-once sink sends each partition's rows to its leader (no node proxies them).

Real parts: a 3-member etcd cluster and 3 ``rill serve`` nodes (``tests/server/cluster``'s
harness), an RF 3 topic of 2 partitions written by a producer while a streaming query reads it
into a file sink, and the leader of partition 1 killed with SIGKILL once the query has read
some of it. The output is then checked record by record against the topic as the surviving
leaders hold it: every record exactly once.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from pyspark.sql import functions as F

from rill import errors
from rill.client import Client, PollingStrategy

sys.path.insert(0, str(Path(__file__).parent.parent / "server" / "cluster"))

from etcd_cluster import EtcdCluster  # noqa: E402
from rill_cluster import RillCluster  # noqa: E402

PARTITIONS = (1, 2)


@pytest.fixture(scope="module")
def etcd(tmp_path_factory):
    cluster = EtcdCluster(tmp_path_factory.mktemp("etcd")).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def nodes(etcd, tmp_path):
    etcd.heal()
    cluster = RillCluster(etcd, tmp_path / "rill", f"spark-{time.time_ns()}").start()
    yield cluster
    cluster.stop()


def _http(node) -> str:
    return node.http_url


class Producer(threading.Thread):
    """Sends numbered messages to both partitions through one node (which proxies to the
    leaders) until stopped; a send that fails during the failover is tried again (it may then
    be stored twice: the check compares the query's output with the topic, not with this)."""

    def __init__(self, address: str) -> None:
        super().__init__(daemon=True)
        self.address = address
        self.stop_event = threading.Event()
        self.sent = 0
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            with Client(self.address) as client:
                client.login_user("iggy", "iggy")
                number = 0
                while not self.stop_event.is_set():
                    for partition in PARTITIONS:
                        batch = [f"{partition}-{number + n}" for n in range(50)]
                        while True:
                            try:
                                client.send_messages("s", "t", batch, partitioning=partition)
                                break
                            except (errors.LeaderNotAvailable, errors.NotLeaderForPartition,
                                    errors.ReplicationTimedOut, errors.NotEnoughReplicas):
                                time.sleep(0.1)
                    number += 50
                    self.sent += 100
                    time.sleep(0.1)  # about 1000 messages a second
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.failure = error


def topic_contents(nodes: RillCluster, leaders: dict[int, int]) -> dict[tuple[int, int], str]:
    """(partition, offset) -> payload of every record below each partition's high watermark,
    read from its leader."""
    found = {}
    for partition in PARTITIONS:
        with nodes.client(leaders[partition]) as client:
            offset = 0
            while True:
                polled = client.poll_messages("s", "t", partition_id=partition,
                                              strategy=PollingStrategy.offset(offset), count=1000)
                if not polled.messages:
                    break
                for message in polled.messages:
                    found[partition, message.offset] = message.payload.decode()
                offset = polled.messages[-1].offset + 1
    return found


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen in {timeout} s"
        time.sleep(0.1)


def test_a_streaming_query_reads_each_partition_from_its_leader_across_a_leader_kill(
        spark, implementation, nodes, tmp_path) -> None:
    with nodes.client(1) as client:
        client.create_stream("s", 1)
        client.create_topic(1, "t", partitions_count=len(PARTITIONS), replication_factor=3)
    victim = nodes.leader_of(1, 1, 1)
    survivor = next(node for node in (1, 2, 3) if node != victim)
    producer = Producer(nodes.nodes[survivor].address("tcp"))
    producer.start()
    # the victim's Iggy address first: the query's first connection dies with it too
    servers = ",".join([nodes.nodes[victim].address("tcp")]
                       + [nodes.nodes[n].address("tcp") for n in (1, 2, 3) if n != victim]
                       + [_http(nodes.nodes[survivor])])
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = (spark.readStream.format("rill")
             .options(servers=servers, username="iggy", password="iggy", stream="s", topic="t",
                      startingOffsets="earliest", maxOffsetsPerTrigger="1000",
                      failoverTimeout="40", **implementation)
             .load().selectExpr("partition", "offset", "cast(value as string) as value")
             .writeStream.format("json").option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="200 milliseconds").start(str(output)))
    try:
        wait_for(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 500
                 or query.exception(), 60, "500 records read")
        nodes.kill(victim)  # SIGKILL
        new_leader = nodes.leader_of(1, 1, 1, other_than=victim, timeout=20)
        sent = producer.sent
        wait_for(lambda: producer.sent >= sent + 500 or producer.failure, 30,
                 "500 more messages after the kill")
        producer.stop_event.set()
        producer.join(30)
        assert producer.failure is None, producer.failure
        query.processAllAvailable()
        assert query.exception() is None, query.exception()
    finally:
        producer.stop_event.set()
        query.stop()
    leaders = {partition: nodes.leader_of(1, 1, partition) for partition in PARTITIONS}
    assert leaders[1] == new_leader or nodes.is_alive(leaders[1])
    expected = topic_contents(nodes, leaders)
    rows = [json.loads(line) for path in sorted(output.glob("part-*"))
            for line in path.read_text().splitlines() if line]
    got = [(row["partition"], row["offset"], row["value"]) for row in rows]
    assert len(got) == len(set(got)), "records read twice"
    assert {(p, o): v for p, o, v in got} == expected
    assert len(expected) >= 1000


def test_the_exactly_once_sink_refuses_a_cluster_and_the_at_least_once_sink_writes_to_it(
        spark, implementation, nodes) -> None:
    with nodes.client(1) as client:
        client.create_stream("s", 1)
        client.create_topic(1, "t", partitions_count=2, replication_factor=3)
    options = {"servers": f"{nodes.nodes[2].address('tcp')},{_http(nodes.nodes[3])}",
               "username": "iggy", "password": "iggy", "stream": "s", "topic": "t",
               **implementation}
    frame = spark.range(100).selectExpr("cast(id as string) as value",
                                        "cast(id % 2 + 1 as int) as partition")
    with pytest.raises(Exception) as refused:
        frame.write.format("rill").options(**options, sinkMode="exactlyOnce").mode("append").save()
    assert "option 'sinkMode': exactlyOnce is not supported on a rill cluster yet" in str(
        refused.value)
    frame.write.format("rill").options(**options, sinkMode="atLeastOnce").mode("append").save()
    written = (spark.read.format("rill").options(**options).load()
               .selectExpr("partition", "cast(value as string) as value").collect())
    assert sorted((row.partition, int(row.value)) for row in written) == sorted(
        (n % 2 + 1, n) for n in range(100))


def send_requests(node) -> float:
    """SEND_MESSAGES requests the node served to clients (its ``/metrics``, every outcome)."""
    text = httpx.get(f"{node.http_url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("rill_requests_total{") and 'command="send_messages"' in line)


def test_the_at_least_once_sink_sends_each_partition_to_its_leader(
        spark, implementation, nodes) -> None:
    with nodes.client(1) as client:
        client.create_stream("s", 1)
        client.create_topic(1, "t", partitions_count=2, replication_factor=3)
    leaders = {partition: nodes.leader_of(1, 1, partition) for partition in PARTITIONS}
    # the node 'servers' names leads neither partition: a send through it would be proxied
    entry = next(node for node in (1, 2, 3) if node not in leaders.values())
    options = {"servers": f"{nodes.nodes[entry].address('tcp')},{_http(nodes.nodes[entry])}",
               "username": "iggy", "password": "iggy", "stream": "s", "topic": "t",
               **implementation}
    before = {node: send_requests(nodes.nodes[node]) for node in (1, 2, 3)}
    # rows naming their partition, and rows without one (balanced), in requests of 16 KB
    frame = spark.range(0, 3000, 1, 2).selectExpr(
        "lpad(cast(id as string), 100, 'x') as value",
        "case when id % 3 = 0 then null else cast(id % 2 + 1 as int) end as partition")
    frame.write.format("rill").options(**options, sinkMode="atLeastOnce",
                                       maxRequestBytes="16384").mode("append").save()
    after = {node: send_requests(nodes.nodes[node]) for node in (1, 2, 3)}
    assert after[entry] == before[entry], "a send went through the entry node (proxied)"
    for partition, leader in leaders.items():
        assert after[leader] > before[leader], f"partition {partition}'s leader got no send"
    written = (spark.read.format("rill").options(**options).load()
               .selectExpr("partition", "cast(value as string) as value").collect())
    assert sorted(int(row.value.lstrip("x")) for row in written) == list(range(3000))
    pinned = {int(row.value.lstrip("x")): row.partition for row in written}
    assert all(pinned[n] == n % 2 + 1 for n in range(3000) if n % 3)
    balanced = [pinned[n] for n in range(3000) if n % 3 == 0]
    assert set(balanced) == {1, 2}  # balanced rows spread over both partitions


def test_the_at_least_once_sink_rides_out_a_leader_kill(spark, implementation, nodes) -> None:
    """A write whose partition 1 leader is killed (SIGKILL) mid-write: its sends go to the new
    leader (the map read again) and the job succeeds with every row stored at least once."""
    with nodes.client(1) as client:
        client.create_stream("s", 1)
        client.create_topic(1, "t", partitions_count=2, replication_factor=3)
    victim = nodes.leader_of(1, 1, 1)
    others = [node for node in (1, 2, 3) if node != victim]
    options = {"servers": ",".join([nodes.nodes[others[0]].address("tcp")]
                                   + [_http(nodes.nodes[node]) for node in others]),
               "username": "iggy", "password": "iggy", "stream": "s", "topic": "t",
               "failoverTimeout": "40", **implementation}
    before = send_requests(nodes.nodes[victim])

    @F.udf("string")
    def slowly(value):  # about 4 s of rows per task: the kill lands mid-write
        time.sleep(0.002)
        return value

    rows = 4000
    frame = spark.range(0, rows, 1, 2).select(
        slowly(F.lpad(F.col("id").cast("string"), 100, "x")).alias("value"),
        (F.col("id") % 2 + 1).cast("int").alias("partition"))
    failures: list[BaseException] = []

    group = f"rides-out-{time.time_ns()}"

    def write() -> None:
        try:
            spark.sparkContext.setJobGroup(group, "the write a leader kill lands in")
            frame.write.format("rill").options(**options, sinkMode="atLeastOnce",
                                               maxRequestBytes="8192").mode("append").save()
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    wait_for(lambda: send_requests(nodes.nodes[victim]) >= before + 5 or not writer.is_alive(),
             90, "sends to partition 1's leader")
    assert writer.is_alive(), f"the write ended before the kill ({failures})"
    nodes.kill(victim)  # SIGKILL
    writer.join(180)
    assert not writer.is_alive() and not failures, failures
    # ridden out by the sink itself: no task attempt failed (and none was retried by Spark)
    tracker = spark.sparkContext.statusTracker()
    stages = [stage for job in tracker.getJobIdsForGroup(group)
              for stage in tracker.getJobInfo(job).stageIds]
    assert stages and sum(tracker.getStageInfo(stage).numFailedTasks for stage in stages) == 0
    leaders = {partition: nodes.leader_of(1, 1, partition, other_than=victim)
               for partition in PARTITIONS}
    stored = topic_contents(nodes, leaders)
    found = {(partition, int(value.lstrip("x"))) for (partition, _), value in stored.items()}
    assert found == {(n % 2 + 1, n) for n in range(rows)}  # every row, on its partition
