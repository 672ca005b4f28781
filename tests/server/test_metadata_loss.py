"""Losing or damaging the metadata store never destroys data or resets credentials.

A real server is killed (-9) with its recent metadata still in ``metadata.sqlite3-wal``; the
WAL (and -shm) is deleted, as a careless backup or clean-up would. The next start must keep
every partition file, refuse rather than create the root user again, and ``--recover-metadata``
must bring the streams, topics and messages back from the data directory.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rill import errors
from rill.client import Client, PollingStrategy
from server_process import RillProcess, session

# no background checkpoint: the store's changes stay in the WAL until the kill
NO_CHECKPOINTS = {"RILL_SYSTEM_FSYNC": "never", "RILL_QUIC_ENABLED": "false",
                  "RILL_HTTP_ENABLED": "false"}


def data_files(data_dir: Path) -> dict[str, bytes]:
    streams = data_dir / "streams"
    return {str(path.relative_to(data_dir)): path.read_bytes()
            for path in sorted(streams.rglob("*")) if path.is_file() and path.suffix in (".log", ".index")}


def populate(client: Client, stream: str, stream_id: int) -> None:
    client.create_stream(stream, stream_id=stream_id)
    client.create_topic(stream_id, "events", partitions_count=3)
    client.create_topic(stream_id, "audit", partitions_count=2)
    for partition in (1, 2, 3):
        client.send_messages(stream_id, "events", [f"{stream}-{partition}-{i}".encode() for i in range(20)],
                             partitioning=partition)
    client.send_messages(stream_id, "audit", [b"who", b"what"], partitioning=1)


def check(client: Client, stream: str, stream_id: int) -> None:
    details = client.get_stream(stream)
    assert details.id == stream_id
    assert sorted(topic.name for topic in details.topics) == ["audit", "events"]
    for partition in (1, 2, 3):
        polled = client.poll_messages(stream_id, "events", partition_id=partition,
                                      strategy=PollingStrategy.first(), count=100)
        assert [m.payload for m in polled.messages] == [
            f"{stream}-{partition}-{i}".encode() for i in range(20)]
    audit = client.poll_messages(stream_id, "audit", partition_id=1,
                                 strategy=PollingStrategy.first(), count=10)
    assert [m.payload for m in audit.messages] == [b"who", b"what"]


def lose_wal(data_dir: Path) -> None:
    for suffix in ("-wal", "-shm"):
        (data_dir / f"metadata.sqlite3{suffix}").unlink(missing_ok=True)


def serve(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A start expected to be refused: its exit code and output."""
    import os

    env = dict(os.environ, **NO_CHECKPOINTS)
    return subprocess.run(
        [sys.executable, "-m", "rill", "serve", "--data-dir", str(data_dir),
         "--tcp-address", "127.0.0.1:0", *args],
        capture_output=True, text=True, env=env, timeout=60,
    )


def test_a_lost_wal_refuses_the_start_keeps_every_file_and_recovers_on_request(tmp_path):
    data_dir = tmp_path / "data"
    server = RillProcess(data_dir, env=NO_CHECKPOINTS).start()
    with session(server) as client:
        populate(client, "orders", 7)
        client.change_password("iggy", "iggy", "s3cret-root")
    server.kill()
    before = data_files(data_dir)
    assert len(before) == 10  # 5 partitions, a .log and a .index each
    lose_wal(data_dir)

    refused = serve(data_dir)
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert lines[-1].startswith("rill: cannot start: metadata store")
    assert "--recover-metadata" in lines[-1] and "holds no users" in lines[-1]
    assert data_files(data_dir) == before  # nothing deleted, nothing changed

    recovered = RillProcess(data_dir, env=NO_CHECKPOINTS, args=["--recover-metadata"]).start()
    try:
        assert data_files(data_dir) == before
        with session(recovered, password="iggy") as client:  # root made again, on request only
            check(client, "orders", 7)
        recovered.stop()
        recovered.args = []
        recovered.start()  # and starts normally afterwards
        with session(recovered, password="iggy") as client:
            check(client, "orders", 7)
    finally:
        recovered.kill()


