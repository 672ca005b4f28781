"""The partition-log port: what the core and the protocols ask of a partition's log (``Log``),
and what opens one (``Logs``, given to the Core as ``Core(config, logs=...)``).

Two implementations, each with the same behaviour (``tests/server/storage/test_log_port.py``
runs one body over both):
  * files: ``storage.partition_log.PartitionLog`` (segments of ``.log`` and ``.index`` files,
    recovery, fsync policy), opened by ``storage.log_opener.FileLogs``, the Core's default;
  * memory: ``storage.memory_log.MemoryLog``, opened by ``MemoryLogs`` (the core's tests run on
    it: ``tests/in_process_core.py``).

These are typing only (``typing.Protocol``): the core calls the log it holds directly, so the
port costs the hot path (``append``, ``append_async``, ``read``) nothing. No core module imports
``storage.partition_log``; ``core.state`` imports ``storage.log_opener`` (the one place that
opens file logs), for a Core given no ``logs``.

Vocabulary (the log's, whatever its format): offsets increase from 0 and may hold no record
(holes, TANK's explicit sequence numbers); ``first_offset`` is the oldest kept (retention
moves it), ``next_offset`` the one the next append takes; ``messages_count`` counts records;
timestamps are µs and never decrease; a log keeps its records in one ``record_format``
(``storage.formats``) and converts on ``append_as``/``read_as``. Leader epochs and
``truncate_to`` are the replica side (cluster-design.md): see ``storage.replica``.
"""

from __future__ import annotations

from array import array
from typing import Callable, Iterable, Protocol, Sequence

from rill.server.storage.columnar import ColumnarRange
from rill.server.storage.file_region import FileRegion
from rill.server.storage.formats.conversion import Converted


class LogSettingsView(Protocol):
    """The settings of a log the core reads."""

    @property
    def segment_size(self) -> int: ...

    @property
    def record_format(self) -> str: ...


class Log(Protocol):
    """One partition's log (see the module docstring)."""

    @property
    def settings(self) -> LogSettingsView: ...

    # -- bounds ----------------------------------------------------------------------------
    @property
    def first_offset(self) -> int: ...

    @property
    def next_offset(self) -> int: ...

    @property
    def current_offset(self) -> int: ...  # the last offset; 0 when empty

    @property
    def is_empty(self) -> bool: ...  # nothing appended since creation or the last purge

    @property
    def messages_count(self) -> int: ...

    @property
    def size_bytes(self) -> int: ...

    @property
    def segments_count(self) -> int: ...

    @property
    def last_timestamp(self) -> int: ...

    # -- appends (each returns its (first, last) offsets) ------------------------------------
    def append(self, raw_messages: bytes | bytearray | memoryview, now_us: int,
               gaps: bool = False) -> tuple[int, int]: ...

    async def wait_idle(self) -> None: ...

    async def append_async(self, raw_messages: bytes | bytearray | memoryview, now_us: int,
                           gaps: bool = False, published: Callable[[], None] | None = None
                           ) -> tuple[int, int]: ...

    def append_as(self, record_format: str, raw: bytes | bytearray | memoryview, now_us: int,
                  gaps: bool = False) -> tuple[int, int]: ...

    def append_stamped(self, records: bytearray, positions: array, now_us: int
                       ) -> tuple[int, int]: ...

    def append_replicated(self, records: bytes, first_offset: int,
                          epochs: Sequence[Sequence[int]] | None = None) -> tuple[int, int]: ...

    async def append_replicated_async(self, records: bytes, first_offset: int,
                                      epochs: Sequence[Sequence[int]] | None = None
                                      ) -> tuple[int, int]: ...

    # -- durability ------------------------------------------------------------------------
    async def wait_durable(self) -> None: ...

    async def sync(self) -> None: ...

    # -- reads -----------------------------------------------------------------------------
    def read(self, offset: int, count: int, max_bytes: int | None = None, regions: bool = False
             ) -> tuple[int, list[bytes | FileRegion]]: ...

    def read_as(self, record_format: str, offset: int, count: int,
                max_bytes: int | None = None) -> Converted: ...

    def read_columnar(self, offset: int, count: int, max_bytes: int) -> ColumnarRange: ...

    def bytes_after(self, offset: int) -> int: ...

    def start_of_last(self, count: int) -> int: ...

    def offset_for_timestamp(self, timestamp_us: int) -> int | None: ...

    def record_offset_for_timestamp(self, timestamp_us: int) -> int | None: ...

    def record_at_or_after(self, timestamp_us: int) -> tuple[int, int] | None: ...

    # -- replica side ----------------------------------------------------------------------
    @property
    def leader_epoch(self) -> int: ...

    @leader_epoch.setter
    def leader_epoch(self, epoch: int) -> None: ...

    @property
    def last_epoch(self) -> int | None: ...

    def epoch_end(self, epoch: int) -> tuple[int, int] | None: ...

    def epochs_from(self, offset: int) -> list[tuple[int, int]]: ...

    def truncate_to(self, offset: int, floor: int = 0) -> None: ...

    @property
    def stored_high_watermark(self) -> int | None: ...

    def store_high_watermark(self, offset: int) -> None: ...

    @property
    def incarnation(self) -> int | None: ...  # which incarnation of its partition it holds

    def store_incarnation(self, incarnation: int) -> None: ...

    # -- retention and life ----------------------------------------------------------------
    def delete_expired_segments(self, now_us: int, expiry_us: int) -> int: ...

    def delete_oldest_segment(self) -> bool: ...

    def purge(self) -> None: ...

    def close(self, sync: bool = True) -> None: ...  # sync False: its partition is deleted

    def destroy(self) -> None: ...


class Logs(Protocol):
    """Opens partitions' logs (the Core's ``logs``)."""

    def open(self, stream_id: int, topic_id: int, partition_id: int, record_format: str,
             clean_shutdown: bool, sync_parent: bool = True) -> Log:
        """The partition's log, created empty or opened (recovered when ``clean_shutdown`` is
        false). May run in a worker thread (creating many partitions). ``sync_parent``: false
        when the caller syncs the parent of many created logs once."""
        ...

    def sync_created(self, stream_id: int, topic_id: int) -> None:
        """Make durable the creation of the topic's logs opened with ``sync_parent`` false."""
        ...

    async def verify(self, logs: Callable[[], Iterable[Log]]) -> None:
        """Check, off the event loop, what opening the logs after an unclean stop did not."""
        ...
