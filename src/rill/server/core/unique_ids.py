"""Numbers never handed out twice under a name, across restarts and crashes (a protocol's
producer ids: Kafka's InitProducerId).

Owns: the rule. Numbers are reserved from the catalog in blocks (a cluster's: from etcd,
unique across its nodes) (``BLOCK`` at a time,
``Catalog.reserve_ids``: on disk before the first of a block is handed out) and handed out
from memory; a restart starts at the next block, so the rest of a block in use when the server
stopped is skipped, never reused. Every number below the catalog's reservations may have been
handed out (by this server before a restart, or by another node of a cluster from its own
block), except the rest of this server's current block. A reservation is awaited (the catalog
confirms it); callers that need a number while one is under way wait for it and take theirs
from the same block, so concurrent callers never reserve a block each.
"""

from __future__ import annotations

import asyncio

from typing import Callable

from rill.server.core.catalog import Catalog

BLOCK = 1000


class UniqueIds:
    def __init__(self, catalog: Callable[[], Catalog], block: int = BLOCK) -> None:
        self._catalog = catalog  # read at each use (a cluster node replaces the core's)
        self._block = block
        self._next: dict[str, int] = {}
        self._end: dict[str, int] = {}
        self._reserving = asyncio.Lock()  # one reservation at a time (they are rare)

    async def next(self, name: str) -> int:
        """A number (>= 0) never returned before for ``name``."""
        if self._next.get(name, 0) >= self._end.get(name, 0):
            async with self._reserving:
                # another caller may have reserved a block while this one waited
                if self._next.get(name, 0) >= self._end.get(name, 0):
                    first = await self._catalog().reserve_ids(name, self._block)
                    self._next[name] = first
                    self._end[name] = first + self._block
        number = self._next[name]
        self._next[name] = number + 1
        return number

    def handed_out(self, name: str, number: int) -> bool:
        """Whether ``number`` may have been returned for ``name``: by this server, now or
        before a restart, or by another node of its cluster."""
        if self._next.get(name, 0) <= number < self._end.get(name, 0):
            return False  # the rest of our own block: nobody else has it
        return 0 <= number < self._catalog().reserved_ids(name)
