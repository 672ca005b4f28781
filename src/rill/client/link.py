"""A blocking, one-request-at-a-time TCP link for one-shot tools: ``BlockingLink``.

Owns: ``BlockingLink``, a plain TCP connection on a blocking socket that sends a command and
reads its answer before the next one -- what a command line that sends one request needs,
without the event loop, the background thread and the codec of every command that
``rill.client.Client`` brings along (``rill message send``'s fast path, ``rill.cli.fast_send``).
It speaks through the same pieces as ``AsyncClient``: the commands' own codecs
(``to_frame``, ``decode_response``), ``errors.from_status`` for a status other than 0 and
``RillError.about(subject(command))`` to name what was asked; a failed connection raises
``errors.CannotEstablishConnection`` worded as ``AsyncClient.connect`` words it
(``os_reason``). No TLS, no reconnects, no pipelining: use ``Client`` for those.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Iterable

from rill import __version__, errors
from rill.client.subjects import subject
from rill.client.transport import parse_address
from rill.protocol.iggy.commands.base import Command
from rill.protocol.iggy.framing import RESPONSE_HEADER_SIZE, decode_response_header

# the client version a login reports (rill's own constant: importlib.metadata would cost every
# CLI call more than its request)
SDK_VERSION: str | None = f"rill-py {__version__}"


def os_reason(error: BaseException) -> str:
    """``connection refused``, ``no answer in time`` ...: why one connection try failed."""
    if isinstance(error, TimeoutError):  # asyncio.TimeoutError is TimeoutError from 3.11
        return "no answer in time (connect_timeout)"
    errno = getattr(error, "errno", None)
    if isinstance(errno, int) and errno > 0:
        text = os.strerror(errno)
    else:  # e.g. a host name that does not resolve (negative getaddrinfo codes)
        text = getattr(error, "strerror", None) or str(error) or type(error).__name__
    return text[:1].lower() + text[1:]


class BlockingLink:
    """``with BlockingLink("127.0.0.1:8090") as link: link.login_user("iggy", "iggy")``.

    ``address`` is parsed at once (``ValueError`` when malformed); ``connect_timeout`` bounds
    the connection, ``timeout`` each request (``TimeoutError`` when it passes)."""

    def __init__(self, address: str = "127.0.0.1:8090", *, connect_timeout: float | None = 10.0,
                 timeout: float | None = 30.0) -> None:
        self.address = address
        self.host, self.port = parse_address(address)
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self._socket: socket.socket | None = None

    def connect(self) -> None:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as error:
            # AsyncClient's cause of a connect timeout is a bare TimeoutError: keep it so
            cause = TimeoutError() if isinstance(error, TimeoutError) else error
            raise errors.CannotEstablishConnection(reason=(
                f"Cannot establish connection to {self.address}: {os_reason(error)} "
                f"(1 attempt)")) from cause
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.timeout)
        self._socket = sock

    def close(self) -> None:
        sock, self._socket = self._socket, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> BlockingLink:
        self.connect()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- the request path ----------------------------------------------------------------------

    def execute(self, command: Command) -> Any:
        """Send ``command``, return its decoded OK answer or raise the error the server sent."""
        sock = self._socket
        if sock is None:
            raise errors.NotConnected(reason="Not connected: call connect() first")
        try:
            sock.sendall(command.to_frame())
            status, length = decode_response_header(self._read(sock, RESPONSE_HEADER_SIZE))
            payload = self._read(sock, length)
        except BaseException as error:  # the answer may still come: the link is done for
            self.close()
            if isinstance(error, OSError) and not isinstance(error, TimeoutError):
                raise errors.Disconnected(reason=f"Disconnected: {error}") from None
            raise  # a timeout, a dropped link (Disconnected), an interrupt
        if status != 0:
            raise errors.from_status(status).about(subject(command))
        return command.decode_response(payload)

    @staticmethod
    def _read(sock: socket.socket, size: int) -> bytes:
        data = bytearray(size)
        view = memoryview(data)
        got = 0
        while got < size:
            count = sock.recv_into(view[got:])
            if count == 0:
                raise errors.Disconnected()
            got += count
        return bytes(data)

    # --- the commands a one-shot send needs (named and shaped as ``AsyncClient``'s) ------------

    def login_user(self, username: str, password: str, version: str | None = SDK_VERSION,
                   context: str | None = None) -> Any:
        from rill.protocol.iggy.commands.users import LoginUser

        return self.execute(LoginUser(username, password, version, context))

    def login_with_personal_access_token(self, token: str) -> Any:
        from rill.protocol.iggy.commands.tokens import LoginWithPersonalAccessToken

        return self.execute(LoginWithPersonalAccessToken(token))

    def send_messages(self, stream_id: int | str, topic_id: int | str, messages: Iterable[Any],
                      partitioning: Any = None) -> None:
        """``messages``: ``Message`` or payload bytes; ``partitioning`` None = balanced."""
        from rill.protocol.iggy.commands.messages import SendMessages
        from rill.protocol.iggy.primitives import Partitioning

        self.execute(SendMessages.of(stream_id, topic_id, partitioning or Partitioning.balanced(),
                                     list(messages)))

    def __repr__(self) -> str:
        state = "connected" if self._socket is not None else "disconnected"
        return f"<BlockingLink {self.host}:{self.port} {state}>"
