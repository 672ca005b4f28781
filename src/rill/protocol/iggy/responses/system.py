"""System records: Stats (wire §4.9) and client info / details (wire §4.7).

Stats: u32 process_id; f32 cpu_usage; f32 total_cpu_usage; u64 memory_usage; u64 total_memory;
u64 available_memory; u64 run_time (µs); u64 start_time; u64 read_bytes; u64 written_bytes;
u64 messages_size_bytes; u32 streams_count; u32 topics_count; u32 partitions_count;
u32 segments_count; u64 messages_count; u32 clients_count; u32 consumer_groups_count
(108 fixed bytes); then str32 hostname; str32 os_name; str32 os_version; str32 kernel_version;
then rill's own str32 server_version (absent from an Iggy server's answer).

ClientInfo: u32 client_id; u32 user_id (0 = not logged in); u8 transport (1 TCP, 2 QUIC);
str32 address ("ip:port"); u32 consumer_groups_count.
ClientInfoDetails: ClientInfo followed by consumer_groups_count x (u32 stream_id,
u32 topic_id, u32 group_id). GET_CLIENTS answers concatenated ClientInfo (no triples).

Invariant: a ClientInfoDetails' header count equals the number of its group triples (checked
at construction), since the reader relies on the count to find the end of the record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rill.protocol.buffer import Reader, Writer
from rill.protocol.iggy.commands.base import STR32, U8, U32, U64, FieldCodec
from rill.protocol.iggy.responses.base import Record

F32: FieldCodec[float] = FieldCodec("f32", Reader.f32, Writer.f32)

STATS_FIXED_SIZE = 108


@dataclass(frozen=True, slots=True)
class Stats(Record):
    """GET_STATS answer. ``start_time`` is µs in rill (Iggy 0.4 filled it with seconds).

    rill appends ``server_version`` (str32) after Iggy 0.4's last field, as later Iggy servers
    appended theirs: a decoder that stops at ``kernel_version`` is unaffected, and this one
    reads it only when present (an Iggy server's answer ends before it: "")."""

    LAYOUT = (
        U32, F32, F32, U64, U64, U64, U64, U64, U64, U64, U64,
        U32, U32, U32, U32, U64, U32, U32,
        STR32, STR32, STR32, STR32, STR32,
    )

    process_id: int
    cpu_usage: float
    total_cpu_usage: float
    memory_usage: int
    total_memory: int
    available_memory: int
    run_time: int
    start_time: int
    read_bytes: int
    written_bytes: int
    messages_size_bytes: int
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
    server_version: str = ""

    @classmethod
    def read_fields(cls, reader: Reader) -> list[Any]:
        values = [codec.read(reader) for codec in cls.LAYOUT[:-1]]
        if not reader.at_end():
            values.append(cls.LAYOUT[-1].read(reader))
        return values


@dataclass(frozen=True, slots=True)
class ClientInfo(Record):
    LAYOUT = (U32, U32, U8, STR32, U32)

    client_id: int
    user_id: int
    transport: int
    address: str
    consumer_groups_count: int


@dataclass(frozen=True, slots=True)
class ClientConsumerGroup(Record):
    """One group a client has joined, as listed in ClientInfoDetails."""

    LAYOUT = (U32, U32, U32)

    stream_id: int
    topic_id: int
    group_id: int


@dataclass(frozen=True, slots=True)
class ClientInfoDetails(Record):
    """GET_ME / GET_CLIENT answer: the client header and the groups it has joined."""

    client: ClientInfo
    consumer_groups: tuple[ClientConsumerGroup, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "consumer_groups", tuple(self.consumer_groups))
        if self.client.consumer_groups_count != len(self.consumer_groups):
            raise ValueError(
                f"consumer_groups_count {self.client.consumer_groups_count} != "
                f"{len(self.consumer_groups)} listed groups"
            )

    @classmethod
    def of(
        cls,
        client_id: int,
        user_id: int,
        transport: int,
        address: str,
        consumer_groups: tuple[ClientConsumerGroup, ...] | list[ClientConsumerGroup] = (),
    ) -> ClientInfoDetails:
        """Build details with the header count derived from the groups."""
        groups = tuple(consumer_groups)
        return cls(ClientInfo(client_id, user_id, transport, address, len(groups)), groups)

    def encode(self, writer: Writer) -> None:
        self.client.encode(writer)
        for group in self.consumer_groups:
            group.encode(writer)

    @classmethod
    def decode(cls, reader: Reader) -> ClientInfoDetails:
        client = ClientInfo.decode(reader)
        groups = tuple(ClientConsumerGroup.decode(reader) for _ in range(client.consumer_groups_count))
        return cls(client, groups)

    @property
    def client_id(self) -> int:
        return self.client.client_id

    @property
    def user_id(self) -> int:
        return self.client.user_id

    @property
    def address(self) -> str:
        return self.client.address
