"""The rows of the catalog: streams, topics, partitions, consumer positions, consumer groups,
personal access tokens and users, as the Catalog port (``core.catalog``) and both of its
implementations (``storage.sqlite_catalog``, ``core.memory_catalog``) speak of them.

Owns: these value shapes, the changes a catalog delivers that another node made
(``CatalogChange``: ``PositionStored``, ``StreamRenamed``, ``TopicUpdated``, ``GroupCreated``,
``GroupDeleted``, ``UserCreated``, ``UserUpdated``, ``UserDeleted``, each holding what the
catalog confirmed) and ``CatalogConflict``, the one error a catalog raises for a change it
refuses (a duplicate key or name, a reference to a stream, topic, partition or user it does not
hold). Protocol-neutral plain data: no SQL, no file, no wire format.
"""

from __future__ import annotations

from dataclasses import dataclass

from rill.server.storage.formats import iggy_v1


class CatalogConflict(Exception):
    """A change the catalog refused: its key or name is taken, or what it refers to is not
    there. Nothing was changed."""


@dataclass(frozen=True, slots=True)
class StreamRow:
    id: int
    name: str
    created_at: int


@dataclass(frozen=True, slots=True)
class TopicRow:
    stream_id: int
    id: int
    name: str
    created_at: int
    compression_algorithm: int
    message_expiry: int
    max_topic_size: int
    replication_factor: int
    record_format: str = iggy_v1.NAME  # how its partitions store records (``storage.formats``)


@dataclass(frozen=True, slots=True)
class PartitionRow:
    stream_id: int
    topic_id: int
    id: int
    created_at: int


@dataclass(frozen=True, slots=True)
class PositionRow:
    """Where consumer ``consumer`` (a name) reads next in one partition."""

    stream_id: int
    topic_id: int
    partition_id: int
    consumer: str
    next_offset: int
    note: str | None = None  # what the consumer stored with the position (Kafka's metadata)
    leader_epoch: int | None = None  # the leader epoch it stored with it (Kafka's), if any


@dataclass(frozen=True, slots=True)
class ConsumerGroupRow:
    stream_id: int
    topic_id: int
    id: int
    name: str


@dataclass(frozen=True, slots=True)
class PersonalAccessTokenRow:
    user_id: int
    name: str
    token_hash: str  # BLAKE3 of the token, 64 lowercase hex characters
    expiry_at: int  # µs; 0 = never expires


@dataclass(frozen=True, slots=True)
class UserRow:
    id: int
    username: str
    password_hash: str
    status: int
    permissions: bytes | None
    created_at: int
    # SCRAM credentials per mechanism as text (``auth.scram.encode``); None: none derived yet
    scram_credentials: str | None = None


# -- changes confirmed elsewhere (``core.catalog``: ``Catalog.follow``) ----------------------


@dataclass(frozen=True, slots=True)
class PositionStored:
    """A consumer position stored (with its note and leader epoch, as held)."""

    row: PositionRow


@dataclass(frozen=True, slots=True)
class StreamRenamed:
    stream_id: int
    name: str


@dataclass(frozen=True, slots=True)
class TopicUpdated:
    """A topic's new name and settings, as the catalog holds the topic now."""

    row: TopicRow


@dataclass(frozen=True, slots=True)
class GroupCreated:
    row: ConsumerGroupRow


@dataclass(frozen=True, slots=True)
class GroupDeleted:
    """A consumer group deleted, and the positions stored under its name ``consumer``."""

    stream_id: int
    topic_id: int
    id: int
    consumer: str


@dataclass(frozen=True, slots=True)
class UserCreated:
    row: UserRow


@dataclass(frozen=True, slots=True)
class UserUpdated:
    """A user as the catalog holds it now (name, status, permissions, password, SCRAM)."""

    row: UserRow


@dataclass(frozen=True, slots=True)
class UserDeleted:
    """A user deleted, and its personal access tokens with it."""

    id: int


@dataclass(frozen=True, slots=True)
class StreamCreated:
    row: StreamRow


@dataclass(frozen=True, slots=True)
class StreamDeleted:
    stream_id: int


@dataclass(frozen=True, slots=True)
class TopicCreated:
    """A topic with its partitions (a cluster's: each node keeps a log of every partition)."""

    row: TopicRow
    partitions: tuple[PartitionRow, ...]


@dataclass(frozen=True, slots=True)
class PartitionsCreated:
    """Partitions added to a topic."""

    partitions: tuple[PartitionRow, ...]


@dataclass(frozen=True, slots=True)
class TopicDeleted:
    stream_id: int
    topic_id: int


CatalogChange = (PositionStored | StreamRenamed | TopicUpdated | GroupCreated | GroupDeleted
                 | UserCreated | UserUpdated | UserDeleted | StreamCreated | StreamDeleted
                 | TopicCreated | TopicDeleted | PartitionsCreated)
