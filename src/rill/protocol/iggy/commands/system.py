"""System commands 1-22 (wire reference §3.1): ping, stats, snapshot, clients."""

from __future__ import annotations

from dataclasses import dataclass

from rill.protocol.buffer import Reader, Writer
from rill.protocol.iggy.commands.base import (
    U32,
    Command,
    EmptyCommand,
    list_response,
    optional_response,
    single_response,
)
from rill.protocol.primitives import SnapshotCompression, SnapshotType
from rill.protocol.iggy.primitives import decode_enum
from rill.protocol.iggy.responses.system import ClientInfo, ClientInfoDetails, Stats

DEFAULT_SNAPSHOT_TYPES = (
    SnapshotType.FILESYSTEM_OVERVIEW,
    SnapshotType.PROCESS_LIST,
    SnapshotType.RESOURCE_USAGE,
    SnapshotType.SERVER_LOGS,
)


@dataclass(frozen=True, slots=True)
class Ping(EmptyCommand):
    """1 PING: empty (any payload byte is status 3). OK: empty. Refreshes the heartbeat."""

    CODE = 1
    NAME = "ping"


@dataclass(frozen=True, slots=True)
class GetStats(EmptyCommand):
    """10 GET_STATS: empty. OK: Stats (§4.9). Allowed without login."""

    CODE = 10
    NAME = "get_stats"

    decode_response = staticmethod(single_response(Stats.decode))


@dataclass(frozen=True, slots=True)
class GetSnapshot(Command):
    """11 GET_SNAPSHOT_FILE: u8 compression (1 stored .. 6 xz); u8 types_count;
    types_count x u8 snapshot type (1 filesystem_overview .. 5 server_logs).
    OK: the raw bytes of a ZIP archive (§4.13). Unknown enum bytes are status 3.
    """

    CODE = 11
    NAME = "get_snapshot"
    TRAILING_BYTES_IGNORED = True
    compression: SnapshotCompression = SnapshotCompression.DEFLATED
    types: tuple[SnapshotType, ...] = DEFAULT_SNAPSHOT_TYPES

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", tuple(self.types))
        if len(self.types) > 255:
            raise ValueError(f"{len(self.types)} snapshot types do not fit a u8 count")

    def encode(self) -> bytes:
        writer = Writer().u8(int(self.compression)).u8(len(self.types))
        for snapshot_type in self.types:
            writer.u8(int(snapshot_type))
        return writer.getvalue()

    @classmethod
    def read(cls, reader: Reader) -> GetSnapshot:
        compression = decode_enum(SnapshotCompression, reader.u8())
        count = reader.u8()
        types = tuple(decode_enum(SnapshotType, reader.u8()) for _ in range(count))
        return cls(compression, types)  # type: ignore[arg-type]

    @staticmethod
    def decode_response(payload: memoryview | bytes) -> bytes:
        return bytes(payload)


@dataclass(frozen=True, slots=True)
class GetMe(EmptyCommand):
    """20 GET_ME: empty. OK: ClientInfoDetails of the caller's own session (§4.7)."""

    CODE = 20
    NAME = "get_me"

    decode_response = staticmethod(single_response(ClientInfoDetails.decode))


@dataclass(frozen=True, slots=True)
class GetClient(Command):
    """21 GET_CLIENT: u32 client_id. OK: ClientInfoDetails, or empty on any failure."""

    CODE = 21
    NAME = "get_client"
    LAYOUT = (U32,)
    client_id: int

    decode_response = staticmethod(optional_response(ClientInfoDetails.decode))


@dataclass(frozen=True, slots=True)
class GetClients(EmptyCommand):
    """22 GET_CLIENTS: empty. OK: concatenated ClientInfo records (no group triples)."""

    CODE = 22
    NAME = "get_clients"

    decode_response = staticmethod(list_response(ClientInfo.decode))


