"""TANK's wire protocol on rill's log (issue 14): the handler its TCP listener serves.

Owns: ``TankProtocol`` (the ``WireProtocol`` of the TANK listener: TANK's framing, the ping on
accept, the listener's user, frames -> codec -> requests -> encode, ``handler``), the admin and
discovery requests and the namespace (``dispatch``), and Produce / Consume as calls of the
neutral broker over RecordBatch v2 storage (``data``). The codec itself is
``rill.protocol.tank``.
"""

from rill.server.protocols.tank.dispatch import TankSettings
from rill.server.protocols.tank.handler import TankProtocol

__all__ = ["TankProtocol", "TankSettings"]
