"""The data directory's lock: one holder at a time, named to whoever is refused."""

from __future__ import annotations

import os

import pytest

from rill.server.storage.data_lock import DataDirectoryInUse, DataDirectoryLock


def test_a_second_holder_is_refused_with_the_first_ones_pid(tmp_path) -> None:
    first = DataDirectoryLock.acquire(tmp_path / "rill.lock")
    with pytest.raises(DataDirectoryInUse, match=f"pid {os.getpid()} on "):
        DataDirectoryLock.acquire(tmp_path / "rill.lock")
    first.release()
    DataDirectoryLock.acquire(tmp_path / "rill.lock").release()  # free again


def test_the_lock_file_is_private(tmp_path) -> None:
    previous = os.umask(0o022)
    try:
        DataDirectoryLock.acquire(tmp_path / "rill.lock").release()
    finally:
        os.umask(previous)
    assert os.stat(tmp_path / "rill.lock").st_mode & 0o777 == 0o600
