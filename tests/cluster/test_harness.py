"""The fault harness on etcd members and standalone rill nodes (no cluster runtime needed):
start, kill -9 and restart on the same data, SIGSTOP/SIGCONT, a machine's power cut; in
network namespaces: an isolated machine cannot be reached and its etcd member loses its
quorum, healing brings both back; nothing of the harness's is left after it closes."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from cluster.harness import LocalCluster, process_state
from rill.client import Client

ETCD_WAIT = 30.0  # generous: 2 cores shared by a whole test run


def reachable(address: str, timeout: float = 1.0) -> bool:
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
        return True
    except OSError:
        return False


def streams(node) -> list[str]:
    with Client(node.address("tcp"), reconnect=False, connect_timeout=5, timeout=10) as client:
        client.login_user("iggy", "iggy")
        return sorted(stream.name for stream in client.get_streams())


def create_stream(node, name: str) -> None:
    with Client(node.address("tcp"), reconnect=False, connect_timeout=5, timeout=10) as client:
        client.login_user("iggy", "iggy")
        client.create_stream(name)


def etcd_health(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as answer:
            return json.load(answer).get("health") == "true"
    except (OSError, urllib.error.URLError, ValueError):
        return False


def wait_for(condition, what: str, timeout: float = ETCD_WAIT) -> None:
    """Poll an outside process's state until ``condition()`` (no event to await there)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"still not {what}"
        time.sleep(0.1)


def test_loopback_nodes_start_die_and_restart_on_their_data(local_cluster):
    cluster = local_cluster(cluster=False)
    assert [node.host for node in cluster.nodes] == ["127.0.0.1"] * 3
    assert all(member.healthy() for member in cluster.etcd.members)
    for index, node in enumerate(cluster.nodes):
        create_stream(node, f"s{index}")
        assert streams(node) == [f"s{index}"]
    first = cluster.node(0)
    old_pid = first.pid
    cluster.kill9(0)
    assert not first.running and not reachable(first.address("tcp"))
    cluster.restart(0)
    assert first.pid != old_pid
    assert streams(first) == ["s0"]  # same data directory, same address

    cluster.pause(1)
    assert process_state(cluster.node(1).pid) == "T"
    cluster.resume(1)
    assert process_state(cluster.node(1).pid) != "T"
    assert streams(cluster.node(1)) == ["s1"]


def test_a_machine_power_cut_kills_its_node_and_etcd_member(local_cluster):
    cluster = local_cluster(cluster=False)
    node, member = cluster.node(2), cluster.etcd.members[2]
    cluster.kill9_machine(2)
    assert not node.running and not member.running
    # 2 of 3: a quorum (after an election when the member killed led etcd: about 1-2 s)
    deadline = time.monotonic() + 20
    while not all(m.healthy() for m in cluster.etcd.members[:2]):
        assert time.monotonic() < deadline, "the 2 members left did not become healthy"
        time.sleep(0.2)
    cluster.restart(2)
    assert node.running and member.running
    cluster.etcd.wait_healthy()
    assert streams(node) == []


def test_the_nodes_join_etcd_as_cluster_members_when_asked(local_cluster):
    cluster = local_cluster(size=3)
    for node in cluster.nodes:
        assert node.env["RILL_CLUSTER_ETCD_ENDPOINTS"].split(",")[0] == \
            cluster.machines[node.node_id - 1].etcd.client_url
        assert node.env["RILL_CLUSTER_NODE_ID"] == str(node.node_id)
        assert reachable(node.kafka)


def test_closing_kills_every_process_even_paused_ones(local_cluster):
    cluster = local_cluster(cluster=False)
    cluster.pause(0)
    processes = [node.process for node in cluster.nodes] + [m.process for m in cluster.etcd.members]
    cluster.close()
    assert all(process.poll() is not None for process in processes)


def namespaces() -> set[str]:
    return {line.split()[0] for line in subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout.splitlines()}


def links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout


def test_an_isolated_machine_is_unreachable_and_its_etcd_member_loses_quorum(local_cluster):
    cluster = local_cluster(mode="namespaces", cluster=False)
    hosts = [node.host for node in cluster.nodes]
    assert len(set(hosts)) == 3 and not any(host.startswith("127.") for host in hosts)
    assert all(reachable(node.address("tcp")) for node in cluster.nodes)
    create_stream(cluster.node(1), "before")

    cluster.isolate(1)
    isolated, member = cluster.machines[1], cluster.etcd.members[1]
    assert not reachable(cluster.node(1).address("tcp"))  # dropped: the connect times out
    assert not etcd_health(member.client_url)
    # inside the machine its node still answers, but its etcd member has no quorum
    assert isolated.inside(lambda: streams(cluster.node(1))) == ["before"]
    wait_for(lambda: not isolated.inside(lambda: etcd_health(member.client_url)),
             "the isolated etcd member without a leader")
    # the other two keep a quorum: healthy once they have a leader (an election when the
    # isolated member led: up to etcd's election timeout, so waited for, not asserted at once)
    wait_for(lambda: all(etcd_health(m.client_url)
                         for m in (cluster.etcd.members[0], cluster.etcd.members[2])),
             "the two connected etcd members healthy")

    cluster.heal()
    assert reachable(cluster.node(1).address("tcp"))
    wait_for(lambda: etcd_health(member.client_url), "the healed etcd member back in the quorum")
    assert streams(cluster.node(1)) == ["before"]


def test_namespaces_mode_kills_pauses_and_restarts_by_pid(local_cluster):
    cluster = local_cluster(mode="namespaces", cluster=False)
    create_stream(cluster.node(0), "kept")
    cluster.kill9(0)
    assert not reachable(cluster.node(0).address("tcp"))
    cluster.restart(0)
    assert streams(cluster.node(0)) == ["kept"]
    cluster.pause(2)
    assert process_state(cluster.node(2).pid) == "T"
    cluster.heal()
    assert process_state(cluster.node(2).pid) != "T"


def test_closing_removes_the_namespaces_and_the_bridge_also_after_a_failure(tmp_path):
    cluster = LocalCluster(tmp_path, mode="namespaces", rill=False)
    made = set(cluster.network.namespaces)
    with pytest.raises(RuntimeError, match="test body failed"), cluster:
        assert made <= namespaces()
        assert cluster.network.bridge in links()
        cluster.isolate(0)
        raise RuntimeError("test body failed")
    assert not made & namespaces()
    assert cluster.network.bridge not in links()
    # a namespace's veth goes with the namespace, once nothing holds it (the kernel's cleanup
    # runs in the background)
    wait_for(lambda: f"rfv{cluster.network.tag}m" not in links(), "the veths removed")
    assert all(not member.running for member in cluster.etcd.members)
