"""The Iggy 0.4.x binary protocol (wire reference): its request handler and dialect rules.

Owns: ``IGGY``, the ``WireProtocol`` the TCP and QUIC listeners serve (``handler``), the
commands as calls of the neutral core (``dispatch``, also the HTTP routes' path) and the answers
built from the core's results (``views``); the codec itself (commands, responses, framing) is
``rill.protocol``, shared with the SDK.
"""

from rill.server.protocols.iggy.handler import IGGY

__all__ = ["IGGY"]
