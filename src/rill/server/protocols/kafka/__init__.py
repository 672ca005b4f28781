"""Kafka's wire protocol on rill's log (issue 13): the handler its TCP listener serves.

Owns: ``KafkaProtocol`` (the ``WireProtocol`` of the Kafka listener: Kafka's framing, the
loopback login rule, frames -> codec -> dispatch -> encode, ``handler``) and the APIs as calls
of the neutral broker: ``dispatch.HANDLERS`` names them all (the admin and metadata APIs are
``dispatch``'s own; ``data``, ``group_apis``, ``configs``, ``producers`` and ``sasl`` hold the
other families, sharing ``common``). The codec itself is ``rill.protocol.kafka``.
"""

from rill.server.protocols.kafka.handler import KafkaProtocol, KafkaSettings

__all__ = ["KafkaProtocol", "KafkaSettings"]
