"""Three real rill nodes over a real etcd cluster (``cluster.node``): replicated topics created
from any node, byte-identical replicas, leaders replaced after a kill, a restarted node caught
up and back in the ISR, and an etcd quorum loss that the data path rides out."""

from __future__ import annotations

import hashlib
import itertools
import time

import pytest
from rill_cluster import RillCluster

from rill import errors
from rill.client import PollingStrategy

_names = itertools.count()


def wait_for(check, timeout: float = 15.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what} did not hold in {timeout} s"
        time.sleep(0.05)


def segment_digests(cluster: RillCluster, node_id: int, partition_id: int) -> list[tuple[str, str]]:
    directory = cluster.directory / f"node{node_id}" / "streams" / "1" / "topics" / "1" / \
        "partitions" / str(partition_id)
    return [(path.name, hashlib.sha256(path.read_bytes()).hexdigest())
            for path in sorted(directory.glob("*.log"))]


def send_to_leader(cluster: RillCluster, clients: dict, partition_id: int, payloads: list[str]
                   ) -> int:
    leader = cluster.leader_of(1, 1, partition_id)
    clients[leader].send_messages(1, 1, payloads, partitioning=partition_id)
    return leader


def test_each_start_line_names_the_cluster_the_node_and_the_controller(cluster) -> None:
    controllers = set()
    for node_id in (1, 2, 3):
        line = wait_for(lambda: next((line for line in cluster.nodes[node_id].output
                                      if " serving " in line), None),
                        what=f"node {node_id}'s start line")  # (logged after the listening lines)
        assert f"cluster {cluster.name!r} node {node_id} (member epoch " in line, line
        assert ", 3 members)" in line or node_id < 3, line
        controllers.add(line.split("controller ")[-1].split(";")[0].strip())
    assert controllers & {"node 1", "node 2", "node 3"}, controllers


def test_a_replicated_topic_created_on_any_node_exists_on_every_node(cluster) -> None:
    with cluster.client(2) as client:
        client.create_stream("s", 1)
        client.create_topic(1, "t", partitions_count=3, replication_factor=3)
    for node_id in (1, 2, 3):
        with cluster.client(node_id) as client:
            topic = client.get_topic(1, 1)
            assert topic is not None and topic.topic.name == "t"
            assert topic.topic.replication_factor == 3 and len(topic.partitions) == 3
    states = [cluster.state(1, 1, p) for p in (1, 2, 3)]
    assert sorted(state["leader"] for state in states) == [1, 2, 3]  # spread round robin
    assert all(sorted(state["isr"]) == [1, 2, 3] and state["leader_epoch"] == 1
               for state in states)


def test_a_topic_cannot_have_more_replicas_than_live_nodes(cluster) -> None:
    with cluster.client(1) as client:
        client.create_stream("s", 1)
        with pytest.raises(errors.RillError):
            client.create_topic(1, "t", partitions_count=1, replication_factor=4)
        assert client.get_topic(1, 1) is None


def test_every_replica_holds_the_leaders_bytes(cluster) -> None:
    clients = {node_id: cluster.client(node_id) for node_id in (1, 2, 3)}
    clients[1].create_stream("s", 1)
    clients[1].create_topic(1, "t", partitions_count=3, replication_factor=3)
    for partition_id in (1, 2, 3):
        for batch in range(10):
            send_to_leader(cluster, clients, partition_id,
                           [f"{partition_id}-{batch}-{n}" for n in range(20)])
    for partition_id in (1, 2, 3):
        wait_for(lambda: len({tuple(segment_digests(cluster, n, partition_id))
                              for n in (1, 2, 3)}) == 1,
                 what=f"partition {partition_id}'s replicas to match")
        assert segment_digests(cluster, 1, partition_id)  # (files were compared)
        leader = cluster.leader_of(1, 1, partition_id)
        polled = clients[leader].poll_messages(1, 1, 1, partition_id=partition_id,
                                               strategy=PollingStrategy.offset(0), count=1000)
        assert [m.payload.decode() for m in polled.messages] == [
            f"{partition_id}-{b}-{n}" for b in range(10) for n in range(20)]
    for client in clients.values():
        client.close()


