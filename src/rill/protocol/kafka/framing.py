"""Kafka's framing: ``[size int32 big-endian][payload of size bytes]``, split without I/O.

``KafkaRequestFrameDecoder`` (the server's side) and ``KafkaResponseFrameDecoder`` (a client's)
are ``rill.protocol.framing.FrameDecoder``s with Kafka's header shape (``frame_splitter``): the
same buffer management (zero-copy ``get_buffer``/``buffer_updated`` or ``feed``, a shared buffer
for small frames, a large frame's own buffer growing with what arrives) and the same answers
(``Frame``, ``NEED_DATA``, ``LargeFrame``, ``BadLength``). ``Frame.payload`` is the whole payload
(request or response header + body); ``Frame.code`` / ``LargeFrame.code`` is peeked from it,
still in the payload: a request's API key (so the owner can decide about a large frame, e.g.
admit only Produce), a response's correlation id.

Invariants (as the Iggy decoder's): a size below the smallest header (8 bytes for requests:
api key, version, correlation id; 4 for responses) or above ``max_payload_size`` is reported
as ``BadLength`` as soon as the 4 size bytes are in, and nothing is allocated for it.
"""

from __future__ import annotations

import struct

from rill.protocol.framing import FrameDecoder, frame_splitter

SIZE_PREFIX = 4
_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")
_CORRELATION_ID = struct.Struct(">i")


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` with its int32 size in front."""
    return _SIZE.pack(len(payload)) + payload


class KafkaRequestFrameDecoder(FrameDecoder):
    """The server's side: a payload holds at least api key, version and correlation id."""

    __slots__ = ()
    HEADER_SIZE = SIZE_PREFIX
    next_frame = frame_splitter(header_size=SIZE_PREFIX, length=_SIZE, length_offset=0,
                                length_counts=0, code=_API_KEY, code_offset=SIZE_PREFIX,
                                min_payload=8)


class KafkaResponseFrameDecoder(FrameDecoder):
    """A client's side: a payload holds at least the correlation id."""

    __slots__ = ()
    HEADER_SIZE = SIZE_PREFIX
    next_frame = frame_splitter(header_size=SIZE_PREFIX, length=_SIZE, length_offset=0,
                                length_counts=0, code=_CORRELATION_ID, code_offset=SIZE_PREFIX,
                                min_payload=4)
