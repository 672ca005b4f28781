"""The catalog of a cluster node: streams, topics and partitions agreed through etcd.

Owns: ``ClusterCatalog``, the ``core.catalog.Catalog`` of a node in a cluster. It wraps the
node's own SQLite catalog (``local``: the materialized view of etcd, and everything this step
keeps per node). A change of a stream, a topic or a partition is handed to the controller
(``ClusterNode.propose``: over the peer link, or directly on the controller), which writes it to
etcd in one fenced transaction; the change returns once this node's watch applied that
revision, after the local copy took it. Changes other nodes made arrive on the watch
(``ClusterNode``) and reach the local copy and the core through ``apply_elsewhere``.
Cluster-wide id blocks (Kafka producer ids) are a compare-and-swap on ``ids/<name>``.

Users go through the controller too (``users/<id>``: the whole row, so every node logs them in
alike), and so do personal access tokens (``tokens/<user>/<name>``: the hash and the expiry,
never the raw token) and Iggy consumer groups (``groups/...``: id and name; a deleted group's
stored positions go with it in etcd). Consumer positions are stored in etcd (``offsets/...``,
coalesced: ``PositionWrites``) and applied on every node. A group's members are not catalog
rows: each node puts its own clients' memberships under its member lease
(``cluster.group_members``). A purge of a stream or topic gives each of its partitions a new
incarnation in etcd and drops its stored positions there; every replica, this node's too,
empties its log when its watch applies that (``ClusterNode``), not here; it returns once every
partition's leader has (``ClusterNode.leaders_caught_up``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rill import errors
from rill.server.cluster.coordinator import Compare, CoordinatorError, Put
from rill.server.core.catalog import (
    Catalog,
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
    StreamRow,
    TopicCreated,
    TopicDeleted,
    TopicRow,
    UserCreated,
    UserDeleted,
    UserRow,
    UserUpdated,
)
from rill.server.core.tokens import TokenDeleted, TokenStored

if TYPE_CHECKING:
    from rill.server.cluster.node import ClusterNode

log = logging.getLogger(__name__)


class ClusterCatalog:
    def __init__(self, local: Catalog, node: ClusterNode) -> None:
        self.local = local
        self.node = node
        self._apply: Callable[[CatalogChange], None] | None = None
        self.positions = PositionWrites(node)

    def __getattr__(self, name: str) -> Any:  # everything kept per node
        return getattr(self.local, name)

    def follow(self, apply: Callable[[CatalogChange], None]) -> None:
        self._apply = apply
        self.local.follow(apply)

    # -- changes made here ---------------------------------------------------------------------

    async def create_stream(self, row: StreamRow) -> StreamRow:
        await self.node.propose("create_stream", {"row": dataclasses.asdict(row)})
        return await self.local.create_stream(row)

    async def delete_stream(self, stream_id: int) -> None:
        await self.node.propose("delete_stream", {"stream_id": stream_id})
        await self.local.delete_stream(stream_id)

    async def purge_stream(self, stream_id: int) -> None:
        await self.node.propose("purge_stream", {"stream_id": stream_id})
        await self.node.leaders_caught_up(stream_id, None)

    async def purge_topic(self, stream_id: int, topic_id: int) -> None:
        await self.node.propose("purge_topic", {"stream_id": stream_id, "topic_id": topic_id})
        await self.node.leaders_caught_up(stream_id, topic_id)

    async def create_topic(self, row: TopicRow, partitions: list[PartitionRow]
                           ) -> tuple[TopicRow, list[PartitionRow]]:
        await self.node.propose("create_topic", {
            "row": dataclasses.asdict(row),
            "partitions": [dataclasses.asdict(p) for p in partitions]})
        confirmed = await self.local.create_topic(row, partitions)
        self.node.place_later(row.stream_id, row.id)
        return confirmed

    async def delete_topic(self, stream_id: int, topic_id: int) -> None:
        await self.node.propose("delete_topic", {"stream_id": stream_id, "topic_id": topic_id})
        await self.local.delete_topic(stream_id, topic_id)

    async def create_partitions(self, partitions: list[PartitionRow]) -> list[PartitionRow]:
        if partitions:
            first = partitions[0]
            await self.node.propose("create_partitions", {
                "stream_id": first.stream_id, "topic_id": first.topic_id,
                "partitions": [dataclasses.asdict(p) for p in partitions]})
        confirmed = await self.local.create_partitions(partitions)
        if partitions:
            self.node.place_later(partitions[0].stream_id, partitions[0].topic_id)
        return confirmed

    async def reserve_ids(self, name: str, count: int) -> int:
        """The first of ``count`` numbers (from 0) never reserved before under ``name`` on any
        node: a compare-and-swap on ``ids/<name>`` in etcd (a linearizable write: no node hands
        them out again, whatever crashes)."""
        if count < 1:
            raise ValueError(f"cannot reserve {count} ids")
        coordinator, key = self.node.coordinator, self.node.keys.id_block(name)
        while True:
            current = await coordinator.get(key)
            first = int(current.value) if current is not None else 0
            compare = (Compare.mod_revision(key, "==", current.mod_revision) if current
                       else Compare.missing(key))
            result = await coordinator.txn([compare], [Put(key, str(first + count).encode())])
            if result.succeeded:
                self.node.id_blocks[name] = max(self.node.id_blocks.get(name, 0), first + count)
                return first

    def reserved_ids(self, name: str) -> int:
        """How many numbers were reserved under ``name`` in the cluster, as this node's watch
        last saw it."""
        return self.node.id_blocks.get(name, 0)

    # -- users (the same on every node) ---------------------------------------------------------

    async def create_user(self, row: UserRow) -> UserRow:
        await self.node.propose("put_user", {"row": user_json(row), "create": True})
        return await self.local.create_user(row)

    def _user(self, user_id: int) -> UserRow:
        for row in self.local.load_users():
            if row.id == user_id:
                return row
        raise CatalogConflict(f"no user {user_id}")

    async def _put_user(self, row: UserRow, old_username: str) -> None:
        await self.node.propose("put_user", {"row": user_json(row),
                                             "old_username": old_username})

    async def update_user(self, user_id: int, username: str, status: int) -> None:
        old = self._user(user_id)
        await self._put_user(dataclasses.replace(old, username=username, status=status),
                             old.username)
        await self.local.update_user(user_id, username, status)

    async def update_permissions(self, user_id: int, permissions: bytes | None) -> None:
        old = self._user(user_id)
        await self._put_user(dataclasses.replace(old, permissions=permissions), old.username)
        await self.local.update_permissions(user_id, permissions)

    async def change_password(self, user_id: int, password_hash: str,
                              scram_credentials: str | None = None) -> None:
        old = self._user(user_id)
        await self._put_user(dataclasses.replace(old, password_hash=password_hash,
                                                 scram_credentials=scram_credentials),
                             old.username)
        await self.local.change_password(user_id, password_hash, scram_credentials)

    async def set_scram_credentials(self, user_id: int, scram_credentials: str) -> None:
        old = self._user(user_id)
        await self._put_user(dataclasses.replace(old, scram_credentials=scram_credentials),
                             old.username)
        await self.local.set_scram_credentials(user_id, scram_credentials)

    async def delete_user(self, user_id: int) -> None:
        old = self._user(user_id)
        key = self.node.keys.user(user_id)
        self.node.own_deletions.add(key)  # its watch event is this node's own change
        try:
            await self.node.propose("delete_user", {"id": user_id, "username": old.username})
        finally:
            asyncio.get_running_loop().call_later(30, self.node.own_deletions.discard, key)
        await self.local.delete_user(user_id)

    # -- consumer groups and personal access tokens (the same on every node) --------------------

    async def _propose_deletion(self, keys: list[bytes], op: str, args: dict[str, Any]) -> None:
        """A change that deletes ``keys``: their watch events are this node's own change."""
        self.node.own_deletions.update(keys)
        try:
            await self.node.propose(op, args)
        finally:
            loop = asyncio.get_running_loop()
            for key in keys:
                loop.call_later(30, self.node.own_deletions.discard, key)

    async def create_consumer_group(self, row: ConsumerGroupRow) -> ConsumerGroupRow:
        await self.node.propose("create_group", {"row": dataclasses.asdict(row)})
        return await self.local.create_consumer_group(row)

    async def delete_consumer_group(self, stream_id: int, topic_id: int, group_id: int,
                                    consumer: str) -> None:
        await self._propose_deletion(
            [self.node.keys.group(stream_id, topic_id, group_id)], "delete_group",
            {"stream_id": stream_id, "topic_id": topic_id, "group_id": group_id,
             "consumer": consumer})
        await self.local.delete_consumer_group(stream_id, topic_id, group_id, consumer)

    async def create_personal_access_token(self, row: PersonalAccessTokenRow
                                           ) -> PersonalAccessTokenRow:
        await self.node.propose("create_token", {"row": dataclasses.asdict(row)})
        return await self.local.create_personal_access_token(row)

    async def delete_personal_access_token(self, user_id: int, name: str) -> None:
        await self._propose_deletion([self.node.keys.token(user_id, name)], "delete_tokens",
                                     {"tokens": [[user_id, name]]})
        await self.local.delete_personal_access_token(user_id, name)

    async def delete_personal_access_tokens(self, hashes: list[str]) -> None:
        wanted = set(hashes)
        tokens = [[row.user_id, row.name] for row in self.local.load_personal_access_tokens()
                  if row.token_hash in wanted]
        if tokens:
            await self._propose_deletion([self.node.keys.token(*token) for token in tokens],
                                         "delete_tokens", {"tokens": tokens})
        await self.local.delete_personal_access_tokens(hashes)

    async def store_position(self, row: PositionRow) -> PositionRow:
        """Stored in etcd (``offsets/...``), then in the local copy. Coalesced: positions
        stored while a write to etcd is under way go together in the next one, a consumer's
        latest position only (at most one write per slot per round); the caller waits for the
        round that holds its position. Refused with ``ClusterUnavailable`` while etcd cannot
        take writes (nothing stored)."""
        await self.positions.store(row)
        return await self.local.store_position(row)

    # -- changes made elsewhere ----------------------------------------------------------------

    async def _update_local_user(self, row: UserRow) -> None:
        local = self.local
        await local.update_user(row.id, row.username, row.status)
        await local.update_permissions(row.id, row.permissions)
        await local.change_password(row.id, row.password_hash, row.scram_credentials)

    async def apply_elsewhere(self, change: CatalogChange | TokenStored | TokenDeleted) -> None:
        """A change another node made (or one this node made before a restart): the local copy
        takes it, then the core."""
        local = self.local
        if isinstance(change, StreamCreated):
            if any(row.id == change.row.id for row in local.load_streams()):
                return
            await local.create_stream(change.row)
        elif isinstance(change, TopicCreated):
            row = change.row
            if any(t.stream_id == row.stream_id and t.id == row.id for t in local.load_topics()):
                return
            await local.create_topic(row, list(change.partitions))
        elif isinstance(change, PartitionsCreated):
            await local.create_partitions(list(change.partitions))
        elif isinstance(change, TopicDeleted):
            await local.delete_topic(change.stream_id, change.topic_id)
        elif isinstance(change, StreamDeleted):
            await local.delete_stream(change.stream_id)
        elif isinstance(change, UserCreated):
            row = change.row
            if any(user.id == row.id for user in local.load_users()):
                await self._update_local_user(row)
                change = UserUpdated(row)
            else:
                await local.create_user(row)
        elif isinstance(change, UserDeleted):
            if not any(user.id == change.id for user in local.load_users()):
                return
            await local.delete_user(change.id)
        elif isinstance(change, PositionStored):
            try:
                await local.store_position(change.row)
            except CatalogConflict:  # its partition is gone here
                return
        elif isinstance(change, GroupCreated):
            row = change.row
            held = next((g for g in local.load_consumer_groups()
                         if (g.stream_id, g.topic_id, g.id) == (row.stream_id, row.topic_id,
                                                                 row.id)), None)
            if held == row:
                return
            if held is not None:  # deleted and made again while this node was away
                gone = GroupDeleted(row.stream_id, row.topic_id, row.id,
                                    self.node.core.consumer_groups.membership.position_name(
                                        row.id))
                await local.delete_consumer_group(gone.stream_id, gone.topic_id, gone.id,
                                                  gone.consumer)
                if self._apply is not None:
                    self._apply(gone)
            try:
                await local.create_consumer_group(row)
            except CatalogConflict as conflict:  # its topic is gone here, or a name clash
                log.warning("consumer group %s of topic %d/%d not applied here: %s", row.name,
                            row.stream_id, row.topic_id, conflict)
                return
        elif isinstance(change, GroupDeleted):
            if not any((g.stream_id, g.topic_id, g.id) ==
                       (change.stream_id, change.topic_id, change.id)
                       for g in local.load_consumer_groups()):
                return
            await local.delete_consumer_group(change.stream_id, change.topic_id, change.id,
                                              change.consumer)
        elif isinstance(change, TokenStored):
            row = change.row
            held = next((t for t in local.load_personal_access_tokens()
                         if (t.user_id, t.name) == (row.user_id, row.name)), None)
            if held == row:
                return
            if held is not None:
                await local.delete_personal_access_token(row.user_id, row.name)
                if self._apply is not None:
                    self._apply(TokenDeleted(row.user_id, row.name))  # type: ignore[arg-type]
            try:
                await local.create_personal_access_token(row)
            except CatalogConflict:  # its user is gone here
                return
        elif isinstance(change, TokenDeleted):
            if not any((t.user_id, t.name) == (change.user_id, change.name)
                       for t in local.load_personal_access_tokens()):
                return
            await local.delete_personal_access_token(change.user_id, change.name)
        if self._apply is not None:
            self._apply(change)  # type: ignore[arg-type]


