"""The catalog of a cluster node: streams, topics and partitions agreed through etcd.

Owns: ``ClusterCatalog``, the ``core.catalog.Catalog`` of a node in a cluster. It wraps the
node's own SQLite catalog (``local``: the materialized view of etcd, and everything this step
keeps per node). A change of a stream, a topic or a partition is handed to the controller
(``ClusterNode.propose``: over the peer link, or directly on the controller), which writes it to
etcd in one fenced transaction; the change returns once this node's watch applied that
revision, after the local copy took it. Changes other nodes made arrive on the watch
(``ClusterNode``) and reach the local copy and the core through ``apply_elsewhere``.
Cluster-wide id blocks (Kafka producer ids) are a compare-and-swap on ``ids/<name>``.

Kept per node in this step (documented in the README): users, tokens, consumer groups and
consumer positions. Purging a stream or topic is refused in a cluster (it would need every
replica truncated).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

from rill import errors
from rill.server.cluster.coordinator import Compare, Put
from rill.server.core.catalog import (
    Catalog,
    CatalogChange,
    PartitionRow,
    PartitionsCreated,
    StreamCreated,
    StreamDeleted,
    StreamRow,
    TopicCreated,
    TopicDeleted,
    TopicRow,
)

if TYPE_CHECKING:
    from rill.server.cluster.node import ClusterNode


class ClusterCatalog:
    def __init__(self, local: Catalog, node: ClusterNode) -> None:
        self.local = local
        self.node = node
        self._apply: Callable[[CatalogChange], None] | None = None

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
        raise errors.FeatureUnavailable(reason="purging a stream is not done in a cluster yet")

    async def purge_topic(self, stream_id: int, topic_id: int) -> None:
        raise errors.FeatureUnavailable(reason="purging a topic is not done in a cluster yet")

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

    # -- changes made elsewhere ----------------------------------------------------------------

    async def apply_elsewhere(self, change: CatalogChange) -> None:
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
        if self._apply is not None:
            self._apply(change)
