"""System commands over real sockets: PING and GET_STATS (wire §3.1, §4.9)."""

from __future__ import annotations

import platform
import socket
import time

import pytest

from rill import errors
from rill.client import Client, Message
from rill.server.core.system import CpuSampler

import psutil


def wait_until(predicate, timeout=20.0, interval=0.05, message="condition not reached"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, message
        time.sleep(interval)


@pytest.fixture
def client(rill_server):
    with Client(rill_server.address) as client:
        client.login_user("iggy", "iggy")
        yield client


def test_ping_needs_no_login_and_stats_do(rill_server):
    with Client(rill_server.address) as stranger:
        assert stranger.ping() is None
        with pytest.raises(errors.Unauthenticated):  # it names the host, its OS and memory
            stranger.get_stats()


def test_stats_describe_the_server_process(rill_server, client):
    stats = client.get_stats()
    assert stats.process_id == rill_server.process.pid
    server = psutil.Process(rill_server.process.pid)
    assert stats.start_time >= int(server.create_time() * 1_000_000)  # µs, not seconds (§11)
    now_us = time.time_ns() // 1000
    assert stats.start_time <= now_us
    assert 0 < stats.run_time <= now_us - stats.start_time + 1_000_000
    assert 0 < stats.memory_usage < stats.total_memory
    assert 0 < stats.available_memory <= stats.total_memory
    assert stats.total_memory == psutil.virtual_memory().total
    assert stats.cpu_usage >= 0 and 0 <= stats.total_cpu_usage <= 100
    assert stats.read_bytes >= 0 and stats.written_bytes >= 0
    assert stats.hostname == socket.gethostname()
    assert stats.kernel_version == platform.release()
    assert stats.os_name and stats.os_version
    assert (stats.streams_count, stats.topics_count, stats.partitions_count) == (0, 0, 0)
    assert (stats.segments_count, stats.messages_count, stats.messages_size_bytes) == (0, 0, 0)
    assert stats.clients_count == 1 and stats.consumer_groups_count == 0


def test_run_time_and_cpu_figures_are_live(client):
    first = client.get_stats()
    wait_until(lambda: client.get_stats().run_time > first.run_time)

    def cpu_seen():
        client.ping()
        stats = client.get_stats()
        return stats.cpu_usage > 0 and stats.total_cpu_usage > 0

    wait_until(cpu_seen, message="CPU usage was never sampled above zero")


def test_model_figures_follow_the_data(rill_server, client):
    client.login_user("iggy", "iggy")
    client.create_stream("a", stream_id=1)
    client.create_stream("b", stream_id=2)
    client.create_topic(1, "t1", partitions_count=3)
    client.create_topic(2, "t2", partitions_count=1)
    client.create_consumer_group(1, 1, "g1")
    client.create_consumer_group(1, 1, "g2")
    stats = client.get_stats()
    assert (stats.streams_count, stats.topics_count, stats.partitions_count) == (2, 2, 4)
    assert stats.segments_count == 4 and stats.consumer_groups_count == 2
    assert stats.messages_count == 0 and stats.messages_size_bytes == 0
    client.send_messages(1, 1, [Message(b"x" * 100) for _ in range(10)], partitioning=1)
    client.send_messages(2, 1, [b"hello", b"world"])
    stats = client.get_stats()
    assert stats.messages_count == 12
    assert stats.messages_size_bytes == 10 * (45 + 100) + 2 * (45 + 5)  # stored record sizes
    assert stats.messages_size_bytes == sum(s.size_bytes for s in client.get_streams())
    client.delete_stream(2)
    stats = client.get_stats()
    assert (stats.streams_count, stats.topics_count, stats.partitions_count) == (1, 1, 3)
    assert stats.messages_count == 10


def test_clients_count_follows_connections(rill_server, client):
    assert client.get_stats().clients_count == 1
    others = [Client(rill_server.address) for _ in range(2)]
    for other in others:
        other.connect()
        other.ping()  # answered: the server has registered this connection
    assert client.get_stats().clients_count == 3
    for other in others:
        other.close()
    wait_until(lambda: client.get_stats().clients_count == 1)


def test_cpu_sampler_keeps_the_last_sample_within_its_window():
    sampler = CpuSampler(psutil.Process(), window=3600.0)
    first = sampler.read()
    assert sampler.has_sample
    sum(range(200_000))  # some work that must not show until the window passes
    assert sampler.read() == first
    sampler.window = 0.0
    deadline = time.monotonic() + 20
    while sampler.read()[0] == 0.0:
        assert time.monotonic() < deadline, "the process never showed CPU use"
        sum(range(200_000))