def test_a_killed_leader_is_replaced_and_its_records_survive(cluster) -> None:
    clients = {node_id: cluster.client(node_id) for node_id in (1, 2, 3)}
    clients[1].create_stream("s", 1)
    clients[1].create_topic(1, "t", partitions_count=3, replication_factor=3)
    old = send_to_leader(cluster, clients, 2, [f"before-{n}" for n in range(50)])
    wait_for(lambda: len({tuple(segment_digests(cluster, n, 2)) for n in (1, 2, 3)}) == 1)
    before = cluster.state(1, 1, 2)
    cluster.kill(old)
    clients.pop(old).close()
    new = cluster.leader_of(1, 1, 2, other_than=old)
    after = cluster.state(1, 1, 2)
    assert after["leader_epoch"] == before["leader_epoch"] + 1
    assert old not in after["isr"]
    wait_for(lambda: _sent(clients[new], 2, ["after"]), what="a send on the new leader")
    # (acknowledged at once: readable once the other live replica has it)
    wait_for(lambda: len(_payloads(clients[new], 2)) == 51, what="the send to be committed")
    assert _payloads(clients[new], 2) == [f"before-{n}" for n in range(50)] + ["after"]
    for client in clients.values():
        client.close()


def _payloads(client, partition_id: int) -> list[str]:
    polled = client.poll_messages(1, 1, 1, partition_id=partition_id,
                                  strategy=PollingStrategy.offset(0), count=1000)
    return [m.payload.decode() for m in polled.messages]


def _sent(client, partition_id: int, payloads: list[str]) -> bool:
    try:
        client.send_messages(1, 1, payloads, partitioning=partition_id)
        return True
    except (errors.NotLeaderForPartition, errors.LeaderNotAvailable):
        return False


def test_a_restarted_node_catches_up_and_returns_to_the_isr(cluster) -> None:
    clients = {node_id: cluster.client(node_id) for node_id in (1, 2, 3)}
    clients[1].create_stream("s", 1)
    clients[1].create_topic(1, "t", partitions_count=1, replication_factor=3)
    leader = cluster.leader_of(1, 1, 1)
    away = next(node for node in (1, 2, 3) if node != leader)
    cluster.kill(away)
    clients.pop(away).close()
    wait_for(lambda: away not in cluster.state(1, 1, 1)["isr"], what="the ISR to shrink")
    for batch in range(5):
        clients[leader].send_messages(1, 1, [f"while-away-{batch}-{n}" for n in range(10)],
                                      partitioning=1)
    cluster.restart(away)
    wait_for(lambda: away in cluster.state(1, 1, 1)["isr"], timeout=20,
             what="the restarted node to return to the ISR")
    wait_for(lambda: segment_digests(cluster, away, 1) == segment_digests(cluster, leader, 1),
             what="the restarted replica to hold the leader's bytes")
    for client in clients.values():
        client.close()


def test_the_data_path_rides_out_an_etcd_quorum_loss(cluster, etcd) -> None:
    clients = {node_id: cluster.client(node_id) for node_id in (1, 2, 3)}
    clients[1].create_stream("s", 1)
    clients[1].create_topic(1, "t", partitions_count=1, replication_factor=3)
    leader = cluster.leader_of(1, 1, 1)
    etcd.kill(1)
    etcd.kill(2)
    try:
        # 30 s without etcd's quorum (longer than every lease): each send still waits for the
        # whole ISR (a replicated Iggy SEND is acks=all) and is acknowledged
        started = time.monotonic()
        batch = 0
        while time.monotonic() - started < 30:
            clients[leader].send_messages(1, 1, [f"no-quorum-{batch}"], partitioning=1)
            batch += 1
            time.sleep(1)
        assert _payloads(clients[leader], 1) == [f"no-quorum-{n}" for n in range(batch)]
        with pytest.raises(errors.RillError) as refused:
            clients[leader].create_topic(1, "t2", partitions_count=1, replication_factor=3)
        assert isinstance(refused.value, errors.ClusterUnavailable), refused.value
    finally:
        etcd.heal()
    wait_for(lambda: _created(clients[leader]), timeout=30, what="topic creation after etcd")
    for node_id in (1, 2, 3):
        with cluster.client(node_id) as client:
            assert wait_for(lambda: client.get_topic(1, 2), what=f"t2 on node {node_id}")
    for client in clients.values():
        client.close()


