"""``core.unique_ids``: numbers handed out from durable blocks, never twice, across restarts
(a restart skips the rest of the block in use), and ``handed_out`` knowing which were. On
the SQLite catalog: the restarts reopen its file."""

from __future__ import annotations

from rill.server.core.unique_ids import UniqueIds
from rill.server.storage.sqlite_catalog import SqliteCatalog


def test_numbers_are_unique_across_restarts_and_reserved_in_blocks(tmp_path):
    path = tmp_path / "metadata.sqlite3"
    seen: list[int] = []
    for _ in range(3):
        store = SqliteCatalog.open(path, synchronous_full=True)
        ids = UniqueIds(store, block=4)
        seen += [ids.next("p") for _ in range(6)]  # crosses a block
        assert ids.next("other") == store.reserved_ids("other") - 4
        store.close()
    assert len(set(seen)) == len(seen)
    # each run starts at a fresh block: 0..5, then 8..13, then 16..21
    assert seen == [*range(0, 6), *range(8, 14), *range(16, 22)]


def test_handed_out_covers_numbers_from_before_a_restart(tmp_path):
    path = tmp_path / "metadata.sqlite3"
    store = SqliteCatalog.open(path, synchronous_full=True)
    ids = UniqueIds(store, block=4)
    given = [ids.next("p") for _ in range(2)]
    assert all(ids.handed_out("p", number) for number in given)
    assert not ids.handed_out("p", 2) and not ids.handed_out("p", -1)
    store.close()
    store = SqliteCatalog.open(path, synchronous_full=True)
    restarted = UniqueIds(store, block=4)
    assert all(restarted.handed_out("p", number) for number in given)
    assert not restarted.handed_out("p", 4) and not restarted.handed_out("q", 0)
    store.close()
