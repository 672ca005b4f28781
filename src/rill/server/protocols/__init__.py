"""Wire protocols: one package per protocol (``iggy`` today), each turning its requests into
calls of the core and the results into its answers.

Owns: the contract between the generic connection loop (``transports.binary``) and a protocol:
``WireProtocol`` (``handle_request`` for one framed request, ``error_reply`` for a status the
loop itself answers) and ``Reply`` (the answer's frame parts, and whether the link closes after
it). The loop knows nothing else of a protocol; the framing of a byte stream is the link's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from rill.server.core.core import Core
    from rill.server.core.model import Session


@dataclass(slots=True)
class Reply:
    parts: list[bytes | bytearray | memoryview]
    close: bool = False  # the link closes once this reply is written


class WireProtocol(Protocol):
    async def handle_request(self, core: Core, session: Session, code: int,
                             payload: memoryview) -> Reply:
        """The answer to one framed request (``code``: the request's kind in the protocol)."""

    def error_reply(self, status: int) -> Reply:
        """An answer of error ``status`` (malformed or refused requests)."""
