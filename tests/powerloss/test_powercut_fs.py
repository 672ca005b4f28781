"""The power-cut file system itself: unsynced data is lost at a cut, synced data is not."""

from __future__ import annotations

import os

import pytest

from .powercut import PowerCutMount


@pytest.fixture
def fs(tmp_path):
    mount = PowerCutMount(tmp_path).mount()
    yield mount
    mount.stop()


def write(path, data: bytes, offset: int = 0, sync: bool = False) -> None:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.pwrite(descriptor, data, offset)
        if sync:
            os.fsync(descriptor)
    finally:
        os.close(descriptor)


def test_unsynced_writes_are_seen_until_the_cut_and_lost_by_it(fs):
    path = fs.mountpoint / "file"
    write(path, b"durable" * 1000, sync=True)
    write(path, b"VOLATILE", offset=3)
    write(path, b"tail", offset=7000)
    assert path.read_bytes()[:12] == b"durVOLATILEb" and path.stat().st_size == 7004
    assert (fs.backing / "file").read_bytes() == b"durable" * 1000  # not on "disk" yet
    fs.power_cycle()
    assert path.read_bytes() == b"durable" * 1000


def test_fsync_makes_a_file_durable_and_only_that_file(fs):
    synced, lost = fs.mountpoint / "synced", fs.mountpoint / "lost"
    write(synced, b"a" * 10_000)
    write(lost, b"b" * 10_000)
    descriptor = os.open(synced, os.O_RDONLY)
    os.fsync(descriptor)  # through another descriptor than the writer's, as rill's syncs
    os.close(descriptor)
    fs.power_cycle()
    assert synced.read_bytes() == b"a" * 10_000
    assert lost.exists() and lost.read_bytes() == b""  # created (metadata), never synced


def test_truncation_is_data_and_the_cut_undoes_it(fs):
    path = fs.mountpoint / "file"
    write(path, bytes(range(256)) * 64, sync=True)  # 16 KiB
    os.truncate(path, 5000)
    write(path, b"x", offset=9000)  # grows again: 5000..9000 must read as zeros
    assert path.read_bytes()[5000:9000] == bytes(4000)
    fs.power_cycle()
    assert path.read_bytes() == bytes(range(256)) * 64
    os.truncate(path, 100)
    descriptor = os.open(path, os.O_RDWR)
    os.fsync(descriptor)
    os.close(descriptor)
    fs.power_cycle()
    assert path.read_bytes() == bytes(range(100))


def test_renames_and_unlinks_are_durable_at_once_their_data_is_not(fs):
    directory = fs.mountpoint / "dir"
    directory.mkdir()
    write(directory / "kept.tmp", b"synced", sync=True)
    os.replace(directory / "kept.tmp", directory / "kept")
    write(directory / "unsynced.tmp", b"written, renamed, never synced")
    os.replace(directory / "unsynced.tmp", directory / "unsynced")
    write(directory / "gone", b"x", sync=True)
    os.unlink(directory / "gone")
    fs.power_cycle()
    assert sorted(p.name for p in directory.iterdir()) == ["kept", "unsynced"]
    assert (directory / "kept").read_bytes() == b"synced"
    assert (directory / "unsynced").read_bytes() == b""  # the classic bug this harness catches
