"""Replies that hold file regions, over one plain TCP link: the kernel copies the log's bytes
from the page cache to the socket (``os.sendfile``), none of them through Python.

Owns: ``FileSender``. The parts of a reply go out in order: bytes through the transport, a
region by sendfile once nothing is buffered ahead of it. When the socket is full, the region
waits for it to become writable (a watch on a duplicate of the socket's descriptor, so the
event loop's own watch of the transport is untouched) while the connection holds its next reply
back (``hold``/``release``); other connections are served meanwhile. A link that cannot send
files (TLS: ``socket_descriptor`` None) or whose transport still has bytes buffered reads the
region and writes it through the transport instead. Every region is closed once sent or dropped.
"""

from __future__ import annotations

import asyncio
import os
from typing import Callable, Sequence

from rill.server.storage.file_region import FileRegion, send_region

Part = bytes | bytearray | memoryview | FileRegion


class FileSender:
    def __init__(self, transport: asyncio.Transport, socket_descriptor: int | None,
                 hold: Callable[[], None], release: Callable[[], None]) -> None:
        self.transport = transport
        self.socket_descriptor = socket_descriptor
        self.hold = hold  # the connection sends nothing more until ``release``
        self.release = release
        self._waiting: tuple[list[Part], int] | None = None  # parts left, bytes of the first sent
        self._watched: int | None = None  # the duplicate descriptor watched for writability

    @property
    def busy(self) -> bool:
        """A region waits for the socket: the connection's next reply must wait too."""
        return self._waiting is not None

    def send(self, parts: Sequence[Part]) -> None:
        """Send one reply's parts (raises OSError when the peer is gone or a file unreadable;
        the caller aborts the link, and ``close`` drops what is left)."""
        self._send(list(parts), 0)

    def _send(self, parts: list[Part], done: int) -> None:
        transport = self.transport
        pending: list[Part] = []
        for index, part in enumerate(parts):
            if type(part) is not FileRegion:
                pending.append(part)
                continue
            if pending:
                transport.writelines(pending)
                pending = []
            if self.socket_descriptor is None or transport.get_write_buffer_size():
                pending.append(part.read(done))
            else:
                done += send_region(self.socket_descriptor, part, done)
                if done < part.length:  # the socket is full: go on when it can take more
                    self._wait(parts[index:], done)
                    return
            part.close()
            done = 0
        if pending:
            transport.writelines(pending)

    def _wait(self, parts: list[Part], done: int) -> None:
        if self._waiting is None:
            self.hold()
        self._waiting = (parts, done)
        if self._watched is None:
            assert self.socket_descriptor is not None
            self._watched = os.dup(self.socket_descriptor)
            asyncio.get_running_loop().add_writer(self._watched, self._writable)

    def _writable(self) -> None:
        assert self._waiting is not None
        parts, done = self._waiting
        self._waiting = None
        try:
            self._send(parts, done)
        except OSError:
            self.close()
            self.transport.abort()
            return
        if self._waiting is None:  # all sent (or handed to the transport)
            self._unwatch()
            self.release()

    def _unwatch(self) -> None:
        if self._watched is not None:
            asyncio.get_running_loop().remove_writer(self._watched)
            os.close(self._watched)
            self._watched = None

    def close(self) -> None:
        """The link is gone (or broken): drop what waits, close its regions. Idempotent."""
        waiting, self._waiting = self._waiting, None
        self._unwatch()
        for part in waiting[0] if waiting else ():
            if type(part) is FileRegion:
                part.close()
