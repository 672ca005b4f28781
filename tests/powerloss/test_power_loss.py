"""Power loss: a real server on a file system that drops every unsynced byte at a simulated
power cut (``powercut_fs``), killed with -9 while producers send and consumer offsets are
stored, then started again on what survived.

* ``fsync = always``: every acknowledged message and offset survives, intact and in order;
* ``fsync = interval``: what was acknowledged more than one interval (plus a margin for this
  slow test file system) before the cut survives, metadata and offsets included;
* ``fsync = never``: acknowledged messages ARE lost — the control that shows the harness drops
  unsynced data (a kill -9 alone never loses anything: the page cache keeps it).
Every start after a cut must be clean: streams, topics, offsets, and new writes accepted.
The always and interval cases run again with more partitions than ``max_open_files`` allows
open: the descriptor cache closes files written and not yet synced, and a sync reopens them.
"""

from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass, field

import pytest

from rill import errors
from rill.client import Client, PollingStrategy
from server_process import RillProcess

from .powercut import PowerCutMount

PARTITIONS = 3
PER_BATCH = 5
INTERVAL = 0.2  # s, for fsync = interval
MARGIN = 1.5  # s past the interval that a sync round may take on this FUSE file system
ENV = {"RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false",
       "RILL_SYSTEM_METADATA_RESERVE": "64 KiB", "RILL_ROOT_PASSWORD_HASH_COST": "4",
       "RILL_SYSTEM_FSYNC_INTERVAL": f"{int(INTERVAL * 1000)} ms",
       "RILL_SYSTEM_SEGMENT_SIZE": "256 KiB"}


@dataclass
class Acknowledged:
    """What the server acknowledged, and when (monotonic seconds)."""

    batches: dict[int, list[tuple[int, float]]] = field(default_factory=dict)  # partition -> (n, t)
    offsets: list[tuple[int, float]] = field(default_factory=list)  # stored offset, time
    lock: threading.Lock = field(default_factory=threading.Lock)


def payload(partition: int, batch: int, index: int) -> bytes:
    return f"p{partition}-b{batch}-m{index}-".encode() * 8


@pytest.fixture
def mount(tmp_path):
    fs = PowerCutMount(tmp_path).mount()
    yield fs
    fs.stop()


def load(server: RillProcess, acknowledged: Acknowledged, seconds: float,
         partitions: int = PARTITIONS) -> float:
    """Producers on every partition and an offset committer for ``seconds``, then kill -9
    while they are still at it; returns the time of the kill."""
    stop = threading.Event()

    def produce(partition: int) -> None:
        with Client(server.address, reconnect=False) as client:
            client.login_user("iggy", "iggy")
            batch = 0
            while not stop.is_set():
                try:
                    client.send_messages(1, "t", [payload(partition, batch, i) for i in range(PER_BATCH)],
                                         partitioning=partition)
                except (errors.RillError, OSError):
                    return
                with acknowledged.lock:
                    acknowledged.batches.setdefault(partition, []).append((batch, time.monotonic()))
                batch += 1

    def commit_offsets() -> None:
        with Client(server.address, reconnect=False) as client:
            client.login_user("iggy", "iggy")
            offset = 0
            while not stop.is_set():
                try:
                    client.store_consumer_offset(1, "t", offset, consumer=7, partition_id=1)
                except (errors.RillError, OSError):
                    return
                acknowledged.offsets.append((offset, time.monotonic()))
                offset += 1
                time.sleep(0.01)

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(1, partitions + 1)]
    threads.append(threading.Thread(target=commit_offsets))
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    server.kill()  # mid-stream: some sends are in flight
    killed_at = time.monotonic()
    stop.set()
    for thread in threads:
        thread.join(30)
    return killed_at


def stored(server: RillProcess, partitions: int = PARTITIONS
           ) -> tuple[dict[int, list[bytes]], int | None]:
    """Every message of every partition (checked for order and checksums), and the stored
    offset of consumer 7."""
    with Client(server.address) as client:
        client.login_user("iggy", "iggy")
        assert client.get_stream("power").topics[0].name == "t"
        found = {}
        for partition in range(1, partitions + 1):
            messages = []
            while True:
                polled = client.poll_messages(1, "t", partition_id=partition, count=1000,
                                              strategy=PollingStrategy.offset(len(messages)))
                if not polled.messages:
                    break
                messages += polled.messages
            assert [m.offset for m in messages] == list(range(len(messages)))
            assert all(m.checksum == zlib.crc32(m.payload) for m in messages)
            found[partition] = [m.payload for m in messages]
        offset = client.get_consumer_offset(1, "t", consumer=7, partition_id=1)
        # a clean start accepts new writes after the recovered ones
        client.send_messages(1, "t", [b"after the power cut"], partitioning=1)
        return found, (offset.stored_offset if offset is not None else None)


