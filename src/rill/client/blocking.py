"""The blocking facade of the SDK: ``Client``, for plain synchronous code.

Owns: ``Client``, which runs one private event loop in a background daemon thread and forwards
every call to an ``AsyncClient`` living on that loop (``asyncio.run_coroutine_threadsafe``).
Its command methods are generated from ``AsyncClient``'s public coroutine methods when this
module is imported, so the two APIs cannot drift apart: same names, same parameters, same
docstrings (``help(Client.create_stream)`` and ``dir(Client)`` show them).

Invariants: a ``Client`` is safe to use from several threads at once (calls are serialised
onto its loop and may be pipelined there); a call made from the loop thread itself is refused
rather than dead-locking; after ``close()`` the loop is gone and the object cannot be reused.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import threading
from typing import Any, Callable, Coroutine, TypeVar

from rill import errors
from rill.client.async_client import AsyncClient

T = TypeVar("T")

# Coroutine methods of AsyncClient that Client implements by hand (lifecycle).
_HAND_WRITTEN = frozenset({"connect", "close"})


class Client:
    """A blocking rill client; takes exactly the arguments of ``AsyncClient``.

    ``with Client("127.0.0.1:8090") as client: client.login_user("iggy", "iggy")``
    """

    def __init__(self, address: str = "127.0.0.1:8090", **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run_loop, name=f"rill-client {address}", daemon=True
        )
        self._thread.start()
        self._closed = False
        try:
            self._async = self._call(self._build(address, options))
        except BaseException:
            self._stop_loop()
            raise

    @staticmethod
    async def _build(address: str, options: dict[str, Any]) -> AsyncClient:
        return AsyncClient(address, **options)  # built on the loop that will run it

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the client's loop and wait for its result in this thread."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a blocking Client cannot be called from its own event loop")
        if self._loop.is_closed():
            coroutine.close()
            raise errors.NotConnected(reason="Not connected: the client was closed")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coroutine`` (e.g. ``client.async_client.poll_messages_columnar(...)``) on the
        client's loop and return at once: a way to pipeline requests from synchronous code.
        Requests are written in submission order and answered in that order."""
        if self._loop.is_closed():
            coroutine.close()
            raise errors.NotConnected(reason="Not connected: the client was closed")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    @property
    def async_client(self) -> AsyncClient:
        """The AsyncClient behind this facade (use it only from its own loop)."""
        return self._async

    @property
    def is_connected(self) -> bool:
        return self._async.is_connected

    def connect(self) -> None:
        """Open the connection (retrying as configured)."""
        self._call(self._async.connect())

    def close(self) -> None:
        """Close the connection, stop the background loop and its thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._call(self._async.close())
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> Client:
        self.connect()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Client {self._async!r}>"


def _blocking(name: str, coroutine_function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(coroutine_function)
    def method(self: Client, *args: Any, **kwargs: Any) -> Any:
        return self._call(getattr(self._async, name)(*args, **kwargs))

    method.__qualname__ = f"Client.{name}"
    method.__module__ = __name__
    return method


def _public_coroutine_methods() -> dict[str, Callable[..., Any]]:
    return {
        name: function
        for name, function in inspect.getmembers(AsyncClient, inspect.iscoroutinefunction)
        if not name.startswith("_") and name not in _HAND_WRITTEN
    }


BLOCKING_METHODS: tuple[str, ...] = tuple(sorted(_public_coroutine_methods()))

for _name, _function in _public_coroutine_methods().items():
    setattr(Client, _name, _blocking(_name, _function))
del _name, _function
