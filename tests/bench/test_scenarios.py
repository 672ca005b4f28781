"""``run_scenario`` end to end: every scenario against real servers, at tiny sizes.

One server with all three transports serves the module (existing-server mode, so each run
cleans its streams up); a few tests let ``run_scenario`` start its own. Checks are about the
report's shape and exact counts, never about timing.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from rill.bench.options import BenchOptions, OptionsError, consumer_partitions, validate
from rill.bench.scenarios import actor_specs, run_scenario
from rill.bench.server import RillServer
from rill.client import Client

PRODUCERS = 2
BATCHES = 3
PER_BATCH = 10
SIZE = 100
SEND_BYTES = PER_BATCH * (SIZE + 24)  # one SEND region: id, headers length, payload length, payload
POLL_BYTES = PER_BATCH * (SIZE + 45)  # one POLL region: the stored record layout

_stream_ids = itertools.count(5_000_000, 100)


@pytest.fixture(scope="module")
def server():
    with RillServer(fsync="never", transports=("tcp", "quic", "http")) as running:
        yield running


def options_for(server: RillServer, transport: str = "tcp", **changes) -> BenchOptions:
    values = dict(
        producers=PRODUCERS, consumers=PRODUCERS, streams=PRODUCERS, messages_per_batch=PER_BATCH,
        message_size=SIZE, batches=BATCHES, transport=transport,
        server_address=server.addresses[transport], start_stream_id=next(_stream_ids), progress=False,
        ca_file=server.certificate,
    )
    values.update(changes)
    return BenchOptions(**values)


def check_kind(report: dict, kind: str, actors: int, messages: int, region_bytes: int) -> dict:
    summary = report["overall"][kind]
    assert summary["actors"] == actors
    assert summary["messages"] == messages
    assert summary["bytes"] == messages // PER_BATCH * region_bytes
    assert summary["batches"] == messages // PER_BATCH
    assert summary["msg_per_s"] > 0 and summary["mb_per_s"] > 0
    assert set(summary["latency_ms"]) >= {"p50", "p90", "p99", "p999", "avg", "max"}
    assert summary["latency_ms"]["p50"] <= summary["latency_ms"]["p99"] <= summary["latency_ms"]["max"]
    assert summary["timeline"] and all(len(point) == 3 for point in summary["timeline"])
    assert sum(count for _, count in summary["latency_histogram"]) == summary["batches"]
    return summary


def check_actors(report: dict, kind: str, count: int, messages_each: int | None) -> None:
    actors = [actor for actor in report["actors"] if actor["kind"] == kind]
    assert sorted(actor["actor"] for actor in actors) == sorted(f"{kind}-{n + 1}" for n in range(count))
    for actor in actors:
        if messages_each is not None:
            assert actor["messages"] == messages_each
        assert actor["msg_per_s"] > 0
        assert set(actor["latency_ms"]) >= {"p50", "p90", "p99", "p999"}
        assert actor["timeline"]


def stream_exists(server: RillServer, stream_id: int) -> bool:
    with Client(server.addresses["tcp"], reconnect=False) as client:
        client.login_user("iggy", "iggy")
        return client.get_stream(stream_id) is not None


def stream_messages(server: RillServer, stream_id: int) -> int:
    with Client(server.addresses["tcp"], reconnect=False) as client:
        client.login_user("iggy", "iggy")
        return client.get_stream(stream_id).stream.messages_count


# --- every scenario --------------------------------------------------------------------------------


# tcp runs two actors; quic and http one each (every actor is a process: CPU time adds up)
TRANSPORTS = [("tcp", PRODUCERS), ("quic", 1), ("http", 1)]


@pytest.mark.parametrize(("transport", "actors"), TRANSPORTS)
def test_send(server, transport, actors):
    options = options_for(server, transport, producers=actors, streams=actors)
    report = run_scenario("send", options)
    assert report["scenario"] == "send" and report["target"] == "rill"
    assert report["options"]["transport"] == transport and report["options"]["password"] == "***"
    assert "consumers" not in report["overall"]
    check_kind(report, "producers", actors, actors * BATCHES * PER_BATCH, SEND_BYTES)
    check_actors(report, "producer", actors, BATCHES * PER_BATCH)
    for stream_id in options.stream_ids():  # cleanup (the default) removed the bench streams
        assert not stream_exists(server, stream_id)


@pytest.mark.parametrize(("transport", "actors"), TRANSPORTS)
def test_poll_seeds_what_it_reads(server, transport, actors):
    report = run_scenario("poll", options_for(server, transport, consumers=actors, streams=actors))
    assert report["options"]["seeded_messages"] == actors * BATCHES * PER_BATCH
    check_kind(report, "consumers", actors, actors * BATCHES * PER_BATCH, POLL_BYTES)
    check_actors(report, "consumer", actors, BATCHES * PER_BATCH)
    assert "producers" not in report["overall"]


def test_send_and_poll(server):
    report = run_scenario("send-and-poll", options_for(server))
    check_kind(report, "producers", PRODUCERS, PRODUCERS * BATCHES * PER_BATCH, SEND_BYTES)
    check_kind(report, "consumers", PRODUCERS, PRODUCERS * BATCHES * PER_BATCH, POLL_BYTES)
    check_actors(report, "producer", PRODUCERS, BATCHES * PER_BATCH)
    check_actors(report, "consumer", PRODUCERS, BATCHES * PER_BATCH)


def test_consumer_group_poll(server):
    """Two groups of two members: each group reads members × batches × batch messages once."""
    options = options_for(server, consumers=4, consumer_groups=2, streams=1, partitions=2)
    report = run_scenario("consumer-group-poll", options)
    check_kind(report, "consumers", 4, 2 * 2 * BATCHES * PER_BATCH, POLL_BYTES)
    check_actors(report, "consumer", 4, None)


# --- modes -----------------------------------------------------------------------------------------


def test_existing_server_keeps_streams_without_cleanup_and_poll_reuses_them(server):
    options = options_for(server, cleanup=False)
    run_scenario("send", options)
    assert all(stream_exists(server, stream_id) for stream_id in options.stream_ids())
    report = run_scenario("poll", options_for(server, start_stream_id=options.start_stream_id))
    assert report["options"]["seeded_messages"] == 0  # the data of the send was enough
    check_kind(report, "consumers", PRODUCERS, PRODUCERS * BATCHES * PER_BATCH, POLL_BYTES)
    assert not any(stream_exists(server, stream_id) for stream_id in options.stream_ids())


def test_duration_mode_runs_until_the_time_is_up(server):
    options = options_for(server, producers=1, streams=1, duration=0.4, batches=None)
    report = run_scenario("send", options)
    summary = report["overall"]["producers"]
    assert summary["messages"] > 0 and summary["messages"] % PER_BATCH == 0
    assert summary["seconds"] >= 0.4
    assert report["options"]["duration"] == 0.4


def test_warmup_is_not_counted(server):
    options = options_for(server, producers=1, streams=1, warmup=0.3, cleanup=False)
    report = run_scenario("send", options)
    counted = report["overall"]["producers"]["messages"]
    assert counted == BATCHES * PER_BATCH
    stream_id = options.stream_ids()[0]
    assert stream_messages(server, stream_id) > counted  # warm-up batches reached the server
    with Client(server.addresses["tcp"], reconnect=False) as client:
        client.login_user("iggy", "iggy")
        client.delete_stream(stream_id)


def test_a_server_of_its_own(tmp_path):
    """No server address: run_scenario starts a server, runs, and stops it."""
    options = BenchOptions(producers=1, streams=1, messages_per_batch=PER_BATCH, message_size=SIZE,
                           batches=BATCHES, fsync="always", progress=False)
    report = run_scenario("send", options)
    assert report["options"]["server"].startswith("rill started by the benchmark (fsync always")
    check_kind(report, "producers", 1, BATCHES * PER_BATCH, SEND_BYTES)


def test_rill_server_lifecycle():
    server = RillServer(transports=("tcp", "http"))
    with server:
        assert set(server.addresses) == {"tcp", "http"}
        assert server.running
        data_dir = server.data_dir
        assert data_dir is not None and data_dir.exists()
    assert not server.running and not Path(data_dir).exists()


# --- options and layout (no server) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "changes", "message"),
    [
        ("send", {"producers": -1}, "--producers must be a positive whole number"),
        ("send", {"transport": "udp"}, "unknown transport"),
        ("send", {"fsync": "sometimes"}, "unknown fsync policy"),
        ("send", {"batches": 0}, "--batches must be a positive"),
        ("send", {"duration": -1.0}, "--duration must be a positive"),
        ("send", {"producers": 3, "streams": 1}, "--shared-streams"),
        ("poll", {"consumers": 2, "streams": 1}, "--partitions 2"),
        ("consumer-group-poll", {"transport": "http"}, "needs --transport tcp or quic"),
        ("consumer-group-poll", {"consumer_groups": 3, "consumers": 2}, "--consumer-groups 3"),
        ("fetch", {}, "unknown scenario"),
    ],
)
def test_bad_options_are_one_clear_line(scenario, changes, message):
    with pytest.raises(OptionsError, match=message.replace(".", r"\.").replace("-", r"\-")) as raised:
        validate(scenario, BenchOptions(**changes))
    assert "\n" not in str(raised.value)


def test_actors_may_share_a_stream_with_a_partition_each():
    validate("send", BenchOptions(producers=2, partitions=2))
    validate("poll", BenchOptions(consumers=3, streams=1, partitions=1, shared_streams=True))


def test_layout_follows_iggy_bench():
    options = BenchOptions(producers=3, consumers=3, streams=3, partitions=1, start_stream_id=100)
    specs = actor_specs("send-and-poll", options, "127.0.0.1:1")
    assert [spec.stream_id for spec in specs] == [101, 102, 103, 101, 102, 103]
    assert [spec.partitions for spec in specs[:3]] == [(1,)] * 3  # one partition: partition id 1
    balanced = actor_specs("send", BenchOptions(producers=2, partitions=2), "127.0.0.1:1")
    assert [spec.partitions for spec in balanced] == [(), ()]  # several partitions: balanced
    split = BenchOptions(consumers=2, partitions=4)
    assert [consumer_partitions(split, index, 2) for index in range(2)] == [[1, 3], [2, 4]]
    assert consumer_partitions(BenchOptions(partitions=3), 0, 1) == [1, 2, 3]
    groups = actor_specs("consumer-group-poll", BenchOptions(consumers=4, consumer_groups=2), "127.0.0.1:1")
    assert [spec.group_id for spec in groups] == [1, 2, 1, 2]
    assert groups[0].group_slots == (0, 2) and groups[0].group_target == 2 * 1000 * 1000


def test_a_failing_actor_stops_the_run_with_the_servers_error(server):
    """Actors of a stream that does not exist: the server's error comes back, naming the actor."""
    from rill import errors
    from rill.bench.runner import run_actors

    options = options_for(server, start_stream_id=next(_stream_ids))  # nothing created
    with pytest.raises(errors.StreamIdNotFound, match=r"^producer-\d: "):
        run_actors(actor_specs("send", options, server.addresses["tcp"]), progress=False)
