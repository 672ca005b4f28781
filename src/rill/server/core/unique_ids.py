"""Numbers never handed out twice under a name, across restarts and crashes (a protocol's
producer ids: Kafka's InitProducerId).

Owns: the rule. Numbers are reserved from the metadata store in blocks (``BLOCK`` at a time,
``Catalog.reserve_ids``: on disk before the first of a block is handed out) and handed out
from memory; a restart starts at the next block, so the rest of a block in use when the server
stopped is skipped, never reused. ``reserved`` is the end of the current block: every number
handed out so far is below it.
"""

from __future__ import annotations

from rill.server.core.catalog import Catalog, settled

BLOCK = 1000


class UniqueIds:
    def __init__(self, store: Catalog, block: int = BLOCK) -> None:
        self._store = store
        self._block = block
        self._next: dict[str, int] = {}
        self._end: dict[str, int] = {}

    def next(self, name: str) -> int:
        """A number (>= 0) never returned before for ``name``."""
        number = self._next.get(name, 0)
        if number >= self._end.get(name, 0):
            number = settled(self._store.reserve_ids(name, self._block))
            self._end[name] = number + self._block
        self._next[name] = number + 1
        return number

    def handed_out(self, name: str, number: int) -> bool:
        """Whether ``number`` may have been returned for ``name`` (now or before a restart)."""
        if name in self._next:
            return 0 <= number < self._next[name]
        return 0 <= number < self._store.reserved_ids(name)
