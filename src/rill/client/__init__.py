"""The rill SDK: an asyncio client (``AsyncClient``) and a blocking facade (``Client``).

Owns: the public surface of ``rill.client``. Both clients have one method per protocol command,
named as the command (``create_stream``, ``send_messages``, ``poll_messages``, ...), and raise
the same ``rill.errors`` class the server answered (``errors.StreamIdNotFound``, code 1009).
The handy protocol value types are re-exported so that one import is enough::

    from rill.client import Client, Message, PollingStrategy

    with Client("127.0.0.1:8090") as client:
        client.login_user("iggy", "iggy")
        client.send_messages("orders", "eu", [Message(b"hello")])
        batch = client.poll_messages("orders", "eu", consumer=1, strategy=PollingStrategy.first())

This package imports ``rill.protocol`` and ``rill.errors`` only, never ``rill.server``. Its names
are imported when first used (``_EXPORTS``), so its light modules stay light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# public name -> the module defining it; imported on first use, so that a module of this
# package (``rill.client.link``, the CLI's fast path) can be imported without asyncio and every
# command codec, and ``rill.client.HttpTransport`` does not load h11 unless asked for
_EXPORTS = {
    "AsyncClient": "rill.client.async_client",
    "ClusterRouting": "rill.client.cluster",
    "Client": "rill.client.blocking",
    "TcpTransport": "rill.client.tcp",
    "HttpTransport": "rill.client.http",
    "Transport": "rill.client.transport",
    "register_transport": "rill.client.transport",
    "HeaderKind": "rill.protocol.iggy.headers",
    "HeaderValue": "rill.protocol.iggy.headers",
    "Message": "rill.protocol.iggy.messages",
    "PolledMessage": "rill.protocol.iggy.messages",
    "Permissions": "rill.protocol.permissions",
    "CompressionAlgorithm": "rill.protocol.primitives",
    "Consumer": "rill.protocol.iggy.primitives",
    "Identifier": "rill.protocol.iggy.primitives",
    "Partitioning": "rill.protocol.iggy.primitives",
    "PollingStrategy": "rill.protocol.iggy.primitives",
    "UserStatus": "rill.protocol.primitives",
    "PolledMessages": "rill.protocol.iggy.responses.messages",
}

if TYPE_CHECKING:
    from rill.client.async_client import AsyncClient
    from rill.client.blocking import Client
    from rill.client.cluster import ClusterRouting
    from rill.client.http import HttpTransport
    from rill.client.tcp import TcpTransport
    from rill.client.transport import Transport, register_transport
    from rill.protocol.iggy.headers import HeaderKind, HeaderValue
    from rill.protocol.iggy.messages import Message, PolledMessage
    from rill.protocol.permissions import Permissions
    from rill.protocol.primitives import CompressionAlgorithm, UserStatus
    from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning, PollingStrategy
    from rill.protocol.iggy.responses.messages import PolledMessages


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rill.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "AsyncClient",
    "Client",
    "ClusterRouting",
    "CompressionAlgorithm",
    "Consumer",
    "HeaderKind",
    "HeaderValue",
    "HttpTransport",
    "Identifier",
    "Message",
    "Partitioning",
    "Permissions",
    "PolledMessage",
    "PolledMessages",
    "PollingStrategy",
    "TcpTransport",
    "Transport",
    "UserStatus",
    "register_transport",
]
