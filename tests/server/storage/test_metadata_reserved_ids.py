"""``MetadataStore.reserve_ids``: blocks of numbers never reserved twice under a name, kept
across a reopen whatever the fsync policy, and synced even under ``synchronous=NORMAL``."""

from __future__ import annotations

import sqlite3

import pytest

from rill.server.storage.metadata import MetadataStore


@pytest.mark.parametrize("synchronous_full", [True, False])
def test_reserved_blocks_never_overlap_across_reopens(tmp_path, synchronous_full):
    path = tmp_path / "metadata.sqlite3"
    blocks = []
    for _ in range(3):
        store = MetadataStore(path, synchronous_full=synchronous_full)
        blocks.append((store.reserve_ids("kafka-producer-id", 10), 10))
        blocks.append((store.reserve_ids("kafka-producer-id", 5), 5))
        assert store.reserved_ids("kafka-producer-id") == blocks[-1][0] + 5
        store.close()
    numbers = [first + n for first, count in blocks for n in range(count)]
    assert numbers == list(range(45))


def test_names_are_apart_and_the_store_keeps_its_synchronous_setting(tmp_path):
    store = MetadataStore(tmp_path / "metadata.sqlite3", synchronous_full=False)
    assert store.reserve_ids("a", 3) == 0
    assert store.reserve_ids("b", 3) == 0
    assert store.reserve_ids("a", 1) == 3
    assert store.reserved_ids("never") == 0
    # NORMAL (1) again after the FULL (2) reservation
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 1
    store.close()


def test_a_reservation_is_synchronous_full(tmp_path, monkeypatch):
    store = MetadataStore(tmp_path / "metadata.sqlite3", synchronous_full=False)
    seen = []
    real = store._reserve_ids

    def spy(name, count):
        seen.append(store._db.execute("PRAGMA synchronous").fetchone()[0])
        return real(name, count)

    monkeypatch.setattr(store, "_reserve_ids", spy)
    store.reserve_ids("a", 2)
    assert seen == [2]  # FULL: the write-ahead log is synced at the commit
    with pytest.raises(ValueError):
        store.reserve_ids("a", 0)
    store.close()
    assert sqlite3.connect(tmp_path / "metadata.sqlite3").execute(
        "SELECT value FROM meta WHERE key = 'next-id:a'").fetchone() == ("2",)
