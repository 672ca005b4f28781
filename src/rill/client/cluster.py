"""Leader routing of the SDK: SEND and POLL of a partition go straight to the node that leads it.

Owns: ``ClusterRouting`` (the option: ``AsyncClient(..., cluster=ClusterRouting("host:3000"))``),
``ClusterMap`` (``GET /cluster`` read as who leads what and where each node listens) and
``LeaderRouter``, what ``AsyncClient.execute`` hands the routed commands to.

How it works (``shared/spec/cluster-design.md`` §2.10): the map is read from ``GET /cluster`` of
``ClusterRouting.http_address`` (else of any member's ``http`` listener the last map named),
logged in with the client's own login (the same LOGIN_USER or personal-access-token command).
A SEND_MESSAGES with an explicit partition (``Partitioning.partition_id``) and a POLL_MESSAGES
of one partition go to the leader's listener of the client's transport (``iggy_tcp`` for
"tcp", ``iggy_quic`` for "quic", ``http`` for "http"): one connection per node, opened at first
use and logged in with the same credentials. Everything else (balanced or keyed SENDs, group
polls, every other command) goes to the address the client was given, which proxies to the
leader when needed. The map is read again when a node answers ``NotLeaderForPartition`` or
``LeaderNotAvailable`` (the command is then sent once more, to the new leader: it was
refused, not applied), when a leader cannot be connected to (sent once more too), and when a
leader's link drops or its answer times out mid-request (the error is raised: the command may
have been applied, and is never re-sent). On a standalone server the map is empty and every command goes to the
given address.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from rill import errors
from rill.client.transport import parse_address
from rill.protocol.iggy.commands.base import Command
from rill.protocol.iggy.commands.messages import PollMessages, SendMessages
from rill.protocol.iggy.primitives import Identifier, PartitioningKind

if TYPE_CHECKING:
    from rill.client.async_client import AsyncClient

log = logging.getLogger(__name__)

# the client's transport -> the listener of a node it connects to
LISTENERS = {"tcp": "iggy_tcp", "quic": "iggy_quic", "http": "http"}
_REFUSALS = (errors.NotLeaderForPartition, errors.LeaderNotAvailable)

Key = tuple[str, str, int]  # (stream, topic, partition id); stream and topic as id or name text


@dataclass(frozen=True)
class ClusterRouting:
    """The option that sends SEND/POLL of a partition to its leader. ``http_address``: any
    node's HTTP API (``host:port``, ``http://`` or ``https://``), where the map is read."""

    http_address: str


@dataclass
class ClusterMap:
    """``GET /cluster`` as routing needs it."""

    mode: str = "standalone"
    members: dict[int, dict[str, str]] = field(default_factory=dict)  # node -> listener -> address
    leaders: dict[Key, int | None] = field(default_factory=dict)

    @classmethod
    def from_status(cls, status: dict[str, Any]) -> ClusterMap:
        members = {int(member["node_id"]): dict(member.get("listeners") or {})
                   for member in status.get("members") or []}
        leaders: dict[Key, int | None] = {}
        for row in status.get("partitions") or []:
            partition, leader = int(row["partition_id"]), row.get("leader")
            # by id, and by name once the node that answered applied it (else null)
            streams = [str(row["stream_id"])] + ([f"name:{row['stream']}"] if row.get("stream") else [])
            topics = [str(row["topic_id"])] + ([f"name:{row['topic']}"] if row.get("topic") else [])
            for stream in streams:
                for topic in topics:
                    leaders[(stream, topic, partition)] = leader
        return cls(str(status.get("mode") or "standalone"), members, leaders)

    def leader_of(self, key: Key) -> int | None:
        return self.leaders.get(key)

    def address(self, node_id: int, listener: str) -> str | None:
        return self.members.get(node_id, {}).get(listener)


def _text(identifier: Identifier) -> str:
    value = identifier.value
    return str(value) if isinstance(value, int) else f"name:{value}"


def route_key(command: Command) -> Key | None:
    """The partition a command names, when it is routed to the partition's leader."""
    if isinstance(command, SendMessages):
        partitioning = command.partitioning
        if partitioning.kind != PartitioningKind.PARTITION_ID or len(partitioning.value) != 4:
            return None
        partition = int.from_bytes(partitioning.value, "little")
    elif isinstance(command, PollMessages):
        partition = command.partition_id
        if not partition:
            return None
    else:
        return None
    return (_text(command.stream_id), _text(command.topic_id), partition)


