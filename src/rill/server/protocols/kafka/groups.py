"""Kafka's classic group coordinator (kafka-notes §4): live membership of Kafka consumer groups.

Owns: the groups, their members, generations and rebalances. Membership is the protocol's and
lives only in memory (as Iggy's ``protocols/iggy/groups.py``); committed offsets are the core's
(``dispatch``'s OffsetCommit/OffsetFetch, under ``kafka-group:<group id>``). The coordinator
neither parses nor computes assignments: the leader's client does (range, roundrobin,
cooperative-sticky), the coordinator stores and hands out the bytes.

Rules:

* a JoinGroup with an empty member id (v4+, no ``group.instance.id``) is answered
  MEMBER_ID_REQUIRED with a generated id, which the client joins with;
* static membership (``group.instance.id``, JoinGroup v5+): a static member joining again with
  an empty member id (a restarted client) gets a new member id and its old one is fenced
  (FENCED_INSTANCE_ID on JoinGroup, SyncGroup, Heartbeat, OffsetCommit and LeaveGroup); in a
  stable group, when its protocols (names and metadata) are unchanged, it is answered at once
  with the current generation and keeps its assignment (SyncGroup hands it back), the others do
  not rebalance; else the group rebalances. LeaveGroup v3+ may name a member by instance id;
  a static member's session timeout removes it as any member's;
* every join (and every leave or session expiry of a member of an active group) starts a
  rebalance; a rebalance completes as soon as every current member has rejoined, or when the
  longest rebalance timeout of the members passes (members that did not rejoin are removed);
* the initial rebalance delay (``[kafka] group_initial_rebalance_delay``, Kafka's
  group.initial.rebalance.delay.ms; default 0: none): the first rebalance of an empty group
  waits that long for more members, each new member restarting the wait, the rebalance
  timeout ending it. With no delay a join whose rebalance has no other members completes at
  once (§9.11);
* the chosen protocol is the first of the leader's protocols every member supports; the
  leader is the previous leader while it stays, else the first member to rejoin;
* SyncGroup: the leader's assignments are handed to every member; followers wait for them;
* Heartbeat answers REBALANCE_IN_PROGRESS while the group prepares a rebalance; each member has
  a session timer (``loop.call_later``), reset by its requests and suspended while its
  JoinGroup or SyncGroup is held; when it fires the member is removed;
* a member's connection closing does not remove it (its session timeout does).

Held answers are asyncio futures the connection's request coroutine awaits; a future whose
waiter went away (connection closed) is skipped.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from rill.protocol.kafka import ErrorCode

EMPTY = "Empty"
PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"
_FENCED_KEPT = 1024  # replaced member ids of a group remembered for requests without instance id


class GroupError(Exception):
    def __init__(self, code: ErrorCode, member_id: str = "") -> None:
        super().__init__(code.name)
        self.code = code
        self.member_id = member_id


@dataclass
class JoinResult:
    error: ErrorCode
    generation: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    member_id: str
    members: list[tuple[str, str | None, bytes]]  # the leader's only


@dataclass(eq=False)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join: asyncio.Future | None = None  # a held JoinGroup answer
    sync: asyncio.Future | None = None  # a held SyncGroup answer
    timer: asyncio.TimerHandle | None = None

    def metadata(self, protocol: str | None) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")


@dataclass(eq=False)
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, asyncio.TimerHandle] = field(default_factory=dict)  # MEMBER_ID_REQUIRED
    static: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    fenced: set[str] = field(default_factory=set)  # static members' replaced member ids
    join_timer: asyncio.TimerHandle | None = None
    initial_hold: asyncio.TimerHandle | None = None  # the initial rebalance delay

    def is_active(self) -> bool:
        return bool(self.members)


def _resolve(future: asyncio.Future | None, value: Any) -> None:
    if future is not None and not future.done():
        future.set_result(value)


class Coordinator:
    """Every Kafka group of one listener."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}

    # -- timers ----------------------------------------------------------------------------

    def _touch(self, group: Group, member: Member) -> None:
        """(Re)start the member's session timer."""
        if member.timer is not None:
            member.timer.cancel()
        member.timer = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._expire, group, member)

    def _suspend(self, member: Member) -> None:
        if member.timer is not None:
            member.timer.cancel()
            member.timer = None

    def _expire(self, group: Group, member: Member) -> None:
        member.timer = None
        if group.members.get(member.member_id) is member:
            self._remove(group, member)

    # -- rebalancing -----------------------------------------------------------------------

    def _remove(self, group: Group, member: Member) -> None:
        """A member leaves (LeaveGroup, session timeout, or not rejoining in time)."""
        del group.members[member.member_id]
        self._suspend(member)
        _resolve(member.join, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, -1, None, None, "",
                                         member.member_id, []))
        _resolve(member.sync, (ErrorCode.UNKNOWN_MEMBER_ID, b""))
        if member.instance_id is not None and group.static.get(member.instance_id) == \
                member.member_id:
            del group.static[member.instance_id]
        if group.leader == member.member_id:
            group.leader = None
        if group.state == PREPARING:
            self._try_complete_join(group)
        elif group.state in (STABLE, COMPLETING):
            self._prepare(group)
            self._try_complete_join(group)

    def _prepare(self, group: Group) -> None:
        """Start a rebalance: members must rejoin within the longest rebalance timeout."""
        if group.state == COMPLETING:
            for member in group.members.values():
                _resolve(member.sync, (ErrorCode.REBALANCE_IN_PROGRESS, b""))
                member.sync = None
        if group.state == PREPARING:
            return
        group.state = PREPARING
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        if group.join_timer is not None:
            group.join_timer.cancel()
        group.join_timer = asyncio.get_running_loop().call_later(
            timeout / 1000, self._join_deadline, group)

    def _join_deadline(self, group: Group) -> None:
        group.join_timer = None
        if group.state != PREPARING:
            return
        for member in [m for m in group.members.values() if m.join is None]:
            del group.members[member.member_id]  # did not rejoin in time
            self._suspend(member)
            if member.instance_id is not None:
                group.static.pop(member.instance_id, None)
            if group.leader == member.member_id:
                group.leader = None
        self._complete_join(group)

    def _hold_initial(self, group: Group, delay: float) -> None:
        """An empty group's first rebalance waits ``delay`` seconds for more members (each new
        member restarts the wait; the rebalance timeout still ends it)."""
        if group.initial_hold is not None:
            group.initial_hold.cancel()
        group.initial_hold = asyncio.get_running_loop().call_later(
            delay, self._release_initial, group)

    def _release_initial(self, group: Group) -> None:
        group.initial_hold = None
        self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.initial_hold is not None:
            return
        if group.state == PREPARING and all(m.join is not None for m in group.members.values()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        if group.initial_hold is not None:
            group.initial_hold.cancel()
            group.initial_hold = None
        group.generation += 1
        if not group.members:
            group.state, group.protocol_name, group.leader = EMPTY, None, None
            group.fenced.clear()
            return
        members = list(group.members.values())
        if group.leader not in group.members:
            group.leader = members[0].member_id
        leader = group.members[group.leader]
        common = set.intersection(*({name for name, _ in m.protocols} for m in members))
        group.protocol_name = next(name for name, _ in leader.protocols if name in common)
        group.state = COMPLETING
        listing = [(m.member_id, m.instance_id, m.metadata(group.protocol_name)) for m in members]
        for member in members:
            _resolve(member.join, JoinResult(
                ErrorCode.NONE, group.generation, group.protocol_type, group.protocol_name,
                group.leader, member.member_id,
                listing if member.member_id == group.leader else []))
            member.join = None
            self._touch(group, member)

    # -- the APIs --------------------------------------------------------------------------

    async def join(self, group_id: str, member_id: str, instance_id: str | None,
                   session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], client_id: str, client_host: str,
                   version: int, initial_delay: float = 0.0) -> JoinResult:
        def fail(code: ErrorCode, member: str = member_id) -> JoinResult:
            return JoinResult(code, -1, None, None, "", member, [])

        if not group_id:
            return fail(ErrorCode.INVALID_GROUP_ID)
        if not protocols or not protocol_type:
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        group = self.groups.setdefault(group_id, Group(group_id))
        if group.members and protocol_type != group.protocol_type:
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.members:
            names = {name for name, _ in protocols}
            if not all(names & {name for name, _ in m.protocols}
                       for m in group.members.values() if m.member_id != member_id):
                return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        loop = asyncio.get_running_loop()
        if instance_id is not None and instance_id in group.static:
            current = group.static[instance_id]
            if member_id and member_id != current:
                return fail(ErrorCode.FENCED_INSTANCE_ID)
            if not member_id:  # a static member restarted: a new id, the old one fenced
                return await self._replace_static(group, group.members[current], client_id,
                                                  client_host, session_timeout_ms,
                                                  rebalance_timeout_ms, protocols)
        if not member_id:
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if version >= 4 and instance_id is None:
                group.pending[member_id] = loop.call_later(
                    session_timeout_ms / 1000, group.pending.pop, member_id, None)
                return fail(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        elif member_id in group.pending:
            group.pending.pop(member_id).cancel()
        elif member_id not in group.members:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        member = group.members.get(member_id)
        if initial_delay > 0 and member is None and (
                group.state == EMPTY or group.initial_hold is not None):
            self._hold_initial(group, initial_delay)
        if member is None:
            member = Member(member_id, instance_id, client_id, client_host, session_timeout_ms,
                            rebalance_timeout_ms, protocols)
            group.members[member_id] = member
            if instance_id is not None:
                group.static[instance_id] = member_id
        else:
            member.protocols = protocols
            member.session_timeout_ms = session_timeout_ms
            member.rebalance_timeout_ms = rebalance_timeout_ms
            member.client_id, member.client_host = client_id, client_host
            _resolve(member.join, fail(ErrorCode.UNKNOWN_MEMBER_ID))  # a replaced join
        group.protocol_type = protocol_type
        member.join = loop.create_future()
        future = member.join
        self._suspend(member)
        self._prepare(group)
        self._try_complete_join(group)
        return await future

    async def _replace_static(self, group: Group, old: Member, client_id: str, client_host: str,
                              session_timeout_ms: int, rebalance_timeout_ms: int,
                              protocols: list[tuple[str, bytes]]) -> JoinResult:
        """A static member joins again with an empty member id: it gets a new member id, its
        old one is fenced. In a stable group, unchanged protocols keep the generation and the
        member's assignment (no rebalance of the others); else the group rebalances."""
        member = Member(f"{client_id or 'member'}-{uuid.uuid4()}", old.instance_id, client_id,
                        client_host, session_timeout_ms, rebalance_timeout_ms, protocols,
                        assignment=old.assignment)
        unchanged = group.state == STABLE and protocols == old.protocols
        del group.members[old.member_id]
        self._suspend(old)
        if len(group.fenced) >= _FENCED_KEPT:  # requests naming the instance id stay fenced
            group.fenced.pop()
        group.fenced.add(old.member_id)
        fenced = JoinResult(ErrorCode.FENCED_INSTANCE_ID, -1, None, None, "", old.member_id, [])
        _resolve(old.join, fenced)
        _resolve(old.sync, (ErrorCode.FENCED_INSTANCE_ID, b""))
        group.members[member.member_id] = member
        group.static[member.instance_id] = member.member_id
        if group.leader == old.member_id:
            group.leader = member.member_id
        if unchanged:
            self._touch(group, member)
            leader = member.member_id == group.leader
            listing = [(m.member_id, m.instance_id, m.metadata(group.protocol_name))
                       for m in group.members.values()] if leader else []
            return JoinResult(ErrorCode.NONE, group.generation, group.protocol_type,
                              group.protocol_name, group.leader, member.member_id, listing)
        member.join = asyncio.get_running_loop().create_future()
        future = member.join
        self._prepare(group)
        self._try_complete_join(group)
        return await future

    def _fenced(self, group: Group, member_id: str, instance_id: str | None) -> bool:
        """Is this request from a static member's replaced member id?"""
        if instance_id is not None and instance_id in group.static:
            return group.static[instance_id] != member_id
        return member_id in group.fenced

    async def sync(self, group_id: str, generation: int, member_id: str,
                   assignments: dict[str, bytes], instance_id: str | None = None
                   ) -> tuple[ErrorCode, bytes]:
        group = self.groups.get(group_id)
        if group is not None and self._fenced(group, member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID, b""
        member = group.members.get(member_id) if group is not None else None
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, b""
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION, b""
        if group.state == PREPARING:
            return ErrorCode.REBALANCE_IN_PROGRESS, b""
        if group.state == STABLE:
            self._touch(group, member)
            return ErrorCode.NONE, member.assignment
        # COMPLETING
        if member_id == group.leader:
            for each in group.members.values():
                each.assignment = assignments.get(each.member_id, b"")
            group.state = STABLE
            for each in group.members.values():
                _resolve(each.sync, (ErrorCode.NONE, each.assignment))
                each.sync = None
                if each is not member:
                    self._touch(group, each)
            self._touch(group, member)
            return ErrorCode.NONE, member.assignment
        member.sync = asyncio.get_running_loop().create_future()
        future = member.sync
        self._suspend(member)
        return await future

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance_id: str | None = None) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is not None and self._fenced(group, member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id) if group is not None else None
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.join is None and member.sync is None:
            self._touch(group, member)
        if group.state == PREPARING:
            return ErrorCode.REBALANCE_IN_PROGRESS
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """Each (member id, group.instance.id) leaves; an error per member."""
        group = self.groups.get(group_id)
        codes = []
        for member_id, instance_id in members:
            member = None
            if group is not None and instance_id is not None:  # v3+: by instance id
                current = group.static.get(instance_id)
                if current is not None and member_id and member_id != current:
                    codes.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member = group.members.get(current) if current is not None else None
            elif group is not None:
                if member_id in group.fenced:
                    codes.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member = group.members.get(member_id)
            if member is None:
                codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            self._remove(group, member)
            codes.append(ErrorCode.NONE)
        return codes

    def check_commit(self, group_id: str, generation: int, member_id: str,
                     instance_id: str | None = None) -> ErrorCode:
        """May this OffsetCommit store offsets (a simple commit: generation -1, no member id,
        to a group with no members; else a current member at the current generation)."""
        group = self.groups.get(group_id)
        if group is not None and member_id and self._fenced(group, member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if group is None or not group.members:
            if generation < 0 and not member_id:
                return ErrorCode.NONE
            return ErrorCode.UNKNOWN_MEMBER_ID if member_id else ErrorCode.ILLEGAL_GENERATION
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state == COMPLETING:
            return ErrorCode.REBALANCE_IN_PROGRESS
        if member.join is None and member.sync is None:
            self._touch(group, member)
        return ErrorCode.NONE

    def describe(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def forget(self, group_id: str) -> None:
        """Drop a group with no members and no member ids handed out (it is Dead unless it
        has committed offsets, which ``group_apis`` knows)."""
        group = self.groups.get(group_id)
        if group is not None and not group.members and not group.pending:
            for timer in (group.join_timer, group.initial_hold):
                if timer is not None:
                    timer.cancel()
            del self.groups[group_id]
