"""Message deduplication by id within a partition (wire §6.4, ``[system.message_deduplication]``).

Owns: the per-partition window of recently seen message ids and the rewrite of a SEND message
region without the duplicates. When deduplication is enabled, a SEND passes
``MessageDeduplicator.admit`` to the broker's append as its admission rule
(``core.types.Admission``), which the core runs with the log's append, no other append to the
partition in between: it walks the region once, drops every message whose id is in the
partition's window (or appeared earlier in the same batch), the log appends what is left as one
batch (so offsets stay dense) and only then are the new ids remembered, so a batch the log
rejects (too big, malformed) leaves the window untouched. A batch made only of duplicates
appends nothing and still succeeds. A SEND into a topic of another record format is converted,
not admitted: Iggy's message ids are not kept there.

Rules:
  * id 0 means "server assigns a fresh UUIDv7": such messages are never duplicates and are not
    remembered (their new id is unique by construction).
  * An id is remembered for ``expiry`` seconds from its first acceptance; a duplicate does not
    refresh it. At most ``max_entries`` ids are kept per partition; the oldest go first
    (``max_entries`` 0 remembers nothing across batches).
  * A region the walk cannot parse is passed to the log unchanged, which rejects it with the
    proper status; nothing is remembered.

The window lives in memory only: a restart (or a deleted and recreated partition) forgets it;
purging a topic or stream keeps it (the ids were accepted, even if the messages are gone).
When deduplication is disabled, no deduplicator exists and the send path passes no admission
rule, so it costs nothing per message.
"""

from __future__ import annotations

import struct
import time
import weakref
from collections import deque
from itertools import repeat
from typing import Callable

from rill.protocol.iggy.layout import SEND_HEAD, SEND_PREFIX_SIZE
from rill.server.config import MessageDeduplicationConfig
from rill.server.core.types import Partition

_U32 = struct.Struct("<I")
_ZERO_ID = bytes(16)


class IdWindow:
    """The ids accepted recently in one partition: id -> acceptance time, plus their order.

    ``order`` holds every remembered id exactly once, oldest first (an id is only re-added
    after it left both), so the oldest and the expired ids are always at its left end.
    """

    __slots__ = ("seen", "order")

    def __init__(self) -> None:
        self.seen: dict[bytes, float] = {}
        self.order: deque[bytes] = deque()

    def forget_expired(self, now: float, expiry: float) -> None:
        seen, order = self.seen, self.order
        while order and now - seen[order[0]] >= expiry:
            del seen[order.popleft()]

    def remember(self, ids: list[bytes], now: float, max_entries: int) -> None:
        seen, order = self.seen, self.order
        seen.update(zip(ids, repeat(now)))
        order.extend(ids)
        while len(order) > max(max_entries, 0):
            del seen[order.popleft()]


class MessageDeduplicator:
    """Drops messages whose id a partition accepted within the window; one per server."""

    def __init__(
        self,
        max_entries: int,
        expiry: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.expiry = expiry  # seconds; infinity = never forget (except by max_entries)
        self.clock = clock
        # keyed by the Partition object: a deleted partition takes its window with it
        self._windows: weakref.WeakKeyDictionary[Partition, IdWindow] = weakref.WeakKeyDictionary()

    @classmethod
    def from_config(cls, config: MessageDeduplicationConfig) -> MessageDeduplicator | None:
        """A deduplicator when enabled, else None (the send path then skips deduplication)."""
        if not config.enabled:
            return None
        return cls(config.max_entries, config.expiry)

    def window(self, partition: Partition) -> IdWindow:
        window = self._windows.get(partition)
        if window is None:
            window = self._windows[partition] = IdWindow()
        return window

    def filter(
        self, partition: Partition, raw: bytes | bytearray | memoryview
    ) -> tuple[bytes | bytearray | memoryview | None, list[bytes]]:
        """``(region without duplicates or None if nothing is left, ids to remember)``.

        The region is returned as given when nothing was dropped (no copy) or when it cannot be
        parsed (the log then rejects it). Remember the ids only once the append succeeded.
        """
        view = memoryview(raw)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        end = len(view)
        read_head = SEND_HEAD.unpack_from
        read_u32 = _U32.unpack_from
        window = self.window(partition)
        window.forget_expired(self.clock(), self.expiry)
        seen = window.seen
        accepted: dict[bytes, None] = {}  # new ids of this batch, in order (an ordered set)
        dropped: list[tuple[int, int]] = []  # (start, stop) of each duplicate
        position = 0
        try:
            while position < end:
                message_id, headers_length = read_head(view, position)
                payload_length_position = position + SEND_PREFIX_SIZE + headers_length
                (payload_length,) = read_u32(view, payload_length_position)
                stop = payload_length_position + 4 + payload_length
                if payload_length == 0 or stop > end:
                    return raw, []
                if message_id != _ZERO_ID:
                    if message_id in seen or message_id in accepted:
                        dropped.append((position, stop))
                    else:
                        accepted[message_id] = None
                position = stop
        except struct.error:
            return raw, []
        if not dropped:
            return raw, list(accepted)
        kept = _kept_slices(view, dropped)
        if not kept:
            return None, []
        return b"".join(kept), list(accepted)

    def admit(
        self, partition: Partition, raw: bytes | bytearray | memoryview
    ) -> tuple[bytes | bytearray | memoryview | None, Callable[[], None] | None]:
        """The admission rule of a SEND (``core.types.Admission``): ``raw`` less its
        duplicates (None: nothing left), and what remembers its new ids once it is stored."""
        region, new_ids = self.filter(partition, raw)
        if region is None or not new_ids:
            return region, None
        return region, lambda: self.window(partition).remember(new_ids, self.clock(),
                                                               self.max_entries)

    def append(
        self, partition: Partition, raw: bytes | bytearray | memoryview, now_us: int
    ) -> int:
        """Append ``raw`` less its duplicates to the partition's log; returns the messages
        appended (the core's append with ``admit`` does this on the server)."""
        region, remember = self.admit(partition, raw)
        if region is None:
            return 0
        first, last = partition.log.append(region, now_us)
        if remember is not None:
            remember()
        return last - first + 1


def _kept_slices(view: memoryview, dropped: list[tuple[int, int]]) -> list[memoryview]:
    """Slices of ``view`` between the dropped byte ranges (sorted, not overlapping)."""
    kept: list[memoryview] = []
    position = 0
    for start, stop in dropped:
        if start > position:
            kept.append(view[position:start])
        position = stop
    if position < len(view):
        kept.append(view[position:])
    return kept
