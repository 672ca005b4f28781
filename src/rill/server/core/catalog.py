"""The Catalog port: what the core keeps durable about its namespace and its users, and the
only way the core changes it.

Owns: the ``Catalog`` protocol (streams, topics, partitions, users, personal access tokens,
consumer groups, consumer positions, reserved id blocks, and the node-local tables of auth:
the login throttle's trusted logins and HTTP's revoked access tokens) and the changes it
delivers that this node did not make (``CatalogChange``, ``Catalog.follow``).
Implementations: ``storage.sqlite_catalog.SqliteCatalog`` (SQLite in the data directory, what a
server runs on) and ``core.memory_catalog.MemoryCatalog`` (its memory twin, what the core's tests
run on).

The rule (apply from confirmation): a service checks what it can against the model, awaits
a change here, and changes the in-memory model (``core.model``, ``core.state``) only from what
the catalog confirmed (the row it returns; a refusal raises and the model is left as it was).
A deletion may first hide the object from new traffic (it is put back when the catalog
refuses). Reads (``load_*``) answer the catalog as applied, from the local copy, so they stay
synchronous; every change is a coroutine, and every caller awaits it (start-up recovery, the
root user at the first start, id blocks, and consumer positions on the poll path too: with the
SQLite catalog that await commits on the loop's thread and never suspends, so a poll that
auto-commits takes no thread hop).

Changes made elsewhere (``follow``): the core gives the catalog one function at start
(``Core.apply``), and the catalog calls it with each change it confirmed that this node did not
propose, in the order it holds them. ``core.applying`` applies such a change to the model with
the same code that applies the node's own confirmation of that kind, so both leave the same
model. Applied from events so far: a stored consumer position (``PositionStored``), a renamed
stream (``StreamRenamed``), a topic's new name and settings (``TopicUpdated``), a consumer
group created or deleted with its positions (``GroupCreated``, ``GroupDeleted``), a user
created, changed (name, status, permissions, password) or deleted (``UserCreated``,
``UserUpdated``, ``UserDeleted``). Not delivered that way yet: creations and deletions of
streams, topics and partitions (they make or remove local directories and partition logs: the
cluster's step that brings replicas adds them), and personal access tokens. Nobody else changes today's catalogs: SQLite never calls
the function; the twin calls it for what a test changes through
``MemoryCatalog.change_elsewhere`` (another node's change, as this node would see it).

How a catalog applied from etcd watches plugs in (``shared/spec/cluster-design.md``): its
change methods send the change to the controller (an etcd transaction comparing the
revision the node has applied) and return once the node's watch delivered the revision that
holds it, with the row as the watch delivered it; a refused transaction raises
``CatalogConflict``. Its ``load_*`` read a memory twin kept up to date by the watch (the
snapshot at revision R, then every event from R+1). Events of other nodes' changes arriving on
the same watch go to the function given to ``follow``.
"""

from __future__ import annotations

from typing import Callable, Iterable, Protocol

from rill.server.storage.catalog_rows import (
    CatalogChange,
    CatalogConflict,
    ConsumerGroupRow,
    GroupCreated,
    GroupDeleted,
    PartitionRow,
    PartitionsCreated,
    PersonalAccessTokenRow,
    PositionRow,
    PositionStored,
    StreamCreated,
    StreamDeleted,
    StreamRenamed,
    StreamRow,
    TopicCreated,
    TopicDeleted,
    TopicRow,
    TopicUpdated,
    UserCreated,
    UserDeleted,
    UserRow,
    UserUpdated,
)
from rill.server.storage.reserve import SpaceReserve

__all__ = [
    "Catalog", "CatalogChange", "CatalogConflict", "ConsumerGroupRow", "GroupCreated",
    "GroupDeleted", "PartitionRow", "PartitionsCreated",
    "PersonalAccessTokenRow", "PositionRow", "PositionStored", "StreamCreated", "StreamDeleted",
    "StreamRenamed", "StreamRow", "TopicCreated", "TopicDeleted", "TopicRow", "TopicUpdated", "UserCreated", "UserDeleted", "UserRow", "UserUpdated",
]


