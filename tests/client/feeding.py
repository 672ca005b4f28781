"""Bytes into a client's ``asyncio.BufferedProtocol`` as its transport would hand them over:
``feed`` copies them into ``get_buffer()`` and reports them with ``buffer_updated``, at most
``piece`` bytes at a time (frames split anywhere)."""

from __future__ import annotations

import asyncio


def feed(protocol: asyncio.BufferedProtocol, data: bytes, piece: int) -> None:
    position = 0
    while position < len(data):
        buffer = protocol.get_buffer(-1)
        size = min(len(buffer), piece, len(data) - position)
        buffer[:size] = data[position : position + size]
        protocol.buffer_updated(size)
        position += size
