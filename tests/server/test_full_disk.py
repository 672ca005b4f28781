"""A full disk can be freed through rill: deletions work at 0 bytes free, also after a restart,
and the first write failure and the recovery are logged (once each).

The data directory lives on a small tmpfs mounted for the test (the suite runs as root, as CI
does); it is filled by SENDs until the server answers 4006.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from rill import errors
from rill.client import Client
from server_process import RillProcess, session

MIB = 1024 * 1024
ENV = {"RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false",
       "RILL_SYSTEM_SEGMENT_SIZE": "2 MiB", "RILL_SYSTEM_METADATA_RESERVE": "1 MiB",
       "RILL_LOGGING_LEVEL": "info"}


@pytest.fixture
def small_disk(tmp_path):
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", str(mount_point)],
                   check=True)
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def logged(server: RillProcess, text: str) -> int:
    time.sleep(0.2)  # the server's output is read by a thread
    return "".join(server.output).count(text)


def free_bytes(path: Path) -> int:
    usage = os.statvfs(path)
    return usage.f_bavail * usage.f_frsize


def fill(client: Client, stream: int, topic: str) -> int:
    """Send batches, smaller and smaller, until not even 64 bytes fit; returns how many were
    acknowledged."""
    sent = 0
    for size in (256 * 1024, 16 * 1024, 1024, 64):
        for _ in range(1000):
            try:
                client.send_messages(stream, topic, [os.urandom(size)], partitioning=1)
            except errors.CannotSaveMessagesToSegment:
                break
            sent += 1
        else:
            raise AssertionError("the disk never filled up")
    return sent


def test_deletes_work_on_a_full_disk_also_after_a_restart(small_disk):
    data_dir = small_disk / "data"
    server = RillProcess(data_dir, env=ENV).start()
    try:
        with session(server) as client:
            client.create_stream("first", stream_id=1)
            client.create_topic(1, "bulk", partitions_count=1)
            client.create_topic(1, "spare", partitions_count=1)
            client.create_stream("second", stream_id=2)
            client.create_topic(2, "bulk", partitions_count=1)
            assert fill(client, 1, "bulk") > 0
            assert free_bytes(small_disk) < 2 * MIB
            failures_logged = logged(server, "writing messages fails")
            for _ in range(5):
                with pytest.raises(errors.CannotSaveMessagesToSegment):
                    client.send_messages(1, "bulk", [b"x" * 300_000], partitioning=1)
            client.delete_topic(1, "spare")  # a metadata write on a full disk
            client.delete_topic(1, "bulk")  # frees the space
            assert [t.name for t in client.get_topics(1)] == []
            recoveries = logged(server, "writing messages works again")
            client.send_messages(2, "bulk", [b"works again"], partitioning=1)
            fill(client, 2, "bulk")
        assert server.stop() == 0
        assert logged(server, "writing messages works again") > recoveries
        # the first failure of a run is logged, not every failed SEND
        assert logged(server, "writing messages fails") == failures_logged + logged(
            server, "writing messages works again") - recoveries

        server.start()  # on a full disk: SQLite needs room for a new -wal and -shm
        with session(server) as client:
            assert free_bytes(small_disk) < 2 * MIB
            client.delete_stream(2)
            client.purge_stream(1)
            assert [stream.name for stream in client.get_streams()] == ["first"]
            client.create_topic(1, "after", partitions_count=1)
            client.send_messages(1, "after", [b"room again"], partitioning=1)
        assert server.stop() == 0
        server.start()
        with session(server) as client:
            assert [stream.name for stream in client.get_streams()] == ["first"]
            assert [t.name for t in client.get_topics(1)] == ["after"]
        assert (data_dir / "metadata.reserve").stat().st_size == MIB  # taken again
    finally:
        server.kill()