def expected_prefix(partition: int, batches: int) -> list[bytes]:
    return [payload(partition, b, i) for b in range(batches) for i in range(PER_BATCH)]


def start_on(mount: PowerCutMount, fsync: str, partitions: int = PARTITIONS,
             env: dict[str, str] | None = None) -> RillProcess:
    server = RillProcess(mount.mountpoint / "data",
                         env=dict(ENV, RILL_SYSTEM_FSYNC=fsync, **(env or {}))).start()
    with Client(server.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("power", stream_id=1)
        client.create_topic(1, "t", partitions_count=partitions)
    return server


# 24 partitions have 48 active files (log and index); 16 may be open: files are closed dirty
FEW_FILES = {"partitions": 24, "env": {"RILL_SYSTEM_MAX_OPEN_FILES": "16"}}


@pytest.mark.parametrize("files", [{}, FEW_FILES], ids=["all open", "closed and reopened"])
def test_fsync_always_loses_nothing_acknowledged(mount, files):
    partitions = files.get("partitions", PARTITIONS)
    server = start_on(mount, "always", **files)
    acknowledged = Acknowledged()
    load(server, acknowledged, seconds=3.0, partitions=partitions)
    assert all(len(acknowledged.batches.get(p, [])) > 5 for p in range(1, partitions + 1))
    mount.power_cycle()
    server.restart()
    try:
        found, offset = stored(server, partitions)
    finally:
        server.kill()
    for partition in range(1, partitions + 1):
        batches = len(acknowledged.batches[partition])
        # every acknowledged batch is there, in order; at most the one in flight beyond
        assert found[partition][: batches * PER_BATCH] == expected_prefix(partition, batches)
        assert len(found[partition]) <= (batches + 1) * PER_BATCH
    last_offset = acknowledged.offsets[-1][0]
    assert offset in (last_offset, last_offset + 1)


@pytest.mark.parametrize("files", [{}, FEW_FILES], ids=["all open", "closed and reopened"])
def test_fsync_interval_loses_at_most_the_last_interval(mount, files):
    partitions = files.get("partitions", PARTITIONS)
    server = start_on(mount, "interval", **files)
    time.sleep(INTERVAL + MARGIN)  # the stream and topic are older than an interval
    acknowledged = Acknowledged()
    killed_at = load(server, acknowledged, seconds=4.0, partitions=partitions)
    mount.power_cycle()
    server.restart()
    try:
        found, offset = stored(server, partitions)
    finally:
        server.kill()
    safe_before = killed_at - INTERVAL - MARGIN
    for partition in range(1, partitions + 1):
        old = [n for n, at in acknowledged.batches[partition] if at < safe_before]
        assert old, "the run is too short to have batches older than an interval"
        assert found[partition][: len(old) * PER_BATCH] == expected_prefix(partition, len(old))
    old_offsets = [value for value, at in acknowledged.offsets if at < safe_before]
    assert offset is not None and offset >= old_offsets[-1]


def test_fsync_interval_syncs_the_files_the_cache_closed_while_dirty(mount):
    """One batch to each of 24 partitions: each send makes the cache close files written just
    before (48 active files, 16 may be open), mostly before a sync pass came by. The pass
    reopens them: nothing older than an interval is lost."""
    partitions = FEW_FILES["partitions"]
    server = start_on(mount, "interval", **FEW_FILES)
    time.sleep(INTERVAL + MARGIN)  # the stream and topic are older than an interval
    with Client(server.address) as client:
        client.login_user("iggy", "iggy")
        for partition in range(1, partitions + 1):
            client.send_messages(1, "t", [payload(partition, 0, i) for i in range(PER_BATCH)],
                                 partitioning=partition)
    time.sleep(INTERVAL + MARGIN)
    server.kill()
    mount.power_cycle()
    server.restart()
    try:
        found, _ = stored(server, partitions)
    finally:
        server.kill()
    for partition in range(1, partitions + 1):
        assert found[partition] == expected_prefix(partition, 1)


def test_fsync_never_does_lose_acknowledged_data_on_a_power_cut(mount):
    """The control: without fsync the cut must bite, or the tests above prove nothing."""
    server = start_on(mount, "never")
    acknowledged = Acknowledged()
    load(server, acknowledged, seconds=2.0)
    mount.cut()
    mount.unmount()
    logs = list((mount.backing / "data" / "streams").rglob("*.log"))
    durable = sum(path.stat().st_size for path in logs)
    sent = sum(len(batches) for batches in acknowledged.batches.values())
    assert sent > 0 and durable < sent * PER_BATCH * 45  # less than the records acknowledged
    mount.mount()
