"""Reply shapes of the HTTP API as pydantic models, for the OpenAPI document only.

Owns: the documented response schema of every JSON reply (wire §8.4). Routes do not validate
their replies through these models (``rill.protocol.iggy.http_json`` builds the JSON); the schema
tests (schemathesis) check that real replies conform to what is documented here, so the two
cannot drift apart silently.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, Field

from rill.server.transports.http.models import HeaderBody, PermissionsBody

Size = Field(description='Byte size: "<n> B" (any "<number> <unit>" is accepted on input)')


class Error(BaseModel):
    id: int = Field(description="The wire error code (404 for a get-single miss)")
    code: str = Field(description="The snake_case error name")
    reason: str
    field: Optional[str] = None


class Stream(BaseModel):
    id: int
    created_at: int = Field(description="µs since the epoch")
    name: str
    size: str = Size
    messages_count: int
    topics_count: int


class Topic(BaseModel):
    id: int
    created_at: int
    name: str
    size: str = Size
    message_expiry: int = Field(description="µs; 2^64-1 = never")
    compression_algorithm: Literal["none", "gzip"]
    max_topic_size: int = Field(description="bytes; 2^64-1 = unlimited")
    replication_factor: int
    messages_count: int
    partitions_count: int
    record_format: Literal["iggy", "kafka"] = Field(
        description="How the topic stores records: iggy (Iggy's message layout) or kafka "
        "(Kafka's RecordBatch v2)")


class TopicRecordFormat(BaseModel):
    topic_id: int
    record_format: Literal["iggy", "kafka"]


class Partition(BaseModel):
    id: int
    created_at: int
    segments_count: int
    current_offset: int
    size: str = Size
    messages_count: int


class StreamDetails(Stream):
    topics: list[Topic]


class TopicDetails(Topic):
    partitions: list[Partition]


class ConsumerGroup(BaseModel):
    id: int
    name: str
    partitions_count: int
    members_count: int


class ConsumerGroupMember(BaseModel):
    id: int
    partitions_count: int
    partitions: list[int]


class ConsumerGroupDetails(ConsumerGroup):
    members: list[ConsumerGroupMember]


class ConsumerOffsetInfo(BaseModel):
    partition_id: int
    current_offset: int
    stored_offset: int


class ConsumerLag(BaseModel):
    consumer_kind: Literal["consumer", "consumer_group"]
    consumer_id: int
    group_name: Optional[str] = Field(description="The group's name; null for a consumer")
    partition_id: int
    committed_offset: Optional[int] = Field(description="The last offset consumed; null: none yet")
    end_offset: int = Field(description="The offset the partition's next message will get")
    lag: int = Field(description="Stored messages after the committed offset")


class PolledMessage(BaseModel):
    offset: int
    state: Literal["available", "unavailable", "poisoned", "marked_for_deletion"]
    timestamp: int = Field(description="µs since the epoch")
    id: int = Field(description="u128")
    checksum: int
    headers: Optional[dict[str, HeaderBody]]
    payload: str = Field(description="Base64")


class PolledMessages(BaseModel):
    partition_id: int
    current_offset: int
    messages: list[PolledMessage]


class UserInfo(BaseModel):
    id: int
    created_at: int
    status: Literal["active", "inactive"]
    username: str


class UserInfoDetails(UserInfo):
    permissions: Optional[PermissionsBody]


class AccessToken(BaseModel):
    token: str = Field(description="A JWT: send it as Authorization: Bearer <token>")
    expiry: int = Field(description="unix seconds")


class IdentityInfo(BaseModel):
    user_id: int
    access_token: AccessToken


class PersonalAccessTokenInfo(BaseModel):
    name: str
    expiry_at: Optional[int] = Field(description="µs since the epoch; null = never")


class RawPersonalAccessToken(BaseModel):
    token: str


class ClientConsumerGroup(BaseModel):
    stream_id: int
    topic_id: int
    group_id: int


class ClientInfo(BaseModel):
    client_id: int
    user_id: Optional[int]
    address: str
    transport: Literal["TCP", "QUIC", "HTTP"]
    consumer_groups_count: int


class ClientInfoDetails(ClientInfo):
    consumer_groups: list[ClientConsumerGroup]


class Stats(BaseModel):
    process_id: int
    cpu_usage: float
    total_cpu_usage: float
    memory_usage: str = Size
    total_memory: str = Size
    available_memory: str = Size
    run_time: int = Field(description="µs")
    start_time: int = Field(description="µs since the epoch")
    read_bytes: str = Size
    written_bytes: str = Size
    messages_size_bytes: str = Size
    streams_count: int
    topics_count: int
    partitions_count: int
    segments_count: int
    messages_count: int
    clients_count: int
    consumer_groups_count: int
    hostname: str
    os_name: str
    os_version: str
    kernel_version: str
    server_version: str = Field(description="rill's version (not in Iggy's answer)")