def _created(client) -> bool:
    try:
        client.create_topic(1, "t2", partitions_count=1, replication_factor=3, topic_id=2)
        return True
    except errors.TopicNameAlreadyExists:
        return True
    except errors.RillError as error:
        print("create_topic:", repr(error))
        return False


def test_a_consumer_position_stored_on_one_node_is_read_on_every_node(cluster) -> None:
    clients = {node_id: cluster.client(node_id) for node_id in (1, 2, 3)}
    clients[1].create_stream("s", 1)
    clients[1].create_topic(1, "t", partitions_count=1, replication_factor=3)
    leader = cluster.leader_of(1, 1, 1)
    clients[leader].send_messages(1, 1, [f"m{n}" for n in range(10)], partitioning=1)
    clients[leader].store_consumer_offset(1, 1, 7, partition_id=1, consumer=5)
    for node_id in (1, 2, 3):
        wait_for(lambda: (clients[node_id].get_consumer_offset(1, 1, partition_id=1, consumer=5)
                          or None) and clients[node_id].get_consumer_offset(
                              1, 1, partition_id=1, consumer=5).stored_offset == 7,
                 what=f"the position on node {node_id}")
    for client in clients.values():
        client.close()


def test_a_purge_from_any_node_empties_every_replica_and_offsets_start_again(cluster) -> None:
    """Iggy's PURGE_TOPIC and PURGE_STREAM sent to a node that leads none of the partitions
    (the purge goes through the controller): every replica's log is emptied, every node polls
    nothing from offset 0 and knows no stored position, and the next sends start again at
    offset 0 with every replica holding the same bytes."""
    clients = {node_id: cluster.client(node_id) for node_id in (1, 2, 3)}
    clients[1].create_stream("s", 1)
    clients[1].create_topic(1, "t", partitions_count=2, replication_factor=3)

    def fill(label: str) -> None:
        for partition_id in (1, 2):
            send_to_leader(cluster, clients, partition_id,
                           [f"{label}-{partition_id}-{n}" for n in range(30)])

    def polled(node_id: int, partition_id: int) -> list[tuple[int, str]]:
        found = clients[node_id].poll_messages(1, 1, 1, partition_id=partition_id,
                                               strategy=PollingStrategy.offset(0), count=100)
        return [(m.offset, m.payload.decode()) for m in found.messages]

    def purged_everywhere(label: str) -> None:
        for node_id, partition_id in itertools.product((1, 2, 3), (1, 2)):
            wait_for(lambda: polled(node_id, partition_id) == [], what=(
                f"partition {partition_id} empty through node {node_id} after the {label}"))
            stored = clients[node_id].get_consumer_offset(1, 1, partition_id=partition_id,
                                                          consumer=5)
            assert stored is None or stored.stored_offset == 0  # (Iggy's "none": 0, not 19)
        for partition_id in (1, 2):
            wait_for(lambda: all(segment_digests(cluster, n, partition_id) == [
                (name, hashlib.sha256(b"").hexdigest())
                for name, _ in segment_digests(cluster, n, partition_id)] for n in (1, 2, 3)),
                what=f"every replica of partition {partition_id} emptied")

    fill("old")
    for partition_id in (1, 2):
        clients[cluster.leader_of(1, 1, partition_id)].store_consumer_offset(
            1, 1, 20, partition_id=partition_id, consumer=5)
    leaders = {cluster.leader_of(1, 1, partition_id) for partition_id in (1, 2)}
    purger = next(n for n in (3, 2, 1) if n not in leaders)
    clients[purger].purge_topic(1, 1)
    purged_everywhere("topic purge")

    fill("new")
    for partition_id in (1, 2):
        expected = [(n, f"new-{partition_id}-{n}") for n in range(30)]
        for node_id in (1, 2, 3):
            assert polled(node_id, partition_id) == expected
        wait_for(lambda: len({tuple(segment_digests(cluster, n, partition_id))
                              for n in (1, 2, 3)}) == 1,
                 what=f"partition {partition_id}'s replicas to match after the purge")

    clients[purger].purge_stream(1)
    purged_everywhere("stream purge")
    for client in clients.values():
        client.close()


