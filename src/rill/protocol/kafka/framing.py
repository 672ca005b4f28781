"""Kafka's framing: ``[size int32 big-endian][payload of size bytes]``, split without I/O.

``KafkaRequestFrameDecoder`` (the server's side) and ``KafkaResponseFrameDecoder`` (a client's)
are ``rill.protocol.framing.FrameDecoder``s: the same buffer management (zero-copy
``get_buffer``/``buffer_updated`` or ``feed``, a shared buffer for small frames, a large
frame's own buffer growing with what arrives) and the same answers (``Frame``, ``NEED_DATA``,
``LargeFrame``, ``BadLength``). Only the splitting is Kafka's own, because the Iggy decoder's
header shape is fixed in its module (8 bytes, a little-endian u32 length and a u32 code)
rather than in its class attributes: Kafka's header is 4 bytes, big-endian, signed, and has no
code field. ``Frame.payload`` is the whole payload (request or response header + body); for
requests ``Frame.code`` / ``LargeFrame.code`` is the API key (peeked, still in the payload) so
the owner can decide about a large frame (e.g. admit only Produce), for responses 0.

Invariants (as the Iggy decoder's): a size below the smallest header (8 bytes for requests:
api key, version, correlation id; 4 for responses) or above ``max_payload_size`` is reported
as ``BadLength`` as soon as the 4 size bytes are in, and nothing is allocated for it.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from rill.protocol.framing import NEED_DATA, BadLength, Frame, FrameDecoder, LargeFrame

if TYPE_CHECKING:
    from rill.protocol.framing import _NeedData

SIZE_PREFIX = 4
_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` with its int32 size in front."""
    return _SIZE.pack(len(payload)) + payload


class KafkaFrameDecoder(FrameDecoder):
    """Splits a Kafka byte stream into frames; subclasses set the minimum payload and whether
    the API key is peeked as the frame's code."""

    MIN_PAYLOAD = 4
    PEEK_API_KEY = False

    __slots__ = ()

    def next_frame(self) -> Frame | LargeFrame | BadLength | _NeedData:
        large = self._large
        if large is not None:
            if self._large_filled < self._large_size:
                return NEED_DATA
            self._large = None
            return Frame(self._large_code, memoryview(large))
        start = self._start
        available = self._end - start
        if not available:
            self._start = self._end = 0
            return NEED_DATA
        if available < SIZE_PREFIX:
            return NEED_DATA
        buffer = self._buffer
        size = _SIZE.unpack_from(buffer, start)[0]
        if size < self.MIN_PAYLOAD:
            return BadLength(size, size, too_large=False)
        if size > self.max_payload_size:
            return BadLength(size, size, too_large=True)
        payload_start = start + SIZE_PREFIX
        if self.PEEK_API_KEY:
            if available < SIZE_PREFIX + 2:
                return NEED_DATA
            code = _API_KEY.unpack_from(buffer, payload_start)[0]
        else:
            code = 0
        if available - SIZE_PREFIX >= size:
            with memoryview(buffer) as view:
                payload = bytes(view[payload_start : payload_start + size])
            self._start = payload_start + size
            return Frame(code, memoryview(payload))
        if size > self.max_buffer_size - SIZE_PREFIX:
            return LargeFrame(code, size)
        needed = SIZE_PREFIX + size
        if len(buffer) - start < needed:
            if len(buffer) >= needed:
                self._compact()
            else:
                self._grow(1 << (needed - 1).bit_length())
        return NEED_DATA

    def start_large_frame(self) -> None:
        """Read the payload of the ``LargeFrame`` just answered into a buffer of its own."""
        event = self.next_frame()
        if type(event) is not LargeFrame:
            raise RuntimeError(f"no large frame has begun (the decoder answers {event!r})")
        payload_start = self._start + SIZE_PREFIX
        available = self._end - payload_start
        large = bytearray(max(min(event.payload_size, self.large_first_chunk), available))
        with memoryview(self._buffer) as view:
            large[:available] = view[payload_start : self._end]
        self._large = large
        self._large_size = event.payload_size
        self._large_filled = available
        self._large_code = event.code
        self._start = self._end = 0
        if len(self._buffer) > self.initial_buffer_size:
            self._buffer = bytearray(self.initial_buffer_size)


class KafkaRequestFrameDecoder(KafkaFrameDecoder):
    """The server's side: a payload holds at least api key, version and correlation id."""

    MIN_PAYLOAD = 8
    PEEK_API_KEY = True
    __slots__ = ()


class KafkaResponseFrameDecoder(KafkaFrameDecoder):
    """A client's side: a payload holds at least the correlation id."""

    MIN_PAYLOAD = 4
    __slots__ = ()
