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

This package imports ``rill.protocol`` and ``rill.errors`` only, never ``rill.server``.
"""

from rill.client.async_client import AsyncClient
from rill.client.blocking import Client
from rill.client.tcp import TcpTransport
from rill.client.transport import Transport, register_transport
from rill.protocol.headers import HeaderKind, HeaderValue
from rill.protocol.messages import Message, PolledMessage
from rill.protocol.permissions import Permissions
from rill.protocol.primitives import (
    CompressionAlgorithm,
    Consumer,
    Identifier,
    Partitioning,
    PollingStrategy,
    UserStatus,
)
from rill.protocol.responses.messages import PolledMessages


def __getattr__(name: str) -> object:
    """``HttpTransport`` is imported when asked for (the "http" transport registers itself on
    first use), so that ``import rill.client`` does not load h11 and the JSON codecs."""
    if name == "HttpTransport":
        from rill.client.http import HttpTransport

        return HttpTransport
    raise AttributeError(f"module 'rill.client' has no attribute {name!r}")

__all__ = [
    "AsyncClient",
    "Client",
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
