"""Helpers of the cluster tests for reading watches."""

from __future__ import annotations

from rill.server.cluster.coordinator import WatchBatch
from rill.server.cluster.watch import Resync


async def opened(watch) -> tuple:
    """Iterate ``watch`` up to its opening (empty) batch; returns (iterator, opening revision)."""
    iterator = watch.__aiter__()
    first = await iterator.__anext__()
    assert isinstance(first, WatchBatch) and first.events == ()
    return iterator, first.revision


async def next_change(iterator):
    """The next batch with events (or a Resync)."""
    while True:
        item = await iterator.__anext__()
        if isinstance(item, Resync) or item.events:
            return item