def user_json(row: UserRow) -> dict[str, Any]:
    value = dataclasses.asdict(row)
    value["permissions"] = row.permissions.hex() if row.permissions is not None else None
    return value


def user_row(value: dict[str, Any]) -> UserRow:
    permissions = value.get("permissions")
    return UserRow(value["id"], value["username"], value["password_hash"], value["status"],
                   bytes.fromhex(permissions) if permissions is not None else None,
                   value["created_at"], value.get("scram_credentials"))


POSITIONS_PER_TXN = 100  # etcd's --max-txn-ops is 128


class PositionWrites:
    """Consumer positions on their way to etcd, coalesced (see ``store_position``)."""

    def __init__(self, node: ClusterNode) -> None:
        self.node = node
        self._pending: dict[bytes, tuple[PositionRow, list[asyncio.Future[None]]]] = {}
        self._writing: asyncio.Task[None] | None = None
        self.writes = 0  # etcd transactions made (each holds many positions)

    async def store(self, row: PositionRow) -> None:
        key = self.node.keys.offset(row.stream_id, row.topic_id, row.partition_id, row.consumer)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = self._pending.get(key)
        self._pending[key] = (row, (waiting[1] if waiting else []) + [done])
        if self._writing is None or self._writing.done():
            self._writing = asyncio.ensure_future(self._write())
        await done

    async def _write(self) -> None:
        while self._pending:
            taken = dict(list(self._pending.items())[:POSITIONS_PER_TXN])
            for key in taken:
                del self._pending[key]
            origin = self.node.node_id
            puts = [Put(key, json.dumps({**dataclasses.asdict(row), "origin": origin}).encode())
                    for key, (row, _) in taken.items()]
            try:
                await self.node.coordinator.txn((), puts)
                failure: BaseException | None = None
            except CoordinatorError as error:
                failure = errors.ClusterUnavailable(reason=(
                    f"etcd cannot store consumer positions now: {error}"))
            self.writes += 1
            for _, waiters in taken.values():
                for waiter in waiters:
                    if not waiter.done():
                        if failure is None:
                            waiter.set_result(None)
                        else:
                            waiter.set_exception(failure)
