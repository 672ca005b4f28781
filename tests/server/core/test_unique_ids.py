"""``core.unique_ids``: numbers handed out from durable blocks, never twice, across restarts
(a restart skips the rest of the block in use), and ``handed_out`` knowing which were. On
the SQLite catalog: the restarts reopen its file. A reservation is awaited: callers that
come while one is under way take their numbers from the same block."""

from __future__ import annotations

import asyncio

from rill.server.core.memory_catalog import MemoryCatalog
from rill.server.core.unique_ids import UniqueIds
from rill.server.storage.sqlite_catalog import SqliteCatalog


async def _take(ids: UniqueIds, name: str, count: int) -> list[int]:
    return [await ids.next(name) for _ in range(count)]


def test_numbers_are_unique_across_restarts_and_reserved_in_blocks(tmp_path):
    path = tmp_path / "metadata.sqlite3"
    seen: list[int] = []
    for _ in range(3):
        store = SqliteCatalog.open(path, synchronous_full=True)
        ids = UniqueIds(lambda: store, block=4)
        seen += asyncio.run(_take(ids, "p", 6))  # crosses a block
        assert asyncio.run(ids.next("other")) == store.reserved_ids("other") - 4
        store.close()
    assert len(set(seen)) == len(seen)
    # each run starts at a fresh block: 0..5, then 8..13, then 16..21
    assert seen == [*range(0, 6), *range(8, 14), *range(16, 22)]


def test_handed_out_covers_numbers_from_before_a_restart(tmp_path):
    path = tmp_path / "metadata.sqlite3"
    store = SqliteCatalog.open(path, synchronous_full=True)
    ids = UniqueIds(lambda: store, block=4)
    given = asyncio.run(_take(ids, "p", 2))
    assert all(ids.handed_out("p", number) for number in given)
    assert not ids.handed_out("p", 2) and not ids.handed_out("p", -1)
    store.close()
    store = SqliteCatalog.open(path, synchronous_full=True)
    restarted = UniqueIds(lambda: store, block=4)
    assert all(restarted.handed_out("p", number) for number in given)
    assert not restarted.handed_out("p", 4) and not restarted.handed_out("q", 0)
    store.close()


class WaitingCatalog(MemoryCatalog):
    """A catalog whose reservations confirm only after other tasks ran (as a controller's
    would, over the network)."""

    def __init__(self) -> None:
        super().__init__()
        self.reservations = 0

    async def reserve_ids(self, name: str, count: int) -> int:
        self.reservations += 1
        for _ in range(3):
            await asyncio.sleep(0)
        return await super().reserve_ids(name, count)


def test_callers_during_a_reservation_share_its_block():
    catalog = WaitingCatalog()
    ids = UniqueIds(lambda: catalog, block=4)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(ids.next("p") for _ in range(6))))

    numbers = asyncio.run(main())
    assert sorted(numbers) == list(range(6))
    assert catalog.reservations == 2  # 0..3, then 4..7: one block at a time
    assert all(ids.handed_out("p", number) for number in numbers)
    assert not ids.handed_out("p", 6)


def test_numbers_another_node_handed_out_count_as_handed_out():
    catalog = MemoryCatalog()  # one catalog, two nodes' ids: a cluster's shared reservations
    here, there = UniqueIds(lambda: catalog, block=4), UniqueIds(lambda: catalog, block=4)
    mine = asyncio.run(_take(here, "p", 1))  # block 0..3
    theirs = asyncio.run(_take(there, "p", 2))  # block 4..7
    assert all(here.handed_out("p", number) for number in mine + theirs)
    assert not here.handed_out("p", 1) and not here.handed_out("p", 8)
    assert not there.handed_out("p", 6)
