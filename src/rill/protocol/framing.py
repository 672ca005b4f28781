"""Splitting a byte stream into frames without I/O, for every binary protocol: one
``FrameDecoder`` parametrised by a protocol's header shape (``frame_splitter``). Each protocol
declares its header and its decoders beside its codec: Iggy's ``rill.protocol.iggy.framing``,
Kafka's ``rill.protocol.kafka.framing``, TANK's ``rill.protocol.tank.framing``.

A decoder is filled either zero-copy (``get_buffer()`` then ``buffer_updated(n)``, the shape of
``asyncio.BufferedProtocol``) or by copying (``feed(data)``), and asked ``next_frame()`` until it
answers ``NEED_DATA``. It answers, one at a time:

* ``Frame(code, payload)``: a whole frame; ``code`` is the request code or the response status,
  ``payload`` a memoryview over bytes the decoder no longer touches;
* ``NEED_DATA``: feed more bytes;
* ``LargeFrame(code, payload_size)``: a frame too big for the shared buffer has begun; the owner
  calls ``start_large_frame()`` (perhaps later, e.g. once the server's request memory can take
  ``payload_size``) and its payload is then read into a buffer of its own, which ends up exactly
  ``payload_size`` bytes long and is handed out without a copy. Until then the same
  ``LargeFrame`` is answered again;
* ``BadLength(length, payload_size, too_large)``: the length field cannot be honoured (a request
  length below its 4 code bytes, or a payload above ``max_payload_size``). The decoder stays
  where it is and answers the same again; what to send back (Iggy: status 3 or 4029) and whether
  to wait (the server lets a frame behind a pending login wait for it) is the owner's choice.

Small frames are parsed out of one shared buffer, which starts at ``initial_buffer_size`` and
grows, only when a frame needs it, up to ``max_buffer_size`` (``feed`` alone may grow it further:
its caller holds those bytes already).

A decoder given ``large_buffers`` (a ``LargeBuffers``, shared by the links of one listener)
reads large frames into a buffer of an earlier large frame once nothing holds that frame any
more, instead of allocating: memory touched for the first time costs a page fault per page,
which on a virtual machine can cost more than the bytes' copy, so a server that takes 1 MB
requests all day reads them into the same few megabytes.

Invariants: a ``length`` below 4 (requests) or above ``max_payload_size`` is reported, never
trusted: nothing is allocated for it; the own buffer of a large frame grows with the bytes that
arrive (from ``large_first_chunk``, doubling), never to what a header merely announces; frames
come out in stream order and a frame's bytes are never handed out twice.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from typing import NamedTuple


DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024
INITIAL_BUFFER_SIZE = 4 * 1024  # what an idle decoder holds
MAX_BUFFER_SIZE = 256 * 1024  # frames up to this are parsed from the shared buffer
LARGE_FIRST_CHUNK = 1024 * 1024  # a large frame's own buffer starts here and doubles

_LENGTH = struct.Struct("<I")


# --- what a decoder answers -----------------------------------------------------------------


class _NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA = _NeedData()


class Frame(NamedTuple):
    code: int  # the request's code, or the response's status
    payload: memoryview


_new_frame = tuple.__new__  # Frame(...) without NamedTuple's Python-level __new__: once per frame


class LargeFrame(NamedTuple):
    """A frame too big for the shared buffer has begun: ``start_large_frame()`` reads it."""

    code: int
    payload_size: int


@dataclass(frozen=True, slots=True)
class BadLength:
    """The header's length field cannot be honoured; the stream cannot be read past it."""

    length: int  # as received
    payload_size: int  # what it announces (negative: a request length below its code)
    too_large: bool  # above max_payload_size; otherwise below the minimum


# --- the decoder ------------------------------------------------------------------------------


