"""Topic commands 300-305 (wire reference §3.7)."""

from __future__ import annotations

from dataclasses import dataclass

from rill.protocol.commands.base import (
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
from rill.protocol.primitives import CompressionAlgorithm, Identifier
from rill.protocol.responses.topics import Topic, TopicDetails

COMPRESSION = enum8(CompressionAlgorithm)


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
