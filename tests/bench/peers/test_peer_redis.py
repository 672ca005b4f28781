"""Redis Streams as a peer: the real redis-server from Debian, configured per fsync mode, gets
every message through XADD pipelines and gives every one back through XRANGE."""

from __future__ import annotations

import pytest

from rill.bench.peers import PeerUnavailable, Workload, run_async
from rill.bench.peers.redis import STREAM_KEY, RedisPeer

MESSAGES = 2000
SIZE = 1000



@pytest.mark.parametrize(("fsync", "appendfsync"), [("interval", "everysec"), ("always", "always")])
def test_redis_round_trip_with_the_matching_fsync(tmp_path, fsync, appendfsync):
    peer = RedisPeer(Workload(MESSAGES, SIZE, 1000, fsync))
    peer.start(tmp_path)
    try:
        assert run_async(lambda: peer.config("appendfsync")) == appendfsync
        assert run_async(lambda: peer.config("appendonly")) == "yes"
        assert run_async(lambda: peer.config("bind")) == "127.0.0.1"
        assert run_async(lambda: peer.config("save")) == ""
        produced = run_async(peer.publish)
        consumed = run_async(peer.consume)

        client = peer._connect()
        try:
            assert client.xlen(STREAM_KEY) == MESSAGES
        finally:
            client.close()
    finally:
        peer.stop()
    assert peer.describe()["appendfsync"] == appendfsync
    assert (produced.messages, produced.bytes, len(produced.latencies_us)) == (MESSAGES, MESSAGES * SIZE, 2)
    assert (consumed.messages, consumed.bytes, len(consumed.latencies_us)) == (MESSAGES, MESSAGES * SIZE, 2)
    assert any(path.name.startswith("appendonly") for path in tmp_path.rglob("*"))  # AOF in workdir


def test_redis_short_last_batch(tmp_path):
    peer = RedisPeer(Workload(250, 10, 100, "interval"))
    peer.start(tmp_path)
    try:
        produced = run_async(peer.publish)
        consumed = run_async(peer.consume)
    finally:
        peer.stop()
    assert [produced.messages, consumed.messages, consumed.bytes] == [250, 250, 2500]
    assert len(consumed.latencies_us) == 3


def test_redis_missing_binary_is_unavailable(tmp_path):
    peer = RedisPeer(Workload(10, 10, 10), binary=str(tmp_path / "redis-server"))
    with pytest.raises(PeerUnavailable, match="redis-server binary not found"):
        peer.start(tmp_path)