def _same_address(one: str, other: str) -> bool:
    try:
        return parse_address(one, 0) == parse_address(other, 0)
    except ValueError:
        return False


class LeaderRouter:
    """The map and the connections to leaders of one ``AsyncClient`` (``home``)."""

    def __init__(self, routing: ClusterRouting, home: AsyncClient, transport: str,
                 make_client: Callable[[str, str], AsyncClient]) -> None:
        self.routing = routing
        self.home = home
        self.listener = LISTENERS.get(transport, "iggy_tcp")
        self.make_client = make_client  # (address, transport name) -> an AsyncClient
        self.map: ClusterMap | None = None
        self.clients: dict[int, AsyncClient] = {}  # node id -> its open connection
        self._lock = asyncio.Lock()  # one map read at a time
        self._connecting = asyncio.Lock()  # one connection per node, however many callers
        self.refreshes = 0  # how many times the map was read

    async def execute(self, command: Command, key: Key) -> Any:
        for attempt in range(2):
            if self.map is None:
                await self.refresh(self.refreshes)
            seen = self.refreshes
            node = self.map.leader_of(key) if self.map is not None else None
            try:
                client = await self._client_for(node)
                if client is None:
                    return await self.home._execute_here(command)
                return await client.execute(command)
            except _REFUSALS:
                if attempt:
                    raise
                await self.refresh(seen)
            except errors.CannotEstablishConnection:
                await self._forget(node)
                if attempt:
                    raise
                await self.refresh(seen)
            except (errors.Disconnected, errors.NotConnected, TimeoutError):
                await self._forget(node)
                with contextlib.suppress(errors.RillError, OSError):
                    await self.refresh(seen)
                raise
        raise AssertionError("unreachable")

    async def _client_for(self, node: int | None) -> AsyncClient | None:
        """The connection to ``node``; None: send on the home connection (no leader known,
        standalone, or the leader is the node the client was given)."""
        if node is None or self.map is None:
            return None
        address = self.map.address(node, self.listener)
        if address is None or _same_address(address, self.home.address):
            return None
        async with self._connecting:
            client = self.clients.get(node)
            if client is not None and client.address != address:
                await self._forget(node)
                client = None
            if client is None:
                client = self.make_client(address, self.home.transport.name or "tcp")
                try:
                    await client.connect()
                    login = self.home.login_command
                    if login is not None:
                        await client.execute(login)
                except BaseException:
                    await client.close()
                    raise
                self.clients[node] = client
            return client

    async def _forget(self, node: int | None) -> None:
        client = self.clients.pop(node, None) if node is not None else None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    def _http_addresses(self) -> list[str]:
        addresses = [self.routing.http_address]
        if self.map is not None:
            for listeners in self.map.members.values():
                address = listeners.get("http")
                if address and address not in addresses:
                    addresses.append(address)
        return addresses

    async def refresh(self, seen: int | None = None) -> ClusterMap | None:
        """Read ``GET /cluster`` again (from the first node whose HTTP API answers). ``seen``:
        the ``refreshes`` count the caller's map came from; when another caller read the map
        since, that newer map is kept."""
        async with self._lock:
            if seen is not None and self.refreshes != seen:
                return self.map
            failure: errors.RillError | None = None
            for address in self._http_addresses():
                try:
                    status = await self.status_from(address)
                except (errors.CannotEstablishConnection, errors.Disconnected,
                        errors.NotConnected) as error:
                    failure = error
                    log.info("rill client: cluster map from %s failed: %s", address, error)
                    continue
                self.map = ClusterMap.from_status(status)
                self.refreshes += 1
                return self.map
            assert failure is not None
            raise failure

    async def status_from(self, address: str) -> dict[str, Any]:
        """``GET /cluster`` of one node's HTTP API, logged in as the home client is."""
        client = self.make_client(address, "http")
        try:
            await client.connect()
            login = self.home.login_command
            if login is not None:
                await client.execute(login)
            return await client.get_cluster()
        finally:
            await client.close()

    async def close(self) -> None:
        for node in list(self.clients):
            await self._forget(node)
