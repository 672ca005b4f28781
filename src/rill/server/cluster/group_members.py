"""Iggy consumer groups' members across the cluster (issue 30 item 7).

Owns: ``ClusterGroupRoster``, the ``core.consumer_groups.GroupRoster`` of a cluster node. The
design: a group's members live on the nodes their clients are connected to, so each node puts
its own clients' memberships in etcd, ``group-members/<stream>/<topic>/<group>/<node>/<client>``
under **its member lease**: a member leaves everywhere when its client leaves or disconnects
(the key is deleted) and when its node dies (etcd ends the lease within its TTL). Every node
applies these keys from its watch, like the rest of the catalog, and deals the partitions with
the same pure function (``core.consumer_groups.deal``) over the same member list, in join
order = the keys' create_revision (a member that joins again keeps its place, as on one
node). No node coordinates: there is nothing to hand over when one dies, and the controller
is not on the path of a JOIN.

* A JOIN answers once this node's watch applied the member's key (its own deal includes it);
  a LEAVE once it applied the deletion. A disconnect deletes the key in the background.
* A member key is put only while the group's key exists (a compare), so a group deleted
  meanwhile refuses the JOIN (5000); deleting a group deletes its members' keys.
* A node that lost its member lease (paused past its TTL) puts its clients' memberships again
  under its new lease when it joins again (at the end of the join order).
* **Claims** make a partition's reader exclusive across nodes: the deal moves a partition from
  one member to another as each node applies a membership change, milliseconds apart, so a
  member reads a partition only while its node holds the partition's claim
  (``group-claims/<stream>/<topic>/<group>/<partition>``, put under the node's member lease
  when the partition is dealt to one of its members and the claim is free; deleted by its
  holder once its deal moved the partition away; gone with the holder's lease when its node
  dies). Until the old holder let go, the new member's polls skip the partition (a poll with
  no claimed partition reads nothing). Safety rests on the compares (a claim is put only when
  missing); a node paused past its lease may read a partition for as long as it stays paused,
  as any lease holder (its commits still go through the partition's leader).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from rill import errors
from rill.server.cluster.coordinator import (
    Compare,
    CoordinatorError,
    Delete,
    Get,
    KeyValue,
    Put,
)
from rill.server.cluster.keys import ClusterKeys
from rill.server.core.consumer_groups import MemberKey, Membership

if TYPE_CHECKING:
    from rill.server.cluster.node import ClusterNode

log = logging.getLogger(__name__)


def _claim_value(node_id: int, client_id: int) -> bytes:
    return json.dumps({"node_id": node_id, "client_id": client_id}).encode()


class ClusterGroupRoster:
    def __init__(self, node: ClusterNode) -> None:
        self.node = node
        # every node's members: membership -> (node id, client id) -> create_revision
        self._members: dict[Membership, dict[MemberKey, int]] = {}
        self._own: set[tuple[Membership, int]] = set()  # this node's clients' memberships
        self._watchers: list[Callable[[Membership], None]] = []
        self._background: set[asyncio.Task[None]] = set()
        # claims: membership -> partition id -> (node id, client id) reading it
        self._claims: dict[Membership, dict[int, MemberKey]] = {}
        # what this node's deal gives its own members: membership -> partition -> client id
        self._wanted: dict[Membership, dict[int, int]] = {}
        self._settling: dict[Membership, asyncio.Task[None]] = {}
        self._unsettled: set[Membership] = set()

    @property
    def node_id(self) -> int:
        return self.node.node_id

    def members(self, membership: Membership) -> list[MemberKey]:
        held = self._members.get(membership, {})
        return sorted(held, key=lambda member: (held[member], member))

    def watch(self, changed: Callable[[Membership], None]) -> None:
        self._watchers.append(changed)

    def _changed(self, membership: Membership) -> None:
        for changed in self._watchers:
            changed(membership)

    # -- this node's clients -------------------------------------------------------------------

    async def join(self, membership: Membership, client_id: int) -> None:
        node = self.node
        self._own.add((membership, client_id))
        try:
            revision = await self._put(membership, client_id)
        except BaseException:
            self._own.discard((membership, client_id))
            raise
        await node.applied(revision)

    async def _put(self, membership: Membership, client_id: int) -> int:
        node, keys = self.node, self.node.keys
        lease = node.lease
        if lease is None or not lease.valid:
            raise errors.ClusterUnavailable(reason=(
                f"node {node.node_id} holds no member lease now: cannot join a group"))
        key = keys.group_member(*membership, node.node_id, client_id)
        group = keys.group(*membership)
        value = json.dumps({"node_id": node.node_id, "client_id": client_id}).encode()
        try:
            result = await node.coordinator.txn(
                [Compare.version(group, ">", 0), Compare.missing(key)],
                [Put(key, value, lease.lease)], [Get(group)])
        except CoordinatorError as error:
            raise errors.ClusterUnavailable(reason=f"etcd cannot take the join now: {error}") \
                from None
        if not result.succeeded and not result.results[0]:
            raise errors.ConsumerGroupIdNotFound(membership[2], membership[1],
                                                 field="group_id")
        return result.revision  # (a member already: it keeps its place)

    async def leave(self, membership: Membership, client_id: int) -> None:
        self._own.discard((membership, client_id))
        key = self.node.keys.group_member(*membership, self.node.node_id, client_id)
        try:
            result = await self.node.coordinator.txn((), [Delete(key)])
        except CoordinatorError as error:
            raise errors.ClusterUnavailable(reason=f"etcd cannot take the leave now: {error}") \
                from None
        await self.node.applied(result.revision)

    def left(self, membership: Membership, client_id: int) -> None:
        async def leave() -> None:
            try:
                await self.leave(membership, client_id)
            except (errors.RillError, CoordinatorError) as error:
                log.warning("group %s: client %d left, but its member key stays until this "
                            "node's lease ends: %s", "/".join(map(str, membership)), client_id,
                            error)
        task = asyncio.ensure_future(leave())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def rejoin(self) -> None:
        """This node's clients' memberships again, under the node's new member lease."""
        for membership, client_id in sorted(self._own):
            try:
                await self._put(membership, client_id)
            except errors.RillError as error:
                log.warning("group %s: client %d could not join again: %s",
                            "/".join(map(str, membership)), client_id, error)

    # -- claims -------------------------------------------------------------------------------

    def holds(self, membership: Membership, partition_id: int, client_id: int) -> bool:
        """Whether this node's client ``client_id`` holds the partition's claim."""
        return self._claims.get(membership, {}).get(partition_id) == (self.node_id, client_id)

    def settle(self, membership: Membership, dealt: dict[int, list[int]]) -> None:
        """This node's members of the group are dealt ``dealt`` (client id -> partitions)
        now: claims it holds for partitions dealt elsewhere are let go, free ones dealt here
        are taken (in the background; again whenever a claim of the group is let go)."""
        self._wanted[membership] = {partition: client for client, partitions in dealt.items()
                                    for partition in partitions}
        self._settle_later(membership)

    def _settle_later(self, membership: Membership) -> None:
        self._unsettled.add(membership)
        task = self._settling.get(membership)
        if task is None or task.done():
            task = self._settling[membership] = asyncio.ensure_future(self._settle(membership))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _settle(self, membership: Membership) -> None:
        node, keys, me = self.node, self.node.keys, self.node.node_id
        while membership in self._unsettled:
            self._unsettled.discard(membership)
            wanted = self._wanted.get(membership, {})
            held = dict(self._claims.get(membership, {}))
            try:
                for partition_id, holder in held.items():
                    if holder[0] == me and wanted.get(partition_id) != holder[1]:
                        key = keys.group_claim(*membership, partition_id)
                        await node.coordinator.txn(
                            [Compare.value(key, "==", _claim_value(*holder))], [Delete(key)])
                lease = node.lease
                for partition_id, client_id in sorted(wanted.items()):
                    if partition_id in held or lease is None or not lease.valid:
                        continue
                    key = keys.group_claim(*membership, partition_id)
                    await node.coordinator.txn(
                        [Compare.version(keys.group(*membership), ">", 0),
                         Compare.missing(key)],
                        [Put(key, _claim_value(me, client_id), lease.lease)])
            except CoordinatorError as error:
                log.info("group %s: claims wait for etcd: %s", "/".join(map(str, membership)),
                         error)
                await asyncio.sleep(1.0)
                self._unsettled.add(membership)
            if not wanted:
                self._wanted.pop(membership, None)

    # -- applying etcd's state -----------------------------------------------------------------

    def apply_claim_put(self, kv: KeyValue) -> None:
        stream_id, topic_id, group_id, partition_id = ClusterKeys.numbers(
            kv.key, self.node.keys.group_claims)
        value = json.loads(kv.value)
        membership = (stream_id, topic_id, group_id)
        self._claims.setdefault(membership, {})[partition_id] = (value["node_id"],
                                                                 value["client_id"])

    def apply_claim_delete(self, kv: KeyValue) -> None:
        stream_id, topic_id, group_id, partition_id = ClusterKeys.numbers(
            kv.key, self.node.keys.group_claims)
        membership = (stream_id, topic_id, group_id)
        claims = self._claims.get(membership, {})
        if claims.pop(partition_id, None) is not None and not claims:
            del self._claims[membership]
        if self._wanted.get(membership):
            self._settle_later(membership)  # a partition dealt here may be free now

    def load_claims(self, kvs: list[KeyValue]) -> None:
        self._claims = {}
        for kv in kvs:
            self.apply_claim_put(kv)
        for membership in list(self._wanted):
            self._settle_later(membership)

    def _parse(self, key: bytes) -> tuple[Membership, MemberKey]:
        stream_id, topic_id, group_id, node_id, client_id = ClusterKeys.numbers(
            key, self.node.keys.group_members)
        return (stream_id, topic_id, group_id), (node_id, client_id)

    def apply_put(self, kv: KeyValue) -> None:
        membership, member = self._parse(kv.key)
        held = self._members.setdefault(membership, {})
        if held.get(member) != kv.create_revision:
            held[member] = kv.create_revision
            self._changed(membership)

    def apply_delete(self, kv: KeyValue) -> None:
        membership, member = self._parse(kv.key)
        held = self._members.get(membership, {})
        if held.pop(member, None) is not None:
            if not held:
                del self._members[membership]
            self._changed(membership)

    def load(self, kvs: list[KeyValue]) -> None:
        """Every member key at one revision (a snapshot): the roster becomes exactly that."""
        old, self._members = self._members, {}
        for kv in kvs:
            membership, member = self._parse(kv.key)
            self._members.setdefault(membership, {})[member] = kv.create_revision
        for membership in set(old) | set(self._members):
            if old.get(membership) != self._members.get(membership):
                self._changed(membership)
