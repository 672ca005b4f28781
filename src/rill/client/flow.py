"""Write flow control for the SDK's protocol-based links (``tcp._LinkProtocol``, the TANK
client's ``_TankLink``).

Owns: ``WriteFlow``, a mixin of an ``asyncio.Protocol``: ``pause_writing`` and
``resume_writing`` (asyncio calls them as the transport's write buffer crosses its
high- and low-water marks) and ``drain``, which a writer awaits while the transport is paused.
A link that is gone (``gone()``, the subclass's) never makes a writer wait, and its
``connection_lost`` calls ``wake_writers`` so none waits on.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod


class WriteFlow(ABC):
    def __init__(self) -> None:
        self.paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []

    @abstractmethod
    def gone(self) -> bool:
        """Whether the link can no longer carry a write (the subclass says)."""

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.wake_writers()

    def wake_writers(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def drain(self) -> None:
        """Wait until the write buffer is below the low-water mark (or the link is gone)."""
        if self.paused and not self.gone():
            waiter = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter
