"""The Iggy 0.4.x binary protocol (wire reference): its request handler and dialect rules.

Owns: ``IGGY``, the ``WireProtocol`` the TCP and QUIC listeners serve (``handler``); the codec
itself (commands, responses, framing) is ``rill.protocol``, shared with the SDK.
"""

from rill.server.protocols.iggy.handler import IGGY

__all__ = ["IGGY"]
