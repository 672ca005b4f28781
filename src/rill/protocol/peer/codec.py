"""The peer protocol's frames, sans-I/O (``shared/spec/cluster-design.md`` §2.7).

Owns: the frame layout both directions share, the request kinds and statuses, and building and
reading a frame's message. Nodes only: replicas fetch a leader's stored bytes
(``FETCH``, modelled on Kafka's Fetch v12 and TANK's ConsumePeer), ask where an epoch ends
(``EPOCH_END``, Kafka's OffsetForLeaderEpoch), hand a catalog change to the controller
(``CATALOG``) and run a client's request on the node that leads its partition (``FORWARD``,
Iggy's proxying). Every link opens with ``HELLO``, which proves the sender knows the cluster's
secret (kept in etcd: what reaches etcd may join); a link that has not may send nothing else.

Frame: ``kind:u8  length:u32  correlation:u32  header_length:u32  header  body``; ``length``
counts everything after itself. ``header`` is a JSON object (the request's or answer's few
fields: ids, offsets, epochs; never per-record data), ``body`` raw bytes (records as stored,
a forwarded frame). An answer has its request's kind with ``ANSWER`` set and the same
correlation; its header holds ``status`` (``OK`` or an error name of ``rill.errors``, with
``message``). Answers may come out of order (a long-polled fetch answers later).

Invariant: a frame whose header is not a JSON object, or whose lengths do not add up, is a
``DecodeError``; nothing is trusted before it is checked.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

from rill.protocol.buffer import DecodeError
from rill.protocol.framing import FrameDecoder, frame_splitter

HEADER = struct.Struct("<BI")  # kind, length
HEADER_SIZE = 5
_MESSAGE_HEAD = struct.Struct("<II")  # correlation, header_length
MAX_PAYLOAD_SIZE = 64 * 1024 * 1024

HELLO = 1
FETCH = 2
EPOCH_END = 3
CATALOG = 4
FORWARD = 5
KINDS = {HELLO: "hello", FETCH: "replica_fetch", EPOCH_END: "epoch_end", CATALOG: "catalog",
         FORWARD: "forward"}
ANSWER = 0x80

OK = "ok"


@dataclass(slots=True)
class Message:
    kind: int
    correlation: int
    header: dict[str, Any]
    body: bytes | memoryview = b""
    chunks: list[bytes | memoryview] = field(default_factory=list)  # more body, sent after

    @property
    def is_answer(self) -> bool:
        return bool(self.kind & ANSWER)


def encode(message: Message) -> list[bytes | memoryview]:
    """The frame's parts, to write in order (the body's chunks are not copied)."""
    header = json.dumps(message.header, separators=(",", ":")).encode()
    body = [message.body, *message.chunks] if message.body else list(message.chunks)
    length = _MESSAGE_HEAD.size + len(header) + sum(len(part) for part in body)
    return [HEADER.pack(message.kind, length)
            + _MESSAGE_HEAD.pack(message.correlation, len(header)) + header, *body]


def decode(kind: int, payload: memoryview) -> Message:
    """The message of one frame (``kind`` and the payload after the 5-byte header)."""
    if len(payload) < _MESSAGE_HEAD.size:
        raise DecodeError(f"a peer frame of {len(payload)} bytes has no message head")
    correlation, header_length = _MESSAGE_HEAD.unpack_from(payload)
    end = _MESSAGE_HEAD.size + header_length
    if end > len(payload):
        raise DecodeError(f"a peer frame's header ({header_length} bytes) runs past its end")
    try:
        header = json.loads(bytes(payload[_MESSAGE_HEAD.size:end]))
    except (ValueError, UnicodeDecodeError) as error:
        raise DecodeError(f"a peer frame's header is not JSON: {error}") from None
    if not isinstance(header, dict):
        raise DecodeError("a peer frame's header is not a JSON object")
    return Message(kind, correlation, header, payload[end:])


def answer(request: Message, header: dict[str, Any] | None = None,
           body: bytes | memoryview = b"", chunks: list[bytes | memoryview] | None = None
           ) -> Message:
    """A successful answer to ``request``."""
    return Message(request.kind | ANSWER, request.correlation, {"status": OK, **(header or {})},
                   body, chunks or [])


def refusal(request: Message, status: str, message: str) -> Message:
    """An error answer: ``status`` is an error name of ``rill.errors`` (or one of this
    protocol's: "unauthenticated" before HELLO)."""
    return Message(request.kind | ANSWER, request.correlation,
                   {"status": status, "message": message})


class PeerFrameDecoder(FrameDecoder):
    """Both directions' decoder (``Frame.code``: the kind)."""

    __slots__ = ()
    HEADER_SIZE = HEADER_SIZE

    def __init__(self, max_payload_size: int = MAX_PAYLOAD_SIZE, **options: int) -> None:
        super().__init__(max_payload_size, **options)

    next_frame = frame_splitter(header_size=HEADER_SIZE, length=struct.Struct("<I"),
                                length_offset=1, length_counts=0, code=struct.Struct("<B"),
                                code_offset=0, min_payload=_MESSAGE_HEAD.size)