def http_json(cluster: RillCluster, node_id: int, path: str) -> dict:
    import httpx

    base = cluster.nodes[node_id].http_url
    token = httpx.post(f"{base}/users/login", json={"username": "iggy", "password": "iggy"},
                       timeout=10).json()["access_token"]["token"]
    return httpx.get(f"{base}{path}", headers={"Authorization": f"Bearer {token}"},
                     timeout=10).json()


def test_a_paused_leader_that_wakes_up_acknowledges_nothing(cluster) -> None:
    """A leader SIGSTOPped past its member lease: the controller elects another at a new epoch.
    Woken, it takes the write it was sent, but the ISR now follows the new leader, so the
    write never commits there: the producer (acks=all) gets an error, the write is not in the
    partition, and the old leader's etcd state changes nothing (its refusals are counted)."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError

    admin = KafkaAdminClient(bootstrap_servers=cluster.nodes[1].kafka)
    admin.create_topics([NewTopic("fenced", num_partitions=1, replication_factor=3)])
    admin.close()
    stream_id = next(s.id for s in cluster.client(1).get_streams() if s.name == "kafka")
    topic_id = 1
    old = cluster.leader_of(stream_id, topic_id, 1)
    producer = KafkaProducer(bootstrap_servers=cluster.nodes[old].kafka, acks="all",
                             retries=0, request_timeout_ms=20_000, max_block_ms=20_000)
    producer.send("fenced", b"before", partition=0).get(timeout=20)  # metadata: old leads
    before = cluster.state(stream_id, topic_id, 1)
    cluster.pause(old)
    try:
        new = cluster.leader_of(stream_id, topic_id, 1, other_than=old, timeout=20)
        late = producer.send("fenced", b"from-the-paused-leader", partition=0)
    finally:
        cluster.resume(old)
    with pytest.raises(KafkaError):
        late.get(timeout=30)
    producer.close()
    after = cluster.state(stream_id, topic_id, 1)
    assert after["leader"] == new and after["leader_epoch"] == before["leader_epoch"] + 1
    with cluster.client(new) as client:
        payloads = [m.payload for m in client.poll_messages(
            stream_id, topic_id, 1, partition_id=1, strategy=PollingStrategy.offset(0),
            count=100).messages]
    assert b"from-the-paused-leader" not in payloads and b"before" in payloads
    counters = wait_for(lambda: http_json(cluster, old, "/cluster")["counters"], what="status")
    assert counters["fenced_requests"] >= 1


def test_a_send_proxied_to_a_stopped_leader_is_answered_once_it_leaves_the_cluster(cluster
                                                                                   ) -> None:
    """An Iggy client of a node that does not lead the partition: its SEND is proxied to the
    leader, which is SIGSTOPped. Once the leader's member lease ends the proxy answers at once
    ``replication_timed_out`` (it may be stored: the request was sent), while the leader is
    still stopped, instead of after the 35 s a live leader's answer is waited for. The
    client's next SEND, through the same node, goes to the new leader."""
    import threading

    from rill.client import Client

    with cluster.client(1) as client:
        client.create_stream("s", 1)
        client.create_topic(1, "t", partitions_count=1, replication_factor=3)
    leader = cluster.leader_of(1, 1, 1)
    proxy = next(n for n in (1, 2, 3) if n != leader)
    outcome: list[BaseException | None] = []
    with Client(cluster.nodes[proxy].address("tcp"), timeout=120) as client:
        client.login_user("iggy", "iggy")
        client.send_messages(1, 1, ["before"], partitioning=1)  # the link to the leader is open
        cluster.pause(leader)
        try:
            def send() -> None:
                try:
                    client.send_messages(1, 1, ["while-stopped"], partitioning=1)
                except BaseException as error:  # noqa: BLE001 -- what the test looks at
                    outcome.append(error)
                else:
                    outcome.append(None)

            sending = threading.Thread(target=send, daemon=True)
            sending.start()
            sending.join(30)  # (the 35 s wait for a live leader would end after this)
            answered_while_stopped = not sending.is_alive()
        finally:
            cluster.resume(leader)
        sending.join(60)
        assert answered_while_stopped, "the proxy waited for the stopped leader"
        assert isinstance(outcome[0], errors.RillError) and outcome[0].code == 11203
        new = cluster.leader_of(1, 1, 1, other_than=leader, timeout=20)
        client.send_messages(1, 1, ["after"], partitioning=1)
    with cluster.client(new) as reader:
        payloads = [m.payload for m in reader.poll_messages(
            1, 1, 1, strategy=PollingStrategy.offset(0), count=10).messages]
    assert payloads[0] == b"before" and payloads[-1] == b"after"


