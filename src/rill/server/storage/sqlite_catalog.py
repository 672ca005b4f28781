"""The Catalog port (``core.catalog``) over the SQLite metadata store of the data directory.

Owns: opening the store (``SqliteCatalog.open``; a damaged or too-new store raises
``CatalogDamaged``/``CatalogTooNew``, the caller decides what a start does about it) and the
port's confirmations. Every change is one SQLite transaction committed on the calling thread,
as before (the durability per fsync policy and the full-disk reserve are ``storage.metadata``'s,
the tables ``storage.metadata_schema``'s, unchanged); it confirms with the row it wrote, and a constraint SQLite
refuses (a taken key or name, a missing parent) raises ``CatalogConflict`` with nothing
written. The coroutines never suspend: an await of one costs a commit on the loop's thread,
no thread hop (consumer positions on the poll path). Nothing but this node changes the file,
so ``follow`` never delivers a change.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Callable, Iterator

from rill.server.storage.catalog_rows import (
    CatalogChange,
    CatalogConflict,
    ConsumerGroupRow,
    PartitionRow,
    PersonalAccessTokenRow,
    PositionRow,
    StreamRow,
    TopicRow,
    UserRow,
)
from rill.server.storage.metadata import MetadataStore
from rill.server.storage.metadata import MetadataStoreDamaged as CatalogDamaged
from rill.server.storage.metadata import MetadataStoreTooNew as CatalogTooNew
from rill.server.storage.reserve import SpaceReserve

__all__ = ["CatalogDamaged", "CatalogTooNew", "SqliteCatalog"]


def _confirmed(write: Callable[..., Any], *args: Any) -> Any:
    try:
        return write(*args)
    except sqlite3.IntegrityError as error:
        raise CatalogConflict(str(error)) from error


class SqliteCatalog:
    """The catalog in ``metadata.sqlite3`` (one connection on the event loop's thread, one for
    checkpoints)."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self.path = store.path
        self.reserve: SpaceReserve | None = store.reserve

    @classmethod
    def open(cls, path: Path, synchronous_full: bool,
             reserve: SpaceReserve | None = None) -> SqliteCatalog:
        """Open (or make) the store at ``path``: ``synchronous_full`` under ``fsync = always``."""
        return cls(MetadataStore(path, synchronous_full, reserve))

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self._store.close()

    def checkpoint(self) -> None:
        self._store.checkpoint()

    def follow(self, apply: Callable[[CatalogChange], None]) -> None:
        """Nothing else changes this node's file: ``apply`` is never called."""

    # -- the catalog as applied --------------------------------------------------------------

    def load_streams(self) -> list[StreamRow]:
        return self._store.load_streams()

    def load_topics(self) -> list[TopicRow]:
        return self._store.load_topics()

    def load_partitions(self) -> list[PartitionRow]:
        return self._store.load_partitions()

    def load_positions(self) -> Iterator[PositionRow]:
        return self._store.load_positions()

    def load_consumer_groups(self) -> list[ConsumerGroupRow]:
        return self._store.load_consumer_groups()

    def load_personal_access_tokens(self) -> list[PersonalAccessTokenRow]:
        return self._store.load_personal_access_tokens()

    def load_users(self) -> list[UserRow]:
        return self._store.load_users()

    def reserved_ids(self, name: str) -> int:
        return self._store.reserved_ids(name)

    # -- streams and topics ------------------------------------------------------------------

    async def create_stream(self, row: StreamRow) -> StreamRow:
        _confirmed(self._store.create_stream, row)
        return row

    async def update_stream(self, stream_id: int, name: str) -> None:
        _confirmed(self._store.update_stream, stream_id, name)

    async def delete_stream(self, stream_id: int) -> None:
        self._store.delete_stream(stream_id)

    async def purge_stream(self, stream_id: int) -> None:
        self._store.purge_stream(stream_id)

    async def create_topic(self, row: TopicRow, partitions: list[PartitionRow]
                           ) -> tuple[TopicRow, list[PartitionRow]]:
        _confirmed(self._store.create_topic, row, partitions)
        return row, partitions

    async def update_topic(self, row: TopicRow) -> TopicRow:
        _confirmed(self._store.update_topic, row)
        return row

    async def delete_topic(self, stream_id: int, topic_id: int) -> None:
        self._store.delete_topic(stream_id, topic_id)

    async def purge_topic(self, stream_id: int, topic_id: int) -> None:
        self._store.purge_topic(stream_id, topic_id)

    async def create_partitions(self, partitions: list[PartitionRow]) -> list[PartitionRow]:
        _confirmed(self._store.create_partitions, partitions)
        return partitions

    async def delete_partitions(self, stream_id: int, topic_id: int,
                                partition_ids: list[int]) -> None:
        self._store.delete_partitions(stream_id, topic_id, partition_ids)

    # -- ids, positions, groups --------------------------------------------------------------

    async def reserve_ids(self, name: str, count: int) -> int:
        return self._store.reserve_ids(name, count)

    async def store_position(self, row: PositionRow) -> PositionRow:
        try:
            self._store.store_position(row)
        except sqlite3.IntegrityError as error:
            raise CatalogConflict(str(error)) from error
        return row

    async def create_consumer_group(self, row: ConsumerGroupRow) -> ConsumerGroupRow:
        _confirmed(self._store.create_consumer_group, row)
        return row

    async def delete_consumer_group(self, stream_id: int, topic_id: int, group_id: int,
                                    consumer: str) -> None:
        self._store.delete_consumer_group(stream_id, topic_id, group_id, consumer)

    # -- users and tokens --------------------------------------------------------------------

    async def create_user(self, row: UserRow) -> UserRow:
        _confirmed(self._store.create_user, row)
        return row

    async def update_user(self, user_id: int, username: str, status: int) -> None:
        _confirmed(self._store.update_user, user_id, username, status)

    async def update_permissions(self, user_id: int, permissions: bytes | None) -> None:
        self._store.update_permissions(user_id, permissions)

    async def change_password(self, user_id: int, password_hash: str,
                              scram_credentials: str | None = None) -> None:
        self._store.change_password(user_id, password_hash, scram_credentials)

    async def set_scram_credentials(self, user_id: int, scram_credentials: str) -> None:
        self._store.set_scram_credentials(user_id, scram_credentials)

    async def delete_user(self, user_id: int) -> None:
        self._store.delete_user(user_id)

    async def create_personal_access_token(self, row: PersonalAccessTokenRow
                                           ) -> PersonalAccessTokenRow:
        _confirmed(self._store.create_personal_access_token, row)
        return row

    async def delete_personal_access_token(self, user_id: int, name: str) -> None:
        self._store.delete_personal_access_token(user_id, name)

    async def delete_personal_access_tokens(self, hashes: list[str]) -> None:
        self._store.delete_personal_access_tokens(hashes)

    # -- node-local tables of auth -----------------------------------------------------------

    def load_trusted_logins(self, now: int) -> list[tuple[str, str, int]]:
        return self._store.load_trusted_logins(now)

    def trust_login(self, username: str, address: str, until: int, keep: int, now: int) -> None:
        self._store.trust_login(username, address, until, keep, now)

    def forget_trusted_logins(self, username: str) -> None:
        self._store.forget_trusted_logins(username)

    def load_revoked_access_tokens(self) -> dict[str, int]:
        return self._store.load_revoked_access_tokens()

    def revoke_access_token(self, token_id: str, expiry_at: int) -> None:
        self._store.revoke_access_token(token_id, expiry_at)

    def delete_expired_revocations(self, now_seconds: int) -> None:
        self._store.delete_expired_revocations(now_seconds)
