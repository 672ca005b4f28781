"""Registry: the streams of a server, or the topics of a stream, by id and by name.

Owns one collection's three views and keeps them in step: the dict by id (a real ``dict``, so
lookups, iteration and ``sorted`` stay at C speed), an index by name (also as a live read-only
mapping, ``by_name``: a per-request name lookup costs O(1), not a copy of the collection), and
the lowest free id for auto-assigned ids. Lookups by name and id assignment are O(1) /
amortised O(log n), so creating the 100,000th stream costs what creating the first did (a scan
over every stream per creation made 100,000 creations quadratic).

Invariants: items are added with ``registry[id] = item`` and removed with ``del registry[id]``;
a name changes only through ``rename``. Every id below the free-id cursor is either in use or
in the heap of freed ids.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, TypeVar


class _Named(Protocol):
    name: str


Item = TypeVar("Item", bound=_Named)


class Registry(dict):  # dict[int, Item]
    """A dict id -> item that also finds items by name and knows the lowest free id."""

    def __init__(self) -> None:
        super().__init__()
        self._by_name: dict[str, int] = {}
        self._cursor = 1  # every id below it is used or in self._freed
        self._freed: list[int] = []

    def __setitem__(self, key: int, item: Any) -> None:
        previous = self.get(key)
        if previous is not None:
            self._by_name.pop(previous.name, None)
        super().__setitem__(key, item)
        self._by_name[item.name] = key

    def __delitem__(self, key: int) -> None:
        item = self[key]
        super().__delitem__(key)
        if self._by_name.get(item.name) == key:
            del self._by_name[item.name]
        if key < self._cursor:
            heapq.heappush(self._freed, key)

    def named(self, name: str) -> Any:
        """The item called ``name``, or None."""
        key = self._by_name.get(name)
        return None if key is None else self[key]

    def by_name(self) -> ByName:
        """A live read-only view name -> item (iterated in id order)."""
        return ByName(self)

    def rename(self, key: int, name: str) -> None:
        item = self[key]
        if self._by_name.get(item.name) == key:
            del self._by_name[item.name]
        item.name = name
        self._by_name[name] = key

    def lowest_free_id(self) -> int:
        """The lowest id from 1 that is not in use (ids freed by deletion are reused)."""
        freed = self._freed
        while freed and freed[0] in self:  # taken again since it was freed
            heapq.heappop(freed)
        if freed:
            return freed[0]
        while self._cursor in self:
            self._cursor += 1
        return self._cursor


class ByName(Mapping):  # Mapping[str, Item]
    """A registry's items by name, as it is now (nothing copied)."""

    __slots__ = ("_registry",)

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def __getitem__(self, name: str) -> Any:
        item = self._registry.named(name)
        if item is None:
            raise KeyError(name)
        return item

    def get(self, name: str, default: Any = None) -> Any:
        item = self._registry.named(name)
        return default if item is None else item

    def __contains__(self, name: object) -> bool:
        return self._registry.named(name) is not None  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[str]:
        registry = self._registry
        return iter([registry[key].name for key in sorted(registry)])

    def __len__(self) -> int:
        return len(self._registry)