def test_kafka_clients_see_the_leaders_etcd_holds_from_any_bootstrap_node(cluster) -> None:
    import json as json_
    import subprocess

    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.nodes[2].kafka)
    admin.create_topics([NewTopic("seen", num_partitions=3, replication_factor=3)])
    admin.close()
    stream_id = next(s.id for s in cluster.client(1).get_streams() if s.name == "kafka")
    truth = {p - 1: cluster.state(stream_id, 1, p) for p in (1, 2, 3)}
    for node_id in (1, 2, 3):
        listed = json_.loads(subprocess.run(
            ["kcat", "-L", "-J", "-b", cluster.nodes[node_id].kafka, "-t", "seen"],
            capture_output=True, text=True, timeout=30, check=True).stdout)
        assert sorted(broker["id"] for broker in listed["brokers"]) == [1, 2, 3]
        (topic,) = listed["topics"]
        for partition in topic["partitions"]:
            state = truth[partition["partition"]]
            assert partition["leader"] == state["leader"]
            assert [r["id"] for r in partition["replicas"]] == state["replicas"]
            assert sorted(r["id"] for r in partition["isrs"]) == sorted(state["isr"])
        admin = KafkaAdminClient(bootstrap_servers=cluster.nodes[node_id].kafka)
        (described,) = admin.describe_topics(["seen"])
        admin.close()
        for partition in described["partitions"]:
            state = truth[partition["partition_index"]]
            assert partition["leader_id"] == state["leader"]
            assert partition["replica_nodes"] == state["replicas"]
            assert sorted(partition["isr_nodes"]) == sorted(state["isr"])


def test_a_user_created_on_one_node_logs_in_on_every_node(cluster) -> None:
    from rill.client import Client

    with cluster.client(1) as admin:
        admin.create_user("alice", "secret-1")
    for node_id in (2, 3):
        def logged_in() -> bool:
            with Client(cluster.nodes[node_id].address("tcp")) as client:
                client.connect()
                try:
                    client.login_user("alice", "secret-1")
                    return True
                except errors.InvalidCredentials:
                    return False
        wait_for(logged_in, what=f"alice's login on node {node_id}")
    with cluster.client(3) as admin:
        alice = next(u for u in admin.get_users() if u.username == "alice")
        admin.change_password(alice.id, "secret-1", "secret-2")
    with Client(cluster.nodes[1].address("tcp")) as client:
        client.connect()
        wait_for(lambda: _logs_in(client, "alice", "secret-2"), what="the new password on node 1")
    with cluster.client(2) as admin:
        admin.delete_user(alice.id)
    with cluster.client(1) as admin:
        wait_for(lambda: all(u.username != "alice" for u in admin.get_users()),
                 what="alice gone on node 1")


def _logs_in(client, username: str, password: str) -> bool:
    try:
        client.login_user(username, password)
        return True
    except errors.InvalidCredentials:
        return False