def test_streams_missing_from_a_store_that_kept_its_users_are_recovered_at_start(tmp_path):
    data_dir = tmp_path / "data"
    server = RillProcess(data_dir, env=NO_CHECKPOINTS).start()
    with session(server) as client:
        populate(client, "old", 1)
        client.change_password("iggy", "iggy", "s3cret-root")
    assert server.stop() == 0  # a clean stop checkpoints the store: users and "old" are in it
    server.start()
    with session(server, password="s3cret-root") as client:
        populate(client, "new", 2)
    server.kill()
    before = data_files(data_dir)
    lose_wal(data_dir)
    server.start()
    with session(server, password="s3cret-root") as client:  # the password was not reset
        check(client, "old", 1)
        check(client, "new", 2)  # recovered from its manifest
        with pytest.raises(errors.InvalidCredentials):
            client.login_user("iggy", "iggy")
    assert "recovered stream 2 ('new')" in "".join(server.output)
    assert data_files(data_dir) == before
    server.kill()


def test_a_directory_nothing_explains_is_quarantined_not_deleted(tmp_path):
    data_dir = tmp_path / "data"
    server = RillProcess(data_dir, env=NO_CHECKPOINTS).start()
    with session(server) as client:
        populate(client, "kept", 1)
    server.stop()
    stranger = data_dir / "streams" / "9" / "topics" / "1" / "partitions" / "1"
    stranger.mkdir(parents=True)
    (stranger / "00000000000000000000.log").write_bytes(b"precious bytes")
    server.start()
    with session(server) as client:
        check(client, "kept", 1)
        assert [stream.name for stream in client.get_streams()] == ["kept"]
    quarantined = list((data_dir / "quarantine").rglob("00000000000000000000.log"))
    assert [path.read_bytes() for path in quarantined] == [b"precious bytes"]
    assert not (data_dir / "streams" / "9").exists()
    assert "without a readable stream.json" in "".join(server.output)
    server.kill()


def test_a_damaged_store_refuses_the_start_and_is_moved_aside_on_request(tmp_path):
    data_dir = tmp_path / "data"
    server = RillProcess(data_dir, env=NO_CHECKPOINTS).start()
    with session(server) as client:
        populate(client, "orders", 3)
    server.stop()
    before = data_files(data_dir)
    store = data_dir / "metadata.sqlite3"
    damaged = bytearray(store.read_bytes())
    damaged[:16] = b"not a database!!"
    store.write_bytes(bytes(damaged))

    refused = serve(data_dir)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1].startswith(
        f"rill: cannot start: metadata store {store} is damaged")
    assert store.read_bytes() == bytes(damaged)  # untouched

    recovered = RillProcess(data_dir, env=NO_CHECKPOINTS, args=["--recover-metadata"]).start()
    with session(recovered) as client:
        check(client, "orders", 3)
    assert [path.read_bytes() for path in data_dir.glob("metadata.sqlite3.damaged-*")] == [
        bytes(damaged)]
    assert data_files(data_dir) == before
    recovered.kill()


def test_a_store_from_a_later_rill_refuses_the_start_even_with_recovery(tmp_path):
    """A store whose schema is newer than this rill reads is neither migrated nor moved aside
    (``--recover-metadata`` included): one line says so, and nothing changes."""
    import sqlite3

    data_dir = tmp_path / "data"
    server = RillProcess(data_dir, env=NO_CHECKPOINTS).start()
    with session(server) as client:
        populate(client, "orders", 3)
    server.stop()
    store = data_dir / "metadata.sqlite3"
    db = sqlite3.connect(store)
    db.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    before = store.read_bytes()
    for args in ((), ("--recover-metadata",)):
        refused = serve(data_dir, *args)
        assert refused.returncode == 1
        last = refused.stderr.strip().splitlines()[-1]
        assert last.startswith(f"rill: cannot start: metadata store {store} has schema version 7")
        assert "written by a later rill" in last
        assert store.read_bytes() == before
        assert not list(data_dir.glob("metadata.sqlite3.damaged-*"))