def frame_splitter(*, header_size: int, length: struct.Struct, length_offset: int,
                   length_counts: int, code: struct.Struct, code_offset: int,
                   min_payload: int = 0):
    """``next_frame`` for one header shape, its constants bound in a closure (it runs once per
    frame and once more per read): ``header_size`` bytes come before the payload; the length
    field (``length``, at ``length_offset``) counts the payload and ``length_counts`` more
    bytes; the code (``code``, at ``code_offset``) may lie in the payload (Kafka's API key);
    a payload below ``min_payload`` bytes is a ``BadLength``."""
    unpack_length, unpack_code = length.unpack_from, code.unpack_from
    length_end = length_offset + length.size  # bytes in before the length can be judged
    peek_end = max(header_size, code_offset + code.size)  # ... before a frame can be named

    def check_length(value: int, max_payload_size: int) -> BadLength | None:
        payload_size = value - length_counts
        if payload_size < min_payload:
            return BadLength(value, payload_size, too_large=False)
        if payload_size > max_payload_size:
            return BadLength(value, payload_size, too_large=True)
        return None

    def next_frame(self: FrameDecoder) -> Frame | LargeFrame | BadLength | _NeedData:
        large = self._large
        if large is not None:
            if self._large_filled < self._large_size:
                return NEED_DATA
            self._large = None
            if self.large_buffers is not None:
                self.large_buffers.keep(large)
            if len(large) > self._large_size:  # a reused buffer, larger than this frame
                return Frame(self._large_code, memoryview(large)[: self._large_size])
            return Frame(self._large_code, memoryview(large))
        start = self._start
        available = self._end - start
        if not available:  # between frames (the usual answer after the last frame of a read)
            self._start = self._end = 0
            return NEED_DATA
        if available < length_end:
            return NEED_DATA
        buffer = self._buffer
        value = unpack_length(buffer, start + length_offset)[0]
        payload_size = value - length_counts
        if payload_size < min_payload or payload_size > self.max_payload_size:
            return check_length(value, self.max_payload_size)  # (reported before the rest)
        if available < peek_end:
            return NEED_DATA
        frame_code = unpack_code(buffer, start + code_offset)[0]
        payload_start = start + header_size
        if available - header_size >= payload_size:
            with memoryview(buffer) as view:  # one copy (a bytearray slice would add one)
                payload = bytes(view[payload_start : payload_start + payload_size])
            self._start = payload_start + payload_size
            return _new_frame(Frame, (frame_code, memoryview(payload)))
        if payload_size > self.max_buffer_size - header_size:
            return LargeFrame(frame_code, payload_size)
        needed = header_size + payload_size  # make room for the rest of this frame
        if len(buffer) - start < needed:
            if len(buffer) >= needed:
                self._compact()
            else:
                self._grow(1 << (needed - 1).bit_length())
        return NEED_DATA

    return next_frame


