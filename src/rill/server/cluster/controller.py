"""The controller: the one node that changes the catalog and elects partition leaders
(``shared/spec/cluster-design.md`` §2.5, §2.6).

Owns: ``Controller`` -- what the elected node does while it leads: catalog changes other nodes
hand it (streams, topics, partitions: rows, names, replica assignment and first partition
states, in one transaction each; users; purges: every partition of the topic or stream at a
new incarnation and its stored consumer positions gone) and elections (a partition whose leader is not a live member
gets one from its live ISR; dead members leave every ISR, never emptying it). Every
transaction compares the controller's election key (``Leadership.fence``: a deposed controller
changes nothing) and, for a partition, the mod_revision it last saw (the partition epoch).
Elections run in transactions of at most ``ELECTIONS_PER_TXN`` partitions (etcd's
``--max-txn-ops`` is 128: a compare and a put each).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from rill import errors
from rill.server.cluster.coordinator import Compare, Delete, Put
from rill.server.cluster.election import Leadership
from rill.server.cluster.partition_state import (
    PartitionState,
    assign,
    elect,
    first_state,
    prefer,
    purged,
)

if TYPE_CHECKING:
    from rill.server.cluster.node import ClusterNode

log = logging.getLogger(__name__)

ELECTIONS_PER_TXN = 60
DELETES_PER_TXN = 100  # etcd's --max-txn-ops is 128


class Controller:
    def __init__(self, node: ClusterNode, leadership: Leadership) -> None:
        self.node = node
        self.leadership = leadership
        self.elections = 0
        self._placed = 0  # round-robin start of the next topic's assignment

    @property
    def epoch(self) -> int:
        return self.leadership.epoch

    # -- catalog changes ---------------------------------------------------------------------

    async def change(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """Carry out one catalog change; returns {"revision"} or raises a RillError."""
        node, keys = self.node, self.node.keys
        fence = self.leadership.fence()
        coordinator = node.coordinator
        if op == "create_stream":
            row = args["row"]
            result = await coordinator.txn(
                [fence, Compare.missing(keys.stream(row["id"])),
                 Compare.missing(keys.stream_name(row["name"]))],
                [Put(keys.stream(row["id"]), json.dumps(args).encode()),
                 Put(keys.stream_name(row["name"]), str(row["id"]).encode())])
            if not result.succeeded:
                raise errors.StreamNameAlreadyExists(row["name"], reason=(
                    f"Stream with ID {row['id']} or name {row['name']} already exists "
                    f"(or this controller was replaced)"))
            return {"revision": result.revision}
        if op == "delete_stream":
            stream_id = args["stream_id"]
            current = await coordinator.get(keys.stream(stream_id))
            if current is None:
                raise errors.StreamIdNotFound(stream_id)
            name = json.loads(current.value)["row"]["name"]
            result = await coordinator.txn(
                [fence], [Delete(keys.stream(stream_id)), Delete(keys.stream_name(name)),
                          Delete(keys.topics + f"{stream_id}/".encode(), prefix=True),
                          Delete(keys.topic_names + f"{stream_id}/".encode(), prefix=True),
                          Delete(keys.partitions + f"{stream_id}/".encode(), prefix=True),
                          Delete(keys.offsets + f"{stream_id}/".encode(), prefix=True),
                          *(Delete(prefix, prefix=True)
                            for prefix in keys.stream_groups(stream_id))])
            return {"revision": result.revision}
        if op == "create_topic":
            return await self._create_topic(args)
        if op == "delete_topic":
            stream_id, topic_id = args["stream_id"], args["topic_id"]
            current = await coordinator.get(keys.topic(stream_id, topic_id))
            if current is None:
                raise errors.TopicIdNotFound(topic_id, stream_id)
            name = json.loads(current.value)["row"]["name"]
            result = await coordinator.txn(
                [fence], [Delete(keys.topic(stream_id, topic_id)),
                          Delete(keys.topic_name(stream_id, name)),
                          Delete(keys.topic_partitions(stream_id, topic_id), prefix=True),
                          Delete(keys.offsets + f"{stream_id}/{topic_id}/".encode(), prefix=True),
                          *(Delete(prefix, prefix=True)
                            for prefix in keys.topic_groups(stream_id, topic_id))])
            return {"revision": result.revision}
        if op == "create_partitions":
            return await self._create_partitions(args)
        if op in ("purge_topic", "purge_stream"):
            return await self._purge(args)
        if op == "put_user":
            row = args["row"]
            key, name = keys.user(row["id"]), keys.user_name(row["username"])
            compares = [fence]
            operations = [Put(key, json.dumps(args).encode()), Put(name, str(row["id"]).encode())]
            if args.get("create"):
                compares += [Compare.missing(key), Compare.missing(name)]
            elif args.get("old_username", row["username"]) != row["username"]:
                compares.append(Compare.missing(name))
                operations.append(Delete(keys.user_name(args["old_username"])))
            result = await coordinator.txn(compares, operations)
            if not result.succeeded:
                raise errors.UserAlreadyExists(reason=(
                    f"User already exists: the id {row['id']} or the name {row['username']!r} "
                    f"is taken (or this controller was replaced)"))
            return {"revision": result.revision}
        if op == "delete_user":
            result = await coordinator.txn(
                [fence], [Delete(keys.user(args["id"])),
                          Delete(keys.user_name(args["username"])),
                          Delete(keys.user_tokens(args["id"]), prefix=True)])
            return {"revision": result.revision}
        if op == "create_group":
            return await self._create_group(args)
        if op == "delete_group":
            return await self._delete_group(args)
        if op == "create_token":
            row = args["row"]
            key = keys.token(row["user_id"], row["name"])
            # (no compare on users/<id>: the root user of each node is not kept in etcd; a
            # token of a user deleted meanwhile is applied nowhere, as its user is gone)
            result = await coordinator.txn([fence, Compare.missing(key)],
                                           [Put(key, json.dumps(args).encode())])
            if not result.succeeded:
                raise errors.PersonalAccessTokenAlreadyExists(row["name"], row["user_id"], reason=(
                    f"Personal access token {row['name']!r} of user {row['user_id']} already "
                    f"exists (or this controller was replaced)"))
            return {"revision": result.revision}
        if op == "delete_tokens":
            deletes = [Delete(keys.token(user_id, name)) for user_id, name in args["tokens"]]
            revision = 0
            for start in range(0, max(len(deletes), 1), DELETES_PER_TXN):
                result = await coordinator.txn([fence], deletes[start:start + DELETES_PER_TXN])
                if not result.succeeded:
                    raise errors.ClusterUnavailable(reason="this controller was replaced: try again")
                revision = result.revision
            return {"revision": revision}
        raise errors.InvalidCommand(reason=f"unknown catalog change {op!r}")

    async def _create_group(self, args: dict[str, Any]) -> dict[str, Any]:
        keys = self.node.keys
        row = args["row"]
        stream_id, topic_id, group_id = row["stream_id"], row["topic_id"], row["id"]
        key, name = (keys.group(stream_id, topic_id, group_id),
                     keys.group_name(stream_id, topic_id, row["name"]))
        result = await self.node.coordinator.txn(
            [self.leadership.fence(), Compare.version(keys.topic(stream_id, topic_id), ">", 0),
             Compare.missing(key), Compare.missing(name)],
            [Put(key, json.dumps(args).encode()), Put(name, str(group_id).encode())])
        if not result.succeeded:
            raise errors.ConsumerGroupNameAlreadyExists(row["name"], topic_id, reason=(
                f"Consumer group with ID {group_id} or name {row['name']} already exists in "
                f"topic {topic_id} of stream {stream_id}, or the topic is gone (or this "
                f"controller was replaced)"))
        return {"revision": result.revision}

    async def _delete_group(self, args: dict[str, Any]) -> dict[str, Any]:
        """The group's row and name, its members, and the positions stored under its name in
        every partition of its topic."""
        node, keys = self.node, self.node.keys
        stream_id, topic_id, group_id = args["stream_id"], args["topic_id"], args["group_id"]
        key = keys.group(stream_id, topic_id, group_id)
        current = await node.coordinator.get(key)
        if current is None:
            raise errors.ConsumerGroupIdNotFound(group_id, topic_id)
        name = json.loads(current.value)["row"]["name"]
        topic = await node.coordinator.get(keys.topic(stream_id, topic_id))
        partitions = [p["id"] for p in json.loads(topic.value)["partitions"]] if topic else []
        operations = [Delete(keys.offset(stream_id, topic_id, partition_id, args["consumer"]))
                      for partition_id in partitions]
        for start in range(0, len(operations), DELETES_PER_TXN):  # positions first
            await node.coordinator.txn([self.leadership.fence()],
                                       operations[start:start + DELETES_PER_TXN])
        result = await node.coordinator.txn(
            [self.leadership.fence(),
             Compare.mod_revision(key, "==", current.mod_revision)],
            [Delete(key), Delete(keys.group_name(stream_id, topic_id, name)),
             Delete(keys.group_members_of(stream_id, topic_id, group_id), prefix=True),
             Delete(keys.group_claims_of(stream_id, topic_id, group_id), prefix=True)])
        if not result.succeeded:
            raise errors.ClusterUnavailable(reason="the group changed meanwhile: try again")
        return {"revision": result.revision}

    def _assignment(self, replication_factor: int, count: int) -> list[tuple[int, ...]]:
        live = sorted(self.node.members)
        if replication_factor > len(live):
            raise errors.InvalidReplicationFactor(reason=(
                f"Invalid replication factor: {replication_factor}, the cluster has "
                f"{len(live)} live nodes"))
        replicas = assign(live, replication_factor, count, self._placed)
        self._placed += count
        return replicas

    async def _create_topic(self, args: dict[str, Any]) -> dict[str, Any]:
        node, keys = self.node, self.node.keys
        row = args["row"]
        stream_id, topic_id = row["stream_id"], row["id"]
        factor = row["replication_factor"]
        min_isr = min(node.settings.min_insync_replicas, factor)
        states = [first_state(replicas, min_isr)
                  for replicas in self._assignment(factor, len(args["partitions"]))]
        puts = [Put(keys.topic(stream_id, topic_id), json.dumps(args).encode()),
                Put(keys.topic_name(stream_id, row["name"]), str(topic_id).encode())]
        puts += [Put(keys.partition(stream_id, topic_id, partition["id"]), state.to_json())
                 for partition, state in zip(args["partitions"], states)]
        result = await node.coordinator.txn(
            [self.leadership.fence(), Compare.version(keys.stream(stream_id), ">", 0),
             Compare.missing(keys.topic(stream_id, topic_id)),
             Compare.missing(keys.topic_name(stream_id, row["name"]))], puts)
        if not result.succeeded:
            raise errors.TopicNameAlreadyExists(row["name"], stream_id, reason=(
                f"Topic with ID {topic_id} or name {row['name']} already exists in stream "
                f"{stream_id}, or the stream is gone (or this controller was replaced)"))
        return {"revision": result.revision}

    async def _create_partitions(self, args: dict[str, Any]) -> dict[str, Any]:
        node, keys = self.node, self.node.keys
        stream_id, topic_id = args["stream_id"], args["topic_id"]
        current = await node.coordinator.get(keys.topic(stream_id, topic_id))
        if current is None:
            raise errors.TopicIdNotFound(topic_id, stream_id)
        topic = json.loads(current.value)
        factor = topic["row"]["replication_factor"]
        min_isr = min(node.settings.min_insync_replicas, factor)
        new = args["partitions"]
        topic["partitions"] = topic["partitions"] + new
        # the proposer's own change: its watch leaves the new partitions to its catalog
        topic["proposal"] = args.get("proposal")
        states = [first_state(replicas, min_isr)
                  for replicas in self._assignment(factor, len(new))]
        puts = [Put(keys.topic(stream_id, topic_id), json.dumps(topic).encode())]
        puts += [Put(keys.partition(stream_id, topic_id, partition["id"]), state.to_json())
                 for partition, state in zip(new, states)]
        result = await node.coordinator.txn(
            [self.leadership.fence(),
             Compare.mod_revision(keys.topic(stream_id, topic_id), "==", current.mod_revision)],
            puts)
        if not result.succeeded:
            raise errors.ClusterUnavailable(reason="the topic changed meanwhile: try again")
        return {"revision": result.revision}

    async def _purge(self, args: dict[str, Any]) -> dict[str, Any]:
        """Every partition of a topic (``topic_id`` given) or of a stream at a new incarnation
        (``partition_state.purged``), ``ELECTIONS_PER_TXN`` a transaction, each comparing the
        controller's fence and the partitions' epochs; the stored consumer positions go in
        the last one. A partition whose state changed meanwhile (an election) is read again
        and purged in a later transaction."""
        node, keys = self.node, self.node.keys
        stream_id, topic_id = args["stream_id"], args.get("topic_id")
        if topic_id is None:
            if await node.coordinator.get(keys.stream(stream_id)) is None:
                raise errors.StreamIdNotFound(stream_id)
            states = keys.partitions + f"{stream_id}/".encode()
            positions = keys.offsets + f"{stream_id}/".encode()
        else:
            if await node.coordinator.get(keys.topic(stream_id, topic_id)) is None:
                raise errors.TopicIdNotFound(topic_id, stream_id)
            states = keys.topic_partitions(stream_id, topic_id)
            positions = keys.offsets + f"{stream_id}/{topic_id}/".encode()
        left = {kv.key: PartitionState.from_json(kv.value, kv.mod_revision, kv.create_revision)
                for kv in (await node.coordinator.range(states, prefix=True)).kvs}
        failures = 0
        while True:
            group = list(left.items())[:ELECTIONS_PER_TXN]
            last = len(group) == len(left)
            result = await node.coordinator.txn(
                [self.leadership.fence(),
                 *(Compare.mod_revision(key, "==", state.revision) for key, state in group)],
                [*(Put(key, purged(state).to_json()) for key, state in group),
                 *([Delete(positions, prefix=True)] if last else [])])
            if result.succeeded:
                for key, _ in group:
                    del left[key]
                if last:
                    return {"revision": result.revision}
                continue
            failures += 1
            if failures > 10:
                raise errors.ClusterUnavailable(reason=(
                    "the partitions kept changing during the purge, or this controller was "
                    "replaced: try again"))
            for key, _ in group:  # changed meanwhile: read again
                current = await node.coordinator.get(key)
                if current is None:
                    del left[key]
                else:
                    left[key] = PartitionState.from_json(current.value, current.mod_revision,
                                                         current.create_revision)

    # -- elections -----------------------------------------------------------------------------

    async def elect_all(self) -> int:
        """One pass over every partition: elections and dead ISR members removed. Returns how
        many partitions changed (a failed transaction changes none: the next pass, woken by
        the watch, sees the newer state)."""
        node = self.node
        live = set(node.members)
        changes: list[tuple[tuple[int, int, int], PartitionState, PartitionState]] = []
        for key, state in list(node.partition_states.items()):
            restarted = [member for member, epoch in node.member_epochs.items()
                         if epoch > state.revision]
            new = elect(state, live, restarted)
            if new is not None:
                changes.append((key, state, new))
        return await self._write_states(changes)

    async def balance(self) -> int:
        """One pass moving leadership back to each partition's preferred replica where it is
        live and in the ISR (``partition_state.prefer``), skipping partitions an election is
        due for. Returns how many partitions changed."""
        node = self.node
        live = set(node.members)
        changes = []
        for key, state in list(node.partition_states.items()):
            restarted = [member for member, epoch in node.member_epochs.items()
                         if epoch > state.revision]
            if elect(state, live, restarted) is None:
                new = prefer(state, live)
                if new is not None:
                    changes.append((key, state, new))
        return await self._write_states(changes)

    async def _write_states(
            self, changes: list[tuple[tuple[int, int, int], PartitionState, PartitionState]]
            ) -> int:
        """The new states, ``ELECTIONS_PER_TXN`` partitions a transaction, each comparing the
        controller's fence and the partition's epoch (mod_revision)."""
        node = self.node
        changed = 0
        for start in range(0, len(changes), ELECTIONS_PER_TXN):
            group = changes[start:start + ELECTIONS_PER_TXN]
            keys = [node.keys.partition(*key) for key, _, _ in group]
            result = await node.coordinator.txn(
                [self.leadership.fence(),
                 *(Compare.mod_revision(k, "==", old.revision)
                   for k, (_, old, _) in zip(keys, group))],
                [Put(k, new.to_json()) for k, (_, _, new) in zip(keys, group)])
            if result.succeeded:
                changed += len(group)
                for (key, old, new) in group:
                    if new.leader != old.leader:
                        self.elections += 1
                        log.info("controller: partition %s leader %s -> %s (epoch %d), ISR %s",
                                 "/".join(map(str, key)), old.leader, new.leader,
                                 new.leader_epoch, list(new.isr))
        return changed
