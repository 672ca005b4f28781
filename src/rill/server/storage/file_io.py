"""Positioned reads and writes of whole ranges, and the bytes they moved.

Owns: ``write_all_at`` and ``read_all_at``, which every segment, index, staged-transaction and
verifier read or write of the log goes through, and ``IoTotals``, what they moved. Each call is
given the ``IoTotals`` to add to: a server's is ``Durability.io_totals`` (its storage's
per-server object, which every segment, staged file, recovery, verification and index rebuild
already receives), so two servers in one process count their own bytes; there is no
process-wide total. The totals are what ``GET_STATS`` reports as ``read_bytes``/
``written_bytes``: the server's own data traffic since it started, not the kernel's block I/O
of the process (which counts the imports of a start, and 0 for reads the page cache answers).
"""

from __future__ import annotations

import os
import threading


class IoTotals:
    """The bytes one server's storage read from and wrote to its files (thread safe)."""

    __slots__ = ("read_bytes", "written_bytes", "_lock")

    def __init__(self) -> None:
        self.read_bytes = 0
        self.written_bytes = 0
        self._lock = threading.Lock()  # appends and fsync rounds also run in worker threads

    def add_read(self, count: int) -> None:
        with self._lock:
            self.read_bytes += count

    def add_written(self, count: int) -> None:
        with self._lock:
            self.written_bytes += count


def write_all_at(
    descriptor: int, data: bytes | bytearray | memoryview, position: int, totals: IoTotals
) -> None:
    """Positioned write of all of ``data``, continuing after short writes; counted in
    ``totals``."""
    view = memoryview(data)
    total = view.nbytes
    while view:
        written = os.pwrite(descriptor, view, position)
        if written <= 0:
            raise OSError("write made no progress")
        view = view[written:]
        position += written
    totals.add_written(total)


def read_all_at(descriptor: int, length: int, position: int, totals: IoTotals) -> bytes:
    """Positioned read of exactly ``length`` bytes (fewer only if the file is shorter); counted
    in ``totals``."""
    data = os.pread(descriptor, length, position)
    if len(data) == length:
        totals.add_read(length)
        return data
    parts = [data]
    received = len(data)
    while received < length:
        more = os.pread(descriptor, length - received, position + received)
        if not more:
            break
        parts.append(more)
        received += len(more)
    totals.add_read(received)
    return b"".join(parts)
