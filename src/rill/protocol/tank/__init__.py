"""TANK's wire protocol (tank-wire-reference.md), sans-I/O: the codec rill's TANK listener
and its TANK client (``rill.client.tank``) share.

* ``primitives``: little-endian integers, ``str8``, 32-bit varints (<= 5 bytes), ``Reader``;
* ``framing``: ``msg_id:u8 payload_len:u32`` frames, ``TankFrameDecoder`` (256 MiB limit);
* ``messages``: every request and response of §3, ``decode_request`` / ``encode_response``
  (broker) and ``encode_request`` / ``decode_response`` (client);
* ``bundles``: bundles <-> columns (keys, values, timestamps, sequence numbers), Snappy,
  sparse numbering, chunks; the per-message loops in C (``_bundles.c``) with a Python twin;
* ``record_batches``: bundles <-> Kafka RecordBatch v2 (how rill's TANK listener stores and
  serves them), the per-record loops in C too;
* ``errors``: the error bytes as named constants and the exceptions of malformed input.

Invariant: nothing here does I/O, reads a clock or imports from ``rill.server`` /
``rill.client``; every decode failure raises a ``TankDecodeError``.
"""

from rill.protocol.tank.bundles import (
    Bundle,
    decode_bundle,
    decode_chunk,
    encode_bundle,
    frame_bundle,
)
from rill.protocol.tank.errors import (
    BadVarint,
    BundleError,
    ConsumeFlag,
    CreateTopicError,
    DiscoverReason,
    LengthMismatch,
    ProduceError,
    ReloadConfError,
    TankDecodeError,
    Truncated,
    UnknownMessageId,
)
from rill.protocol.tank.framing import PING_FRAME, TankFrameDecoder
from rill.protocol.tank.messages import (
    MsgId,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_parts,
)

__all__ = [
    "PING_FRAME", "BadVarint", "Bundle", "BundleError", "ConsumeFlag", "CreateTopicError",
    "DiscoverReason", "LengthMismatch", "MsgId", "ProduceError", "ReloadConfError",
    "TankDecodeError", "TankFrameDecoder", "Truncated", "UnknownMessageId", "decode_bundle",
    "decode_chunk", "decode_request", "decode_response", "encode_bundle", "encode_request",
    "encode_response", "encode_response_parts", "frame_bundle",
]
