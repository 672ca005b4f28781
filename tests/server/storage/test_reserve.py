"""The metadata space reserve: taken only with room to spare, released for metadata, and the
room it leaves kept from message data."""

from __future__ import annotations

import os

from rill.server.storage.reserve import SpaceReserve


def test_take_release_and_take_again(tmp_path):
    reserve = SpaceReserve(tmp_path / "metadata.reserve", 64 * 1024)
    assert not reserve.held
    assert reserve.take() and reserve.held
    assert (tmp_path / "metadata.reserve").stat().st_size == 64 * 1024
    assert SpaceReserve(tmp_path / "metadata.reserve", 64 * 1024).held  # seen at the next start
    assert reserve.release() and not reserve.held
    assert not reserve.release()  # idempotent
    assert reserve.room_for_data()  # plenty of room: and it is taken again
    assert reserve.held


def test_no_room_means_no_reserve_and_the_last_bytes_stay_for_metadata(tmp_path, monkeypatch):
    reserve = SpaceReserve(tmp_path / "metadata.reserve", 1 << 20)
    free = {"bytes": (1 << 20) + 4096}

    class Usage:
        f_frsize = 1

        @property
        def f_bavail(self):
            return free["bytes"]

    monkeypatch.setattr(os, "statvfs", lambda path: Usage())
    assert not reserve.take()  # never from the last free bytes
    assert not (tmp_path / "metadata.reserve").exists()
    assert reserve.room_for_data()  # more than the reserve's size is free
    free["bytes"] = 1 << 20
    assert not reserve.room_for_data()  # what is left belongs to the metadata


def test_a_zero_size_turns_it_off(tmp_path):
    reserve = SpaceReserve(tmp_path / "metadata.reserve", 0)
    assert not reserve.take() and reserve.room_for_data()
    assert not (tmp_path / "metadata.reserve").exists()
