"""Request bodies of the HTTP API as pydantic models: validation before the route runs, and the
OpenAPI schema (``/openapi.json``, ``/docs``) documents every body.

Owns: one model per JSON body of wire §8.4. They are strict (a JSON string is not an integer,
``1`` is not ``true``) and forbid unknown fields, so a malformed body is refused with 400
before any command is built. The route then hands ``model_dump(exclude_unset=True)`` to
``rill.protocol.iggy.http_json``, which owns the mapping to the command dataclass; the rules there
and here are the same (the mapping checks again, which keeps it self-contained for the SDK's
round-trip tests).
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

Compression = Literal["none", "gzip"]
RecordFormat = Literal["iggy", "kafka"]
UserStatus = Literal["active", "inactive"]
HeaderKind = Literal["raw", "string", "bool", "int8", "int16", "int32", "int64", "int128", "uint8",
                     "uint16", "uint32", "uint64", "uint128", "float32", "float64"]
SnapshotType = Literal["FilesystemOverview", "ProcessList", "ResourceUsage", "Test", "ServerLogs"]
SnapshotCompression = Literal["Stored", "Deflated", "Bzip2", "Zstd", "Lzma", "Xz"]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# -- system -----------------------------------------------------------------------------------


class SnapshotBody(Body):
    snapshot_types: Optional[list[SnapshotType]] = Field(
        None, max_length=255, description="Default: FilesystemOverview, ProcessList, ResourceUsage, ServerLogs")
    compression: SnapshotCompression = "Deflated"


# -- users and tokens -------------------------------------------------------------------------


class GlobalPermissionsBody(Body):
    manage_servers: bool = False
    read_servers: bool = False
    manage_users: bool = False
    read_users: bool = False
    manage_streams: bool = False
    read_streams: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False


class TopicPermissionsBody(Body):
    manage_topic: bool = False
    read_topic: bool = False
    poll_messages: bool = False
    send_messages: bool = False


class StreamPermissionsBody(Body):
    manage_stream: bool = False
    read_stream: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False
    topics: Optional[dict[str, TopicPermissionsBody]] = Field(None, description="Keyed by topic id")


class PermissionsBody(Body):
    global_: GlobalPermissionsBody = Field(default_factory=GlobalPermissionsBody, alias="global")
    streams: Optional[dict[str, StreamPermissionsBody]] = Field(None, description="Keyed by stream id")

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


class LoginBody(Body):
    username: str
    password: str
    version: Optional[str] = None
    context: Optional[str] = None


class TokenBody(Body):
    token: str


class CreateUserBody(Body):
    username: str
    password: str
    status: UserStatus = "active"
    permissions: Optional[PermissionsBody] = None


class UpdateUserBody(Body):
    username: Optional[str] = None
    status: Optional[UserStatus] = None


class UpdatePermissionsBody(Body):
    permissions: Optional[PermissionsBody] = None


class ChangePasswordBody(Body):
    current_password: str
    new_password: str


class CreateTokenBody(Body):
    name: str
    expiry: int = Field(0, ge=0, le=2**64 - 1, description="µs; 0 = server default, 2^64-1 = never")


# -- streams, topics, partitions --------------------------------------------------------------


class CreateStreamBody(Body):
    stream_id: Optional[int] = Field(None, ge=0, le=2**32 - 1, description="Absent: the server chooses")
    name: str


class UpdateStreamBody(Body):
    name: str


class TopicSettings(Body):
    name: str
    compression_algorithm: Compression = "none"
    message_expiry: int = Field(0, ge=0, le=2**64 - 1, description="µs; 0 = server default, 2^64-1 = never")
    max_topic_size: int = Field(0, ge=0, le=2**64 - 1, description="bytes; 0 = server default, 2^64-1 = unlimited")
    replication_factor: Optional[int] = Field(None, ge=0, le=255)


class CreateTopicBody(TopicSettings):
    topic_id: Optional[int] = Field(None, ge=0, le=2**32 - 1, description="Absent: the server chooses")
    partitions_count: int = Field(ge=0, le=2**32 - 1)
    record_format: RecordFormat = Field(
        "iggy", description="How the topic stores records: iggy (Iggy's message layout, the "
        "default) or kafka (Kafka's RecordBatch v2, as Kafka and TANK clients create)")


class UpdateTopicBody(TopicSettings):
    pass


class CreatePartitionsBody(Body):
    partitions_count: int = Field(ge=0, le=2**32 - 1)


# -- messages, offsets, groups ----------------------------------------------------------------


class PartitioningBody(Body):
    kind: Literal["balanced", "partition_id", "messages_key"]
    value: str = Field("", description="Base64; partition_id: 4-byte little-endian u32; balanced: empty")


class HeaderBody(Body):
    kind: HeaderKind
    value: str = Field(description="Base64 of the value bytes (numbers little-endian)")


class MessageBody(Body):
    id: Optional[int] = Field(None, ge=0, le=2**128 - 1, description="Absent or 0: a UUIDv7")
    payload: str = Field(description="Base64")
    headers: Optional[dict[str, HeaderBody]] = None


class SendMessagesBody(Body):
    partitioning: PartitioningBody
    messages: list[MessageBody]


class StoreOffsetBody(Body):
    id: Optional[str | int] = Field(None, description="The consumer id (digits: numeric); default 1")
    partition_id: Optional[int] = Field(None, ge=0, le=2**32 - 1)
    offset: int = Field(ge=0, le=2**64 - 1)


class CreateGroupBody(Body):
    group_id: Optional[int] = Field(None, ge=0, le=2**32 - 1, description="Absent: the server chooses")
    name: str


def to_json(body: BaseModel | None) -> object:
    """The body as plain JSON values, with the fields the caller left out left out."""
    return None if body is None else body.model_dump(exclude_unset=True, by_alias=True)