class FrameDecoder:
    """Splits one byte stream into frames (see the module doc); a subclass gives its header's
    shape: ``HEADER_SIZE`` and ``next_frame = frame_splitter(...)``."""

    HEADER_SIZE = 8  # bytes before the payload (a subclass sets its own)

    __slots__ = ("max_payload_size", "initial_buffer_size", "max_buffer_size", "large_first_chunk",
                 "large_buffers", "_buffer", "_start", "_end", "_large", "_large_size",
                 "_large_filled", "_large_code")

    def __init__(self, max_payload_size: int = DEFAULT_MAX_FRAME_SIZE, *,
                 initial_buffer_size: int = INITIAL_BUFFER_SIZE,
                 max_buffer_size: int = MAX_BUFFER_SIZE,
                 large_first_chunk: int = LARGE_FIRST_CHUNK) -> None:
        if not 8 <= initial_buffer_size <= max_buffer_size:
            raise ValueError("buffer sizes must satisfy 8 <= initial <= max")
        self.max_payload_size = max_payload_size  # may be changed between calls (e.g. at login)
        self.initial_buffer_size = initial_buffer_size
        self.max_buffer_size = max_buffer_size
        self.large_first_chunk = large_first_chunk
        self.large_buffers: LargeBuffers | None = None  # buffers of earlier large frames
        self._buffer = bytearray(initial_buffer_size)
        self._start = 0  # first byte not yet handed out
        self._end = 0  # end of the received bytes
        self._large: bytearray | None = None  # the own buffer of a large frame
        self._large_size = 0  # its payload size
        self._large_filled = 0
        self._large_code = 0

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out in a frame (0: between frames)."""
        held = self._end - self._start
        if self._large is not None:
            held += self._large_filled
        return held

    # -- filling ---------------------------------------------------------------------------

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next received bytes go; report how many with ``buffer_updated``.
        (``sizehint`` is ignored: the signature is ``asyncio.BufferedProtocol``'s.)"""
        large = self._large
        if large is not None and self._large_filled < self._large_size:
            if self._large_filled == len(large):  # grow with what actually arrived
                grown = bytearray(min(self._large_size, 2 * len(large)))
                grown[: self._large_filled] = large
                self._large = large = grown
            return memoryview(large)[self._large_filled : self._large_size]
        if self._end == len(self._buffer):
            self._compact()
            if self._end == len(self._buffer) < self.max_buffer_size:  # a frame's start fills it
                self._grow(min(2 * len(self._buffer), self.max_buffer_size))
        return memoryview(self._buffer)[self._end :]

    def buffer_updated(self, nbytes: int) -> bool:
        """``nbytes`` were written at the start of the last ``get_buffer()``. False when they
        went into a large frame that is still incomplete: ``next_frame()`` would only answer
        ``NEED_DATA`` (the hot path of a big request need not ask)."""
        if self._large is not None and self._large_filled < self._large_size:
            self._large_filled += nbytes
            return self._large_filled == self._large_size
        self._end += nbytes
        return True

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` in (for links that are handed bytes). Never refuses: when the shared
        buffer is full it grows past ``max_buffer_size``, as the caller holds the bytes already;
        calling ``next_frame()`` after each feed keeps large frames in their own buffers."""
        view = memoryview(data).cast("B")
        while view:
            target = self.get_buffer()
            if not target:
                self._grow(self._end - self._start + len(view))
                target = self.get_buffer()
            size = min(len(target), len(view))
            target[:size] = view[:size]
            self.buffer_updated(size)
            view = view[size:]

    # -- splitting -------------------------------------------------------------------------

    def next_frame(self) -> Frame | LargeFrame | BadLength | _NeedData:
        """The next event (see the module doc)."""
        raise NotImplementedError  # a subclass binds ``frame_splitter(...)`` here

    def start_large_frame(self) -> None:
        """Read the payload of the ``LargeFrame`` just answered into a buffer of its own."""
        event = self.next_frame()
        if type(event) is not LargeFrame:
            raise RuntimeError(f"no large frame has begun (the decoder answers {event!r})")
        payload_start = self._start + self.HEADER_SIZE
        available = self._end - payload_start  # all of it belongs to this frame: it is incomplete
        large = None
        if self.large_buffers is not None:
            large = self.large_buffers.take(event.payload_size)
        if large is None:
            large = bytearray(max(min(event.payload_size, self.large_first_chunk), available))
        with memoryview(self._buffer) as view:
            large[:available] = view[payload_start : self._end]
        self._large = large
        self._large_size = event.payload_size
        self._large_filled = available
        self._large_code = event.code
        self._start = self._end = 0
        if len(self._buffer) > self.initial_buffer_size:  # the frame has its own buffer now
            self._buffer = bytearray(self.initial_buffer_size)

    # -- internals -------------------------------------------------------------------------

    def _compact(self) -> None:
        remaining = self._end - self._start
        self._buffer[:remaining] = self._buffer[self._start : self._end]
        self._start, self._end = 0, remaining

    def _grow(self, size: int) -> None:
        """Move the unparsed bytes to the start of a new buffer of ``size`` bytes or more."""
        remaining = self._end - self._start
        grown = bytearray(max(size, len(self._buffer)))
        grown[:remaining] = self._buffer[self._start : self._end]
        self._buffer, self._start, self._end = grown, 0, remaining


class LargeBuffers:
    """Buffers of earlier large frames, for decoders to read large frames into again once
    nothing holds them: at most ``count`` buffers of at most ``max_size`` bytes each (what one
    listener keeps beyond the requests in flight). A buffer is free when the only references
    to it are this pool's: a frame's memoryview, any slice of it, a buffer export (a write in a
    worker thread) or a stored reference all hold it, so a frame is never overwritten while
    anything can still read it. One event loop's decoders share one pool."""

    __slots__ = ("count", "max_size", "_buffers")

    def __init__(self, count: int = 4, max_size: int = 8 * 1024 * 1024) -> None:
        self.count = count
        self.max_size = max_size
        self._buffers: list[bytearray] = []

    def take(self, size: int) -> bytearray | None:
        """A free buffer of ``size`` bytes or more (the smallest), or None."""
        found = None
        for buffer in self._buffers:  # references while free: the list, ``buffer``, the call
            if (len(buffer) >= size and sys.getrefcount(buffer) == 3
                    and (found is None or len(buffer) < len(found))):
                found = buffer
        return found

    def keep(self, buffer: bytearray) -> None:
        """Remember the buffer of a large frame just handed out (if there is room for it)."""
        if len(buffer) > self.max_size or any(kept is buffer for kept in self._buffers):
            return
        if len(self._buffers) < self.count:
            self._buffers.append(buffer)
            return
        for index in range(len(self._buffers)):  # replace a free, smaller one
            kept = self._buffers[index]  # (an enumerate tuple would hold one more reference)
            if len(kept) < len(buffer) and sys.getrefcount(kept) == 3:
                self._buffers[index] = buffer
                return


