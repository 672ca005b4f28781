"""The memory twin of the Catalog port (``core.catalog``): the same rows, keys, refusals and
cascades as the SQLite catalog (``storage.sqlite_catalog``), held in dicts.

Owns: nothing durable. A server whose twin is dropped forgets its catalog; a test that passes
the same twin to a second Core sees a restart whose catalog survived (as a catalog kept by a
controller outlives a node). It lives beside the port, not in storage, because it has no file:
it is what the core's tests run on, and the applied copy a watch-driven catalog would keep.

Changes made elsewhere: ``change_elsewhere`` makes a change as another node would (through
the same methods, so with the same refusals) and delivers what it holds then to the function
given to ``follow``, as a watch delivers another node's change (``core.catalog``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterator

from rill.server.storage.catalog_rows import (
    CatalogChange,
    CatalogConflict,
    ConsumerGroupRow,
    GroupCreated,
    GroupDeleted,
    PartitionRow,
    PersonalAccessTokenRow,
    PositionRow,
    PositionStored,
    StreamRenamed,
    StreamRow,
    TopicRow,
    TopicUpdated,
    UserCreated,
    UserDeleted,
    UserRow,
    UserUpdated,
)
from rill.server.storage.reserve import SpaceReserve


class MemoryCatalog:
    def __init__(self) -> None:
        self.reserve: SpaceReserve | None = None  # no disk to keep room on
        self.closed = False
        self._streams: dict[int, StreamRow] = {}
        # the unique names, indexed (a lookup per change, however large the catalog)
        self._stream_names: dict[str, int] = {}
        self._topic_names: dict[tuple[int, str], int] = {}
        self._user_names: dict[str, int] = {}
        self._topics: dict[tuple[int, int], TopicRow] = {}
        self._partitions: dict[tuple[int, int, int], PartitionRow] = {}
        self._positions: dict[tuple[int, int, int, str], PositionRow] = {}
        self._groups: dict[tuple[int, int, int], ConsumerGroupRow] = {}
        self._users: dict[int, UserRow] = {}
        self._tokens: dict[tuple[int, str], PersonalAccessTokenRow] = {}
        self._reserved: dict[str, int] = {}
        self._trusted: dict[tuple[str, str], int] = {}
        self._revoked: dict[str, int] = {}
        self._followers: list[Callable[[CatalogChange], None]] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self.closed = True

    def checkpoint(self) -> None:
        """Nothing to sync."""

    def follow(self, apply: Callable[[CatalogChange], None]) -> None:
        self._followers.append(apply)

    async def change_elsewhere(self, change: CatalogChange) -> CatalogChange:
        """Make ``change`` as another node would, then deliver it, as this catalog holds it
        now, to every follower; the change as delivered."""
        if isinstance(change, PositionStored):
            confirmed: CatalogChange = PositionStored(await self.store_position(change.row))
        elif isinstance(change, StreamRenamed):
            if change.stream_id not in self._streams:
                raise CatalogConflict(f"no stream {change.stream_id}")
            await self.update_stream(change.stream_id, change.name)
            confirmed = StreamRenamed(change.stream_id, self._streams[change.stream_id].name)
        elif isinstance(change, UserCreated):
            confirmed = UserCreated(await self.create_user(change.row))
        elif isinstance(change, UserUpdated):
            row = change.row
            if row.id not in self._users:
                raise CatalogConflict(f"no user {row.id}")
            await self.update_user(row.id, row.username, row.status)
            await self.update_permissions(row.id, row.permissions)
            await self.change_password(row.id, row.password_hash, row.scram_credentials)
            confirmed = UserUpdated(self._users[row.id])
        elif isinstance(change, UserDeleted):
            if change.id not in self._users:
                raise CatalogConflict(f"no user {change.id}")
            await self.delete_user(change.id)
            confirmed = change
        elif isinstance(change, GroupCreated):
            confirmed = GroupCreated(await self.create_consumer_group(change.row))
        elif isinstance(change, GroupDeleted):
            if (change.stream_id, change.topic_id, change.id) not in self._groups:
                raise CatalogConflict(f"no group {change.id} of topic {change.topic_id}")
            await self.delete_consumer_group(change.stream_id, change.topic_id, change.id,
                                             change.consumer)
            confirmed = change
        else:
            row = change.row
            if (row.stream_id, row.id) not in self._topics:
                raise CatalogConflict(f"no topic {row.id} of stream {row.stream_id}")
            await self.update_topic(row)
            confirmed = TopicUpdated(self._topics[row.stream_id, row.id])
        for apply in self._followers:
            apply(confirmed)
        return confirmed

    # -- the catalog as applied --------------------------------------------------------------

    def load_streams(self) -> list[StreamRow]:
        return [self._streams[key] for key in sorted(self._streams)]

    def load_topics(self) -> list[TopicRow]:
        return [self._topics[key] for key in sorted(self._topics)]

    def load_partitions(self) -> list[PartitionRow]:
        return [self._partitions[key] for key in sorted(self._partitions)]

    def load_positions(self) -> Iterator[PositionRow]:
        return iter(list(self._positions.values()))

    def load_consumer_groups(self) -> list[ConsumerGroupRow]:
        return [self._groups[key] for key in sorted(self._groups)]

    def load_personal_access_tokens(self) -> list[PersonalAccessTokenRow]:
        return [self._tokens[key] for key in sorted(self._tokens)]

    def load_users(self) -> list[UserRow]:
        return [self._users[key] for key in sorted(self._users)]

    def reserved_ids(self, name: str) -> int:
        return self._reserved.get(name, 0)

    # -- streams and topics ------------------------------------------------------------------

    async def create_stream(self, row: StreamRow) -> StreamRow:
        if row.id in self._streams or self._stream_named(row.name) is not None:
            raise CatalogConflict(f"stream {row.id} or its name {row.name!r} is taken")
        self._streams[row.id] = row
        self._stream_names[row.name] = row.id
        return row

    async def update_stream(self, stream_id: int, name: str) -> None:
        row = self._streams.get(stream_id)
        if row is None:
            return
        if self._stream_named(name) not in (None, stream_id):
            raise CatalogConflict(f"stream name {name!r} is taken")
        self._streams[stream_id] = replace(row, name=name)
        del self._stream_names[row.name]
        self._stream_names[name] = stream_id

    async def delete_stream(self, stream_id: int) -> None:
        row = self._streams.pop(stream_id, None)
        if row is None:
            return
        del self._stream_names[row.name]
        for stream, topic in [key for key in self._topics if key[0] == stream_id]:
            await self.delete_topic(stream, topic)

    async def purge_stream(self, stream_id: int) -> None:
        self._forget_positions(lambda key: key[0] == stream_id)

    async def create_topic(self, row: TopicRow, partitions: list[PartitionRow]
                           ) -> tuple[TopicRow, list[PartitionRow]]:
        key = (row.stream_id, row.id)
        if row.stream_id not in self._streams:
            raise CatalogConflict(f"no stream {row.stream_id} for topic {row.id}")
        if key in self._topics or self._topic_named(row.stream_id, row.name) is not None:
            raise CatalogConflict(f"topic {row.id} of stream {row.stream_id} or its name "
                                  f"{row.name!r} is taken")
        self._topics[key] = row
        try:
            self._check_partitions(partitions)
        except CatalogConflict:
            del self._topics[key]
            raise
        self._topic_names[row.stream_id, row.name] = row.id
        self._add_partitions(partitions)
        return row, partitions

    async def update_topic(self, row: TopicRow) -> TopicRow:
        key = (row.stream_id, row.id)
        held = self._topics.get(key)
        if held is None:
            return row
        if self._topic_named(row.stream_id, row.name) not in (None, row.id):
            raise CatalogConflict(f"topic name {row.name!r} is taken in stream {row.stream_id}")
        del self._topic_names[row.stream_id, held.name]
        self._topic_names[row.stream_id, row.name] = row.id
        self._topics[key] = replace(
            held, name=row.name, compression_algorithm=row.compression_algorithm,
            message_expiry=row.message_expiry, max_topic_size=row.max_topic_size,
            replication_factor=row.replication_factor)
        return row

    async def delete_topic(self, stream_id: int, topic_id: int) -> None:
        row = self._topics.pop((stream_id, topic_id), None)
        if row is None:
            return
        del self._topic_names[stream_id, row.name]
        await self.delete_partitions(stream_id, topic_id, [
            key[2] for key in self._partitions if key[:2] == (stream_id, topic_id)])
        for key in [key for key in self._groups if key[:2] == (stream_id, topic_id)]:
            del self._groups[key]

    async def purge_topic(self, stream_id: int, topic_id: int) -> None:
        self._forget_positions(lambda key: key[:2] == (stream_id, topic_id))

    async def create_partitions(self, partitions: list[PartitionRow]) -> list[PartitionRow]:
        self._check_partitions(partitions)
        self._add_partitions(partitions)
        return partitions

    async def delete_partitions(self, stream_id: int, topic_id: int,
                                partition_ids: list[int]) -> None:
        doomed = set(partition_ids)
        for partition_id in doomed:
            self._partitions.pop((stream_id, topic_id, partition_id), None)
        self._forget_positions(lambda key: key[:2] == (stream_id, topic_id) and key[2] in doomed)

    def _check_partitions(self, partitions: list[PartitionRow]) -> None:
        keys = [(p.stream_id, p.topic_id, p.id) for p in partitions]
        if len(set(keys)) != len(keys) or any(key in self._partitions for key in keys):
            raise CatalogConflict("a partition is there already")
        if any(key[:2] not in self._topics for key in keys):
            raise CatalogConflict("a partition of a topic the catalog does not hold")

    def _add_partitions(self, partitions: list[PartitionRow]) -> None:
        for row in partitions:
            self._partitions[row.stream_id, row.topic_id, row.id] = row

    # -- ids, positions, groups --------------------------------------------------------------

    async def reserve_ids(self, name: str, count: int) -> int:
        if count < 1:
            raise ValueError(f"cannot reserve {count} ids")
        first = self._reserved.get(name, 0)
        self._reserved[name] = first + count
        return first

    async def store_position(self, row: PositionRow) -> PositionRow:
        if (row.stream_id, row.topic_id, row.partition_id) not in self._partitions:
            raise CatalogConflict(f"no partition {row.partition_id} of topic {row.topic_id} "
                                  f"of stream {row.stream_id}")
        self._positions[row.stream_id, row.topic_id, row.partition_id, row.consumer] = row
        return row

    async def create_consumer_group(self, row: ConsumerGroupRow) -> ConsumerGroupRow:
        if (row.stream_id, row.topic_id) not in self._topics:
            raise CatalogConflict(f"no topic {row.topic_id} of stream {row.stream_id}")
        if (row.stream_id, row.topic_id, row.id) in self._groups or any(
                key[:2] == (row.stream_id, row.topic_id) and group.name == row.name
                for key, group in self._groups.items()):
            raise CatalogConflict(f"group {row.id} or its name {row.name!r} is taken")
        self._groups[row.stream_id, row.topic_id, row.id] = row
        return row

    async def delete_consumer_group(self, stream_id: int, topic_id: int, group_id: int,
                                    consumer: str) -> None:
        self._groups.pop((stream_id, topic_id, group_id), None)
        self._forget_positions(
            lambda key: key[:2] == (stream_id, topic_id) and key[3] == consumer)

    def _forget_positions(self, doomed) -> None:  # type: ignore[no-untyped-def]
        for key in [key for key in self._positions if doomed(key)]:
            del self._positions[key]

    # -- users and tokens --------------------------------------------------------------------

    async def create_user(self, row: UserRow) -> UserRow:
        if row.id in self._users or self._user_named(row.username) is not None:
            raise CatalogConflict(f"user {row.id} or its name {row.username!r} is taken")
        self._users[row.id] = row
        self._user_names[row.username] = row.id
        return row

    async def update_user(self, user_id: int, username: str, status: int) -> None:
        row = self._users.get(user_id)
        if row is None:
            return
        if self._user_named(username) not in (None, user_id):
            raise CatalogConflict(f"username {username!r} is taken")
        self._users[user_id] = replace(row, username=username, status=status)
        del self._user_names[row.username]
        self._user_names[username] = user_id

    async def update_permissions(self, user_id: int, permissions: bytes | None) -> None:
        self._change_user(user_id, permissions=permissions)

    async def change_password(self, user_id: int, password_hash: str,
                              scram_credentials: str | None = None) -> None:
        self._change_user(user_id, password_hash=password_hash,
                          scram_credentials=scram_credentials)

    async def set_scram_credentials(self, user_id: int, scram_credentials: str) -> None:
        self._change_user(user_id, scram_credentials=scram_credentials)

    def _change_user(self, user_id: int, **changes: object) -> None:
        row = self._users.get(user_id)
        if row is not None:
            self._users[user_id] = replace(row, **changes)  # type: ignore[arg-type]

    async def delete_user(self, user_id: int) -> None:
        row = self._users.pop(user_id, None)
        if row is None:
            return
        del self._user_names[row.username]
        for key in [key for key in self._tokens if key[0] == user_id]:
            del self._tokens[key]

    async def create_personal_access_token(self, row: PersonalAccessTokenRow
                                           ) -> PersonalAccessTokenRow:
        if row.user_id not in self._users:
            raise CatalogConflict(f"no user {row.user_id}")
        if (row.user_id, row.name) in self._tokens or any(
                token.token_hash == row.token_hash for token in self._tokens.values()):
            raise CatalogConflict(f"token {row.name!r} of user {row.user_id} is there already")
        self._tokens[row.user_id, row.name] = row
        return row

    async def delete_personal_access_token(self, user_id: int, name: str) -> None:
        self._tokens.pop((user_id, name), None)

    async def delete_personal_access_tokens(self, hashes: list[str]) -> None:
        doomed = set(hashes)
        for key in [key for key, token in self._tokens.items() if token.token_hash in doomed]:
            del self._tokens[key]

    # -- node-local tables of auth -----------------------------------------------------------

    def load_trusted_logins(self, now: int) -> list[tuple[str, str, int]]:
        return sorted(((username, address, until)
                       for (username, address), until in self._trusted.items() if until > now),
                      key=lambda trust: trust[2])

    def trust_login(self, username: str, address: str, until: int, keep: int, now: int) -> None:
        self._trusted[username, address] = until
        mine = sorted((pair for pair in self._trusted if pair[0] == username),
                      key=self._trusted.__getitem__, reverse=True)
        for pair in mine[keep:]:
            del self._trusted[pair]
        for pair in [pair for pair, held in self._trusted.items() if held <= now]:
            del self._trusted[pair]

    def forget_trusted_logins(self, username: str) -> None:
        for pair in [pair for pair in self._trusted if pair[0] == username]:
            del self._trusted[pair]

    def load_revoked_access_tokens(self) -> dict[str, int]:
        return dict(self._revoked)

    def revoke_access_token(self, token_id: str, expiry_at: int) -> None:
        self._revoked[token_id] = expiry_at

    def delete_expired_revocations(self, now_seconds: int) -> None:
        for token_id in [t for t, expiry in self._revoked.items() if expiry <= now_seconds]:
            del self._revoked[token_id]

    # -- names -------------------------------------------------------------------------------

    def _stream_named(self, name: str) -> int | None:
        return self._stream_names.get(name)

    def _topic_named(self, stream_id: int, name: str) -> int | None:
        return self._topic_names.get((stream_id, name))

    def _user_named(self, username: str) -> int | None:
        return self._user_names.get(username)
