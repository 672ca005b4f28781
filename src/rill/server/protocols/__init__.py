"""Wire protocols: one package per protocol (``iggy``, ``kafka``), each turning its requests
into calls of the core and the results into its answers.

Owns: the contract between the generic connection loop (``transports.binary``), the TCP link
and a protocol: ``WireProtocol`` (``frame_decoder`` for the link's byte stream, ``open_session``
when a link opens, ``handle_request`` for one framed request, ``error_reply`` for a status the
loop itself answers: a bad frame length among them) and ``Reply`` (the answer's frame parts,
whether the link closes after it, and an answer that comes later while the link goes on). The loop knows nothing else of a protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Protocol

if TYPE_CHECKING:
    from rill.protocol.framing import FrameDecoder
    from rill.server.core.core import Core
    from rill.server.core.types import Session


@dataclass(slots=True)
class Reply:
    parts: list[bytes | bytearray | memoryview]
    close: bool = False  # the link closes once this reply is written
    # an answer that comes later (TANK's long-polling consume): the loop goes on with the next
    # requests and writes this reply when it is ready (nothing if the link closed meanwhile)
    later: Awaitable[Reply] | None = None


class WireProtocol(Protocol):
    name: str  # "iggy", "kafka", "tank": what its sessions are counted under (GET /server)

    def frame_decoder(self, max_payload_size: int) -> FrameDecoder:
        """A new decoder for one link's requests (``Frame.code``: the request's kind)."""

    def open_session(self, core: Core, session: Session) -> None:
        """A link opened with ``session`` (from ``core.connect``): e.g. log it in by the
        listener's own rule."""

    async def handle_request(self, core: Core, session: Session, code: int,
                             payload: memoryview) -> Reply:
        """The answer to one framed request (``code``: the request's kind in the protocol)."""

    def error_reply(self, status: int) -> Reply:
        """An answer of error ``status`` (malformed or refused requests; the TCP link refuses
        a bad frame length with status 3 below the header, 4029 above the limit). A protocol
        that answers such requests by closing returns no parts and ``close=True``."""
