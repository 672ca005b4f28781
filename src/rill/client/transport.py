"""The transport seam of the SDK: how one request frame becomes one response payload.

Owns: the abstract ``Transport`` every link implements (TCP, QUIC and HTTP, with the same
API), the ``Payload`` type a request may carry, address parsing, and the registry that
maps a transport name (``"tcp"``) to its class so ``AsyncClient(transport="tcp")`` can build it.

Contract, identical for every transport:

* ``await connect()`` opens the link (raises ``OSError``/``TimeoutError`` on failure; the client
  turns repeated failures into ``errors.CannotEstablishConnection``);
* ``await request(code, payload)`` sends one command and returns the OK payload
  (``bytes`` or ``memoryview``); a status other than 0 raises ``errors.from_status(status)``;
  a link that drops while the request is in flight raises ``errors.Disconnected`` (8); calling
  it while not connected raises ``errors.NotConnected`` (61);
* ``await close()`` is idempotent; ``is_connected`` says whether requests can be sent now.

Invariant: a transport never retries, re-logs-in or reconnects on its own; that policy lives in
``rill.client.async_client`` so it is the same for every link.
"""

from __future__ import annotations

import abc
import importlib
from typing import TYPE_CHECKING, Callable, Sequence, Union

if TYPE_CHECKING:  # ssl is imported when a TLS context is made (parse_address needs none)
    import ssl as ssl_module

Buffer = Union[bytes, bytearray, memoryview]
# A request payload: one buffer, or several written back to back (no concatenation needed).
Payload = Union[Buffer, Sequence[Buffer]]

DEFAULT_PORT = 8090


def payload_parts(payload: Payload) -> tuple[Buffer, ...]:
    """A payload as a tuple of buffers (a single buffer becomes a 1-tuple)."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return (payload,)
    return tuple(payload)


def payload_length(parts: Sequence[Buffer]) -> int:
    return sum(memoryview(part).nbytes for part in parts)


def tls_context(
    ssl: ssl_module.SSLContext | bool | None, ca_file: str | None = None, verify: bool = True
) -> ssl_module.SSLContext | None:
    """The TLS context of a TCP or HTTP link, or None for plain text. TLS is on when ``ssl`` is
    true or a context; the server's certificate is then verified (against ``ca_file``, else the
    system's CAs) unless ``verify`` is False. Without TLS the two are unused (one set of client
    options can serve every transport: QUIC always uses them)."""
    import ssl as ssl_module

    if isinstance(ssl, ssl_module.SSLContext):
        return ssl
    if not ssl:
        return None
    context = ssl_module.create_default_context(cafile=ca_file)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl_module.CERT_NONE
    return context


def parse_address(address: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """``"host:port"``, ``"[v6]:port"``, ``"host"`` -> (host, port)."""
    address = address.strip()
    if "://" in address:  # tolerate "tcp://host:port"
        address = address.split("://", 1)[1]
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif address.count(":") == 1:
        host, port = address.split(":")
    else:  # bare host name or bare IPv6 address
        host, port = address, ""
    if not host:
        host = "127.0.0.1"
    try:
        number = int(port) if port else default_port
    except ValueError:
        raise ValueError(f"invalid port in address {address!r}") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"port {number} out of range in {address!r}")
    return host, number


class Transport(abc.ABC):
    """One link to one server. Requests may be issued concurrently; answers come back in order."""

    #: the name under which the transport is registered ("tcp", "quic", "http")
    name: str = ""

    @abc.abstractmethod
    async def connect(self) -> None:
        """Open the link. May be called again after the link dropped or was closed."""

    @abc.abstractmethod
    async def request(self, code: int, payload: Payload = b"") -> bytes | memoryview:
        """Send one command; return its OK payload or raise the error the server answered."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close the link; pending requests fail with ``errors.Disconnected``. Idempotent."""

    @property
    @abc.abstractmethod
    def is_connected(self) -> bool:
        """True while requests can be written."""

    async def __aenter__(self) -> Transport:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


TransportFactory = Callable[..., Transport]

_REGISTRY: dict[str, TransportFactory] = {}


def register_transport(name: str, factory: TransportFactory) -> None:
    """Make ``AsyncClient(transport=name)`` build links with ``factory(address, ssl=...)``."""
    _REGISTRY[name.lower()] = factory


# Built-in transports whose module is imported only when first asked for: "quic" pulls in
# aioquic and cryptography, "http" h11 and the JSON codecs, which a TCP-only user (the CLI's
# every call) should not pay for at import time.
_LAZY_MODULES = {"tcp": "rill.client.tcp", "quic": "rill.client.quic", "http": "rill.client.http"}


def transport_factory(name: str) -> TransportFactory:
    module = _LAZY_MODULES.get(name.lower())
    if module is not None and name.lower() not in _REGISTRY:
        importlib.import_module(module)  # registers itself
    try:
        return _REGISTRY[name.lower()]
    except KeyError:
        known = ", ".join(sorted({*_REGISTRY, *_LAZY_MODULES})) or "none"
        raise ValueError(f"unknown transport {name!r} (known: {known})") from None
