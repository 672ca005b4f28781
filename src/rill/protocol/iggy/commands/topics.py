"""Topic commands 300-305 (wire reference §3.7) and rill's 1040-1041 (docs/extensions.md): the
record format a topic stores, chosen at creation.

Owns: ``RECORD_FORMATS``, the short names of the record formats a topic may be created with
(``iggy``: Iggy's message layout, the default; ``kafka``: Kafka's RecordBatch v2, what Kafka
and TANK clients create) and the stored formats they stand for; ``record_format_short`` /
``record_format_stored`` map between them (a bad name: ``errors.InvalidFormat`` naming the
choices).
"""

from __future__ import annotations

from dataclasses import dataclass

from rill import errors
from rill.protocol.iggy.commands.base import (
    IDENT,
    STR8,
    U8,
    U32,
    U64,
    Command,
    enum8,
    list_response,
    optional_response,
    single_response,
)
from rill.protocol.primitives import CompressionAlgorithm
from rill.protocol.iggy.primitives import Identifier
from rill.protocol.iggy.responses.topics import Topic, TopicDetails, TopicRecordFormat

COMPRESSION = enum8(CompressionAlgorithm)

RECORD_FORMATS = {"iggy": "iggy-v1", "kafka": "kafka-v2"}  # short name -> stored format
DEFAULT_RECORD_FORMAT = "iggy"
_SHORT = {stored: short for short, stored in RECORD_FORMATS.items()}


def record_format_stored(short: str) -> str:
    """The stored format a short name stands for; InvalidFormat for any other name."""
    stored = RECORD_FORMATS.get(short) if isinstance(short, str) else None
    if stored is None:
        raise errors.InvalidFormat(
            reason=f"record_format must be one of {', '.join(RECORD_FORMATS)}, not {short!r}",
            field="record_format")
    return stored


def record_format_short(stored: str) -> str:
    """A stored format's short name (a format without one keeps its stored name)."""
    return _SHORT.get(stored, stored)


@dataclass(frozen=True, slots=True)
class GetTopic(Command):
    """300 GET_TOPIC: ident stream_id; ident topic_id. OK: TopicDetails, or empty on failure."""

    CODE = 300
    NAME = "get_topic"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, IDENT)
    stream_id: Identifier
    topic_id: Identifier

    decode_response = staticmethod(optional_response(TopicDetails.decode))


@dataclass(frozen=True, slots=True)
class GetTopics(Command):
    """301 GET_TOPICS: ident stream_id. OK: concatenated topic headers."""

    CODE = 301
    NAME = "get_topics"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT,)
    stream_id: Identifier

    decode_response = staticmethod(list_response(Topic.decode))


@dataclass(frozen=True, slots=True)
class CreateTopic(Command):
    """302 CREATE_TOPIC: ident stream_id; u32 topic_id (0 = auto-assign); u32 partitions_count;
    u8 compression (1 none, 2 gzip, else status 3); u64 message_expiry (µs; 0 = server default,
    u64::MAX = never); u64 max_topic_size (0 = server default, u64::MAX = unlimited);
    u8 replication_factor (0 = none); str8 name. OK: TopicDetails of the new topic."""

    CODE = 302
    NAME = "create_topic"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, U32, U32, COMPRESSION, U64, U64, U8, STR8)
    stream_id: Identifier
    topic_id: int
    partitions_count: int
    compression_algorithm: CompressionAlgorithm
    message_expiry: int
    max_topic_size: int
    replication_factor: int
    name: str

    decode_response = staticmethod(single_response(TopicDetails.decode))


@dataclass(frozen=True, slots=True)
class CreateTopicWithFormat(CreateTopic):
    """1040 CREATE_TOPIC_WITH_FORMAT (rill extension): CREATE_TOPIC's fields, then str8
    record_format (``iggy`` or ``kafka``; another name: status 4). OK: TopicDetails of the new
    topic. (An Iggy server refuses the code, so a format cannot be dropped silently.)"""

    CODE = 1040
    NAME = "create_topic_with_format"
    TRAILING_BYTES_IGNORED = False
    LAYOUT = CreateTopic.LAYOUT + (STR8,)
    record_format: str


@dataclass(frozen=True, slots=True)
class GetTopicRecordFormats(Command):
    """1041 GET_TOPIC_RECORD_FORMATS (rill extension): ident stream_id. OK: concatenated
    ``u32 topic_id; str8 record_format`` (short name), one per topic of the stream; the binary
    topic records of GET_TOPIC / GET_TOPICS (Iggy's layout) cannot carry it."""

    CODE = 1041
    NAME = "get_topic_record_formats"
    LAYOUT = (IDENT,)
    stream_id: Identifier

    decode_response = staticmethod(list_response(TopicRecordFormat.decode))


@dataclass(frozen=True, slots=True)
class DeleteTopic(Command):
    """303 DELETE_TOPIC: ident stream_id; ident topic_id. OK: empty."""

    CODE = 303
    NAME = "delete_topic"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, IDENT)
    stream_id: Identifier
    topic_id: Identifier


@dataclass(frozen=True, slots=True)
class UpdateTopic(Command):
    """304 UPDATE_TOPIC: ident stream_id; ident topic_id; u8 compression (1/2, else status 3);
    u64 message_expiry; u64 max_topic_size; u8 replication_factor (0 = 1); str8 name.
    OK: empty."""

    CODE = 304
    NAME = "update_topic"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, IDENT, COMPRESSION, U64, U64, U8, STR8)
    stream_id: Identifier
    topic_id: Identifier
    compression_algorithm: CompressionAlgorithm
    message_expiry: int
    max_topic_size: int
    replication_factor: int
    name: str


@dataclass(frozen=True, slots=True)
class PurgeTopic(Command):
    """305 PURGE_TOPIC: ident stream_id; ident topic_id. OK: empty."""

    CODE = 305
    NAME = "purge_topic"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, IDENT)
    stream_id: Identifier
    topic_id: Identifier