class Catalog(Protocol):
    """Streams, topics, partitions, users, tokens, groups and positions, durable.

    Ids are chosen by the core (the model knows the free ones) and proposed in the rows; the
    catalog refuses a taken key or name, or a reference to what it does not hold, with
    ``CatalogConflict``. An update or deletion of an id it does not hold changes nothing.
    Deleting a stream takes its topics, partitions, positions and groups with it; deleting a
    topic its partitions, positions and groups; a partition its positions; a user its tokens.
    """

    # the disk space kept so deletions work on a full disk (None: the catalog needs none)
    reserve: SpaceReserve | None

    # -- lifecycle (blocking) ----------------------------------------------------------------

    def close(self) -> None: ...

    def checkpoint(self) -> None:
        """Make every confirmed change durable now (may run in a worker thread)."""

    def follow(self, apply: Callable[[CatalogChange], None]) -> None:
        """From now on, call ``apply`` with every change confirmed that this node did not
        propose (another node's), in the catalog's order, on the event loop's thread."""

    # -- the catalog as applied --------------------------------------------------------------

    def load_streams(self) -> list[StreamRow]: ...

    def load_topics(self) -> list[TopicRow]: ...

    def load_partitions(self) -> list[PartitionRow]: ...

    def load_positions(self) -> Iterable[PositionRow]: ...

    def load_consumer_groups(self) -> list[ConsumerGroupRow]: ...

    def load_personal_access_tokens(self) -> list[PersonalAccessTokenRow]: ...

    def load_users(self) -> list[UserRow]: ...

    def reserved_ids(self, name: str) -> int:
        """How many numbers were reserved under ``name`` so far."""

    # -- changes: each confirms with what it holds now ---------------------------------------

    async def create_stream(self, row: StreamRow) -> StreamRow: ...

    async def update_stream(self, stream_id: int, name: str) -> None: ...

    async def delete_stream(self, stream_id: int) -> None: ...

    async def purge_stream(self, stream_id: int) -> None:
        """Forget every consumer position in the stream."""

    async def create_topic(self, row: TopicRow, partitions: list[PartitionRow]
                           ) -> tuple[TopicRow, list[PartitionRow]]:
        """The topic and its partitions, together or not at all."""

    async def update_topic(self, row: TopicRow) -> TopicRow:
        """New name and settings (its record format and creation time stay)."""

    async def delete_topic(self, stream_id: int, topic_id: int) -> None: ...

    async def purge_topic(self, stream_id: int, topic_id: int) -> None:
        """Forget every consumer position in the topic."""

    async def create_partitions(self, partitions: list[PartitionRow]) -> list[PartitionRow]: ...

    async def delete_partitions(self, stream_id: int, topic_id: int,
                                partition_ids: list[int]) -> None: ...

    async def reserve_ids(self, name: str, count: int) -> int:
        """The first of ``count`` numbers never reserved before under ``name``, durable before
        it is confirmed whatever the fsync policy."""

    async def store_position(self, row: PositionRow) -> PositionRow: ...

    async def create_consumer_group(self, row: ConsumerGroupRow) -> ConsumerGroupRow: ...

    async def delete_consumer_group(self, stream_id: int, topic_id: int, group_id: int,
                                    consumer: str) -> None:
        """The group and the positions stored under its name ``consumer``."""

    async def create_user(self, row: UserRow) -> UserRow: ...

    async def update_user(self, user_id: int, username: str, status: int) -> None: ...

    async def update_permissions(self, user_id: int, permissions: bytes | None) -> None: ...

    async def change_password(self, user_id: int, password_hash: str,
                              scram_credentials: str | None = None) -> None: ...

    async def set_scram_credentials(self, user_id: int, scram_credentials: str) -> None: ...

    async def delete_user(self, user_id: int) -> None: ...

    async def create_personal_access_token(self, row: PersonalAccessTokenRow
                                           ) -> PersonalAccessTokenRow: ...

    async def delete_personal_access_token(self, user_id: int, name: str) -> None: ...

    async def delete_personal_access_tokens(self, hashes: list[str]) -> None: ...

    # -- node-local tables of auth (synchronous: the throttle and the JWT manager call them) --

    def load_trusted_logins(self, now: int) -> list[tuple[str, str, int]]: ...

    def trust_login(self, username: str, address: str, until: int, keep: int,
                    now: int) -> None: ...

    def forget_trusted_logins(self, username: str) -> None: ...

    def load_revoked_access_tokens(self) -> dict[str, int]: ...

    def revoke_access_token(self, token_id: str, expiry_at: int) -> None: ...

    def delete_expired_revocations(self, now_seconds: int) -> None: ...
