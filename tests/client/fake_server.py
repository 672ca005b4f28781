"""A fake rill link for the SDK tests: an asyncio TCP server on 127.0.0.1, port 0.

It splits request frames with ``rill.protocol.iggy.framing``, records them in arrival order
(across connections), and answers with whatever ``handler(code, payload)`` returns: response
frame bytes, ``DROP`` (close the connection without answering) or ``None`` (an empty OK).
``batch = n`` makes it hold its answers until n requests have arrived, then answer them in
order: a client that did not pipeline would never get an answer.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine

from rill.protocol.iggy import framing
from rill.protocol.iggy.codes import decode_command
from rill.protocol.iggy.commands.base import Command

DROP = object()
GUARD_SECONDS = 30  # a hang guard only: no test asserts on time


@dataclass
class Frame:
    connection: int
    code: int
    payload: bytes

    @property
    def raw(self) -> bytes:
        return framing.encode_request(self.code, self.payload)

    @property
    def command(self) -> Command:
        return decode_command(self.code, self.payload)


Handler = Callable[[int, bytes], "bytes | object | None | Awaitable[bytes | object | None]"]


def ok(payload: bytes = b"") -> bytes:
    return framing.encode_response(0, payload)


def error(status: int) -> bytes:
    return framing.error_response(status)


class FakeServer:
    def __init__(self, handler: Handler | None = None, batch: int = 1) -> None:
        self.handler: Handler = handler or (lambda code, payload: None)
        self.batch = batch
        self.frames: list[Frame] = []
        self.connections = 0
        self.frame_arrived = asyncio.Event()
        self._server: asyncio.base_events.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def address(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    @property
    def codes(self) -> list[int]:
        return [frame.code for frame in self.frames]

    async def start(self) -> FakeServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=2**26)
        return self

    async def stop(self) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def __aenter__(self) -> FakeServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def drop_all(self) -> None:
        """Close every open connection from the server side."""
        for writer in self._writers:
            writer.close()

    async def wait_for_frames(self, count: int) -> None:
        while len(self.frames) < count:
            self.frame_arrived.clear()
            await self.frame_arrived.wait()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        connection = self.connections
        self._writers.append(writer)
        held: list[Frame] = []
        try:
            while True:
                header = await reader.readexactly(framing.REQUEST_HEADER_SIZE)
                length, code = framing.decode_request_header(header)
                payload = await reader.readexactly(length)
                frame = Frame(connection, code, payload)
                self.frames.append(frame)
                self.frame_arrived.set()
                held.append(frame)
                if len(held) < self.batch:
                    continue
                for request in held:
                    answer = self.handler(request.code, request.payload)
                    if inspect.isawaitable(answer):
                        answer = await answer
                    if answer is DROP:
                        writer.close()
                        return
                    writer.write(ok() if answer is None else answer)  # type: ignore[arg-type]
                held.clear()
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run one async test body on a fresh event loop, with a hang guard."""
    return asyncio.run(asyncio.wait_for(coroutine, GUARD_SECONDS))


class ThreadedFakeServer:
    """A FakeServer on its own loop in a daemon thread, for the blocking-client tests."""

    def __init__(self, handler: Handler | None = None, batch: int = 1) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._handler, self._batch = handler, batch
        self.server: FakeServer

    def __enter__(self) -> FakeServer:
        self._thread.start()
        self.server = self._submit(self._create())
        return self.server

    async def _create(self) -> FakeServer:
        return await FakeServer(self._handler, self._batch).start()

    def _submit(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(GUARD_SECONDS)

    def __exit__(self, *exc_info: object) -> None:
        self._submit(self.server.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
