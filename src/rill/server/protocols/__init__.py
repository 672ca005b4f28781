"""Wire protocols: the registry (``PROTOCOLS``) and one package per protocol (``iggy``,
``kafka``, ``tank``), each turning its requests into calls of the core and the results into its
answers.

Owns: the contract between the generic connection loop (``transports.binary``), the links (TCP,
QUIC) and a protocol: ``WireProtocol`` (``frame_decoder`` for the link's byte stream,
``greeting`` written first on every link, ``open_session`` when a link opens,
``handle_request`` for one framed request, ``error_reply`` for a status the loop itself
answers: a bad frame length among them, ``request_kind`` naming a request code in the metrics)
and ``Reply`` (the answer's frame parts, whether the link closes after it, an answer that comes
later while the link goes on, and the request's outcome for the metrics). The loop knows
nothing else of a protocol.

The registry: one ``ProtocolRow`` per protocol, in the order the server builds its listeners.
A row names the protocol, its listeners as ``(config section, transport)`` pairs (the section's
``address``, ``enabled``, ``tls`` and optional ``max_frame_size``, ``sendfile`` and
``idle_timeout`` make the listener: ``server.app``), how the running server makes the protocol
(``build``, a function named, imported only when a listener of it is enabled) and what happens once a listener of
it is bound (``bound``: Kafka advertises the bound port). The fourth, the cluster's peer
protocol (``peer``), listens only on a cluster node.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

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
    # what the metrics count the request under: "ok", or the snake_case name of what went
    # wrong (an error of ``rill.errors``, "refused" for a request the protocol closes on)
    outcome: str = "ok"


UNKNOWN_REQUEST = "unknown"  # the metrics' name of a request code the protocol does not know


class WireProtocol(Protocol):
    name: str  # "iggy", "kafka", "tank": what its sessions are counted under (GET /server)
    greeting: bytes  # written first on every link (TANK's ping on accept); b"": nothing
    # optional ``holds_replies = True``: the small replies of pipelined requests are written
    # together (transports.binary); absent: each reply is written as it is made
    # optional ``coalesced_codes`` (a set of request codes) with ``handle_requests(core,
    # session, code, payloads) -> list[Reply]`` (one reply per payload, in order; or fewer
    # ending with a closing one; or the replies of the first payloads, at least one, the
    # others to be handed over again): requests of such a code queued one behind the other
    # are served in one call (transports.binary), e.g. TANK's pipelined Produce requests of
    # one partition appended as one write

    def frame_decoder(self, max_payload_size: int, **buffer_sizes: int) -> FrameDecoder:
        """A new decoder for one link's requests (``Frame.code``: the request's kind);
        ``buffer_sizes``: ``FrameDecoder``'s buffer options (QUIC's small ones)."""

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

    def request_kind(self, code: int) -> str:
        """The name request ``code`` is counted under in the metrics (snake_case, e.g.
        ``send_messages``, ``produce``): a name from the protocol's own table, or
        ``UNKNOWN_REQUEST``, never the code itself, so that clients cannot grow the metrics."""


@dataclass(frozen=True, slots=True)
class ProtocolRow:
    name: str
    listeners: tuple[tuple[str, str], ...]  # (config section, transport), in start order
    # "module:function" making the protocol for the server being started (``server``: its
    # ``config``, ``core`` and the rules its start resolved); called once per server, after
    # the refusal checks. Named, not imported: the registry (and the connection loop, which
    # imports this package) loads no protocol package until a listener of it is enabled
    build: str
    # "module:function" called as (protocol, server, (host, port)) once a listener of it is
    # bound: port 0 is resolved now ("": nothing to do)
    bound: str = ""
    # its clients log in with rill's passwords (a listener off loopback needs a changed root
    # password: ``server.app``); TANK's have no login and a rule of their own
    password_login: bool = True

    @property
    def transports(self) -> frozenset[str]:
        return frozenset(transport for _, transport in self.listeners)

    def make(self, server: Any) -> WireProtocol:
        return _named(self.build)(server)

    def listening(self, protocol: WireProtocol, server: Any, address: tuple[str, int]) -> None:
        if self.bound:
            _named(self.bound)(protocol, server, address)


def _named(reference: str) -> Callable[..., Any]:
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


PROTOCOLS: dict[str, ProtocolRow] = {
    row.name: row for row in (
        # Iggy's JSON API over HTTP is one of its listeners (``transports.http``)
        ProtocolRow("iggy", (("tcp", "tcp"), ("quic", "quic"), ("http", "http")),
                    "rill.server.protocols.iggy.handler:listener_protocol"),
        ProtocolRow("kafka", (("kafka", "tcp"),),
                    "rill.server.protocols.kafka.handler:listener_protocol",
                    bound="rill.server.protocols.kafka.handler:listening"),
        ProtocolRow("tank", (("tank", "tcp"),),
                    "rill.server.protocols.tank.handler:listener_protocol",
                    password_login=False),
        # the cluster's nodes among themselves (``[cluster] peer_address``; a cluster only)
        ProtocolRow("peer", (("cluster", "tcp"),),
                    "rill.server.protocols.peer.handler:listener_protocol",
                    password_login=False),
    )
}
