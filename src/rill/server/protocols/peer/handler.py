"""The peer listener: other nodes' requests, handed to this node's cluster layer.

Owns: ``PeerProtocol`` (the ``WireProtocol`` of the ``peer`` row of ``protocols.PROTOCOLS``,
on ``[cluster] peer_address``). Thin: a link must open with HELLO proving it knows the
cluster's secret (``codec``), then each request goes to ``core.cluster.serve_peer(node_id,
message)`` and its answer is written when ready (a fetch long-polls: the link goes on with
other requests meanwhile). Anything else -- a frame that does not decode, a request before
HELLO, a wrong proof -- closes the link; the server keeps serving everyone else.
"""

from __future__ import annotations

import hmac
import logging
import weakref
from typing import TYPE_CHECKING, Any

from rill.protocol.buffer import DecodeError
from rill.protocol.peer import codec
from rill.server.protocols import UNKNOWN_REQUEST, Reply

if TYPE_CHECKING:
    from rill.server.core.core import Core
    from rill.server.core.types import Session

log = logging.getLogger(__name__)

_CLOSE = Reply([], close=True, outcome="refused")


def listener_protocol(server: Any) -> PeerProtocol:
    return PeerProtocol()


class PeerProtocol:
    name = "peer"
    greeting = b""

    def __init__(self) -> None:
        # session -> the node id its HELLO proved
        self._nodes: weakref.WeakKeyDictionary[Session, int] = weakref.WeakKeyDictionary()

    @staticmethod
    def frame_decoder(max_payload_size: int, **buffer_sizes: int) -> codec.PeerFrameDecoder:
        return codec.PeerFrameDecoder(max(max_payload_size, codec.MAX_PAYLOAD_SIZE),
                                      **buffer_sizes)

    @staticmethod
    def request_kind(code: int) -> str:
        return codec.KINDS.get(code, UNKNOWN_REQUEST)

    def open_session(self, core: Core, session: Session) -> None:
        pass

    @staticmethod
    def error_reply(status: int) -> Reply:
        return _CLOSE

    async def handle_request(self, core: Core, session: Session, code: int,
                             payload: memoryview) -> Reply:
        cluster: Any = core.cluster
        try:
            message = codec.decode(code, payload)
        except DecodeError as error:
            log.warning("peer link %s: %s; closing it", session.address, error.detail)
            return _CLOSE
        if cluster is None:
            return _CLOSE
        if code == codec.HELLO:
            node_id = message.header.get("node_id")
            expected = cluster.peer_proof(node_id) if isinstance(node_id, int) else None
            if expected is None or not hmac.compare_digest(
                    expected, str(message.header.get("proof", ""))):
                log.warning("peer link %s: HELLO without the cluster's secret; closing it",
                            session.address)
                return _CLOSE
            self._nodes[session] = node_id
            core.broker.authenticate_node(session)
            return Reply(codec.encode(codec.answer(message)))
        node_id = self._nodes.get(session)
        if node_id is None:
            log.warning("peer link %s: a request before HELLO; closing it", session.address)
            return _CLOSE
        return Reply([], later=self._answer(cluster, node_id, message))

    @staticmethod
    async def _answer(cluster: Any, node_id: int, message: codec.Message) -> Reply:
        answer = await cluster.serve_peer(node_id, message)
        return Reply(codec.encode(answer))
