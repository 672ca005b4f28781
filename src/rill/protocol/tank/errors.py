"""TANK's error bytes and the TANK codec's exceptions.

Owns: every code a standalone or cluster TANK broker puts on the wire (tank-wire-reference §5.3,
§6.3, §8), as named constants, and the exceptions raised for malformed input. Only the codes
listed here may ever be emitted: TANK's C++ client aborts on any other value (§4.6).

Every decode failure raises a ``TankDecodeError`` subclass; a broker answers none of them on the
wire (TANK has no "bad request" response): it closes the connection (§2), or, for an invalid
bundle inside a well-formed Produce, answers ``ProduceError.SYSTEM`` for that partition (§13).
"""

from __future__ import annotations

from enum import IntEnum


class ProduceError(IntEnum):
    """One byte per (topic, partition) entry of a Produce response (§5.3)."""

    OK = 0x00
    UNKNOWN_PARTITION = 0x01
    SYSTEM = 0x02  # I/O fault while appending; rill: also an invalid bundle (§13)
    REPLICA_ACK_TIMEOUT = 0x03  # cluster only
    INSUFFICIENT_REPLICAS = 0x04  # cluster only
    INVALID_SEQ_NUM = 0x0A  # explicit sequence numbers not above the high-water mark
    OTHER_LEADER = 0xFC  # cluster only; followed by addr4:u32 port:u16
    NO_LEADER = 0xFD  # cluster only
    READ_ONLY = 0xFE  # one byte for the whole topic
    UNKNOWN_TOPIC = 0xFF  # one byte for the whole topic


class ConsumeFlag(IntEnum):
    """The ``errorOrFlags`` byte of a Consume response's partition header (§6.3)."""

    OK = 0x00  # base, hwm, chunk_len
    BOUNDARY_CHECK = 0x01  # base (0), hwm, chunk_len (0), first_available
    SYSTEM = 0xFB  # nothing follows
    OTHER_LEADER = 0xFC  # addr4, port (cluster only)
    NO_LEADER = 0xFD  # nothing follows (cluster only)
    SPARSE_FIRST = 0xFE  # hwm, chunk_len: no base, the first bundle is sparse
    UNKNOWN_PARTITION = 0xFF  # nothing follows


UNKNOWN_TOPIC_MARK = 0xFFFF  # in a Consume response, in place of an unknown topic's partitions


class DiscoverReason(IntEnum):
    """DiscoverPartitions: follows a partition whose two numbers are both 2^64-1 (§8.1)."""

    SYSTEM = 0xFB
    OTHER_LEADER = 0xFC  # addr4, port follow
    NO_LEADER = 0xFD


class CreateTopicError(IntEnum):
    """§8.2 (the C++ client reads any other value as success)."""

    OK = 0
    EXISTS = 1
    SYSTEM = 2
    INVALID_CONFIG = 4
    READ_ONLY = 5
    INVALID_REQUEST = 10  # partitions == 0 or an invalid name
    UNSUPPORTED = 11  # client-side meaning only; a broker never sends it


class ReloadConfError(IntEnum):
    """§8.3: the values the C++ client accepts are {0, 1, 2, 3, 10, 11, 12}."""

    OK = 0
    CLIENT_UNKNOWN_TOPIC = 1  # what the C++ client calls 1; the broker never sends it
    NO_CONFIG = 2
    PARSE_ERROR = 3
    UNKNOWN_PARTITION = 10
    UNKNOWN_TOPIC = 11
    UNSUPPORTED = 12


class TankDecodeError(ValueError):
    """Malformed TANK input; a broker closes the connection (§2)."""


class Truncated(TankDecodeError):
    """The input ends inside a field."""


class LengthMismatch(TankDecodeError):
    """Lengths or counts disagree: bytes left over, or a length past its container."""


class BadVarint(TankDecodeError):
    """A varint longer than 5 bytes, or a 5th byte above 0x0f (more than 32 bits)."""


class UnknownMessageId(TankDecodeError):
    """A msg_id that is not in §3's table (or has no decoder in this direction)."""

    def __init__(self, msg_id: int) -> None:
        super().__init__(f"unknown TANK msg_id 0x{msg_id:02x}")
        self.msg_id = msg_id


class BundleError(TankDecodeError):
    """A bundle that breaks §4 or §13's produce-path validation."""
