"""A range of a log file handed to a link to send as it is: zero-copy reads.

Owns: ``FileRegion`` (a descriptor of its own, a position and a length), ``send_region`` (the
kernel copies the file's bytes to a socket: ``os.sendfile``) and ``MIN_REGION_BYTES``.

A read that asks for regions (``PartitionLog.read(..., regions=True)``) gets one for each range
of records that is already verified (checked against its checksums when it was written or first
read, as every served byte is) and at least ``MIN_REGION_BYTES`` long; anything else comes back
as bytes, as before. The region holds a duplicate of the log's descriptor, so it stays readable
if retention deletes the segment or the descriptor cache closes its file before it is sent. Its
owner sends it (``send_region``) or reads it (``read``: links that cannot send a file, TLS and
QUIC) and then ``close``s it (dropping it closes it too).
"""

from __future__ import annotations

import os
from typing import Callable

# below this, a pread and one more write cost less than dup + sendfile + close
MIN_REGION_BYTES = 64 * 1024


class FileRegion:
    __slots__ = ("descriptor", "position", "length", "_counted")

    def __init__(self, descriptor: int, position: int, length: int,
                 counted: Callable[[int], None]) -> None:
        self.descriptor = os.dup(descriptor)
        self.position = position
        self.length = length
        self._counted = counted  # the bytes moved, for the server's read totals

    def __len__(self) -> int:
        return self.length

    def read(self, skip: int = 0) -> bytes:
        """The region's bytes from ``skip`` on (a copy in memory)."""
        wanted = self.length - skip
        parts = []
        position = self.position + skip
        while wanted > 0:
            data = os.pread(self.descriptor, wanted, position)
            if not data:
                raise OSError(f"the log file ends {wanted} bytes before its region does")
            parts.append(data)
            position += len(data)
            wanted -= len(data)
        self._counted(self.length - skip)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self) -> None:
        if self.descriptor >= 0:
            os.close(self.descriptor)
            self.descriptor = -1

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileRegion(position={self.position}, length={self.length})"


def send_region(socket_descriptor: int, region: FileRegion, start: int = 0) -> int:
    """Send as much of ``region`` from byte ``start`` on as the (non-blocking) socket takes
    now; the bytes sent."""
    sent = 0
    while start + sent < region.length:
        try:
            count = os.sendfile(socket_descriptor, region.descriptor,
                                region.position + start + sent, region.length - start - sent)
        except (BlockingIOError, InterruptedError):
            break
        if count == 0:
            raise OSError(f"the log file ends before its region does ({region!r})")
        sent += count
    if sent:
        region._counted(sent)
    return sent
