"""The broker's neutral facades beside ``Broker``: the catalogue, access, consumer groups, the
server's own state and staged appends, each one ``Broker`` attribute (``broker.catalog``,
``broker.access``, ``broker.groups``, ``broker.server``, ``broker.staging``).

Owns: nothing but the door. Each method is the one call a protocol makes for a use case; the
service behind it (``core.streams``, ``core.users``, ...) authorizes, validates, journals and
mutates. A protocol never holds a service: every cross-cutting rule (quotas, tracing, a leader
check) has this one door to guard, with ``Broker`` for the data path.
Partitions are numbered 1..N here as everywhere in the core API (``core.types``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rill.server.core.model import Session, Stream, Topic
from rill.server.core.types import PartitionChooser, Ref, TopicSpec

if TYPE_CHECKING:
    from rill.server.core.consumer_groups import Group, GroupMembership
    from rill.server.core.core import Core
    from rill.server.core.system import ServerStats
    from rill.server.core.tokens import PersonalAccessToken
    from rill.server.core.users import User


class Catalog:
    """Namespaces (streams), topics and partitions."""

    def __init__(self, core: Core) -> None:
        self._streams, self._topics, self._partitions = core.streams, core.topics, core.partitions

    def get_stream(self, session: Session, stream: Ref) -> Stream:
        return self._streams.get_stream(session, stream)

    def get_streams(self, session: Session) -> list[Stream]:
        return self._streams.get_streams(session)

    async def create_stream(self, session: Session, name: str, stream_id: int = 0) -> Stream:
        return await self._streams.create_stream(session, name, stream_id)

    async def update_stream(self, session: Session, stream: Ref, name: str) -> None:
        await self._streams.update_stream(session, stream, name)

    async def delete_stream(self, session: Session, stream: Ref) -> None:
        await self._streams.delete_stream(session, stream)

    async def purge_stream(self, session: Session, stream: Ref) -> None:
        await self._streams.purge_stream(session, stream)

    def get_topic(self, session: Session, stream: Ref, topic: Ref) -> Topic:
        return self._topics.get_topic(session, stream, topic)

    def get_topics(self, session: Session, stream: Ref) -> list[Topic]:
        return self._topics.get_topics(session, stream)

    def default_message_expiry(self) -> int:
        """The message expiry (µs, or EXPIRY_NEVER) a topic created with the default gets."""
        return self._topics.default_message_expiry()

    async def create_topic(self, session: Session, stream: Ref, spec: TopicSpec) -> Topic:
        return await self._topics.create_topic(session, stream, spec)

    async def update_topic(self, session: Session, stream: Ref, topic: Ref,
                           spec: TopicSpec) -> None:
        await self._topics.update_topic(session, stream, topic, spec)

    async def delete_topic(self, session: Session, stream: Ref, topic: Ref) -> None:
        await self._topics.delete_topic(session, stream, topic)

    async def purge_topic(self, session: Session, stream: Ref, topic: Ref) -> None:
        await self._topics.purge_topic(session, stream, topic)

    async def create_partitions(self, session: Session, stream: Ref, topic: Ref,
                                count: int) -> None:
        await self._partitions.create_partitions(session, stream, topic, count)

    async def delete_partitions(self, session: Session, stream: Ref, topic: Ref,
                                count: int) -> None:
        await self._partitions.delete_partitions(session, stream, topic, count)


class Access:
    """Users, their permissions, logins and personal access tokens."""

    def __init__(self, core: Core) -> None:
        self._users, self._tokens = core.users, core.tokens

    def get_user(self, session: Session, user: Ref) -> User:
        return self._users.get_user(session, user)

    def get_users(self, session: Session) -> list[User]:
        return self._users.get_users(session)

    async def create_user(self, session: Session, username: str, password: str, status: int,
                          permissions: Any) -> User:
        return await self._users.create_user(session, username, password, status, permissions)

    async def delete_user(self, session: Session, user: Ref) -> None:
        await self._users.delete_user(session, user)

    def unlock_user(self, session: Session, user: Ref) -> None:
        self._users.unlock_user(session, user)

    async def update_user(self, session: Session, user: Ref, username: str | None,
                          status: int | None) -> None:
        await self._users.update_user(session, user, username, status)

    async def update_permissions(self, session: Session, user: Ref, permissions: Any) -> None:
        await self._users.update_permissions(session, user, permissions)

    async def change_password(self, session: Session, user: Ref, current_password: str,
                              new_password: str) -> None:
        await self._users.change_password(session, user, current_password, new_password)

    async def login_user(self, session: Session, username: str, password: str) -> int:
        return await self._users.login_user(session, username, password)

    def logout_user(self, session: Session) -> None:
        self._users.logout_user(session)

    def get_personal_access_tokens(self, session: Session) -> list[PersonalAccessToken]:
        return self._tokens.get_personal_access_tokens(session)

    async def create_personal_access_token(self, session: Session, name: str,
                                           expiry: int) -> str:
        return await self._tokens.create_personal_access_token(session, name, expiry)

    async def delete_personal_access_token(self, session: Session, name: str) -> None:
        await self._tokens.delete_personal_access_token(session, name)

    def login_with_personal_access_token(self, session: Session, token: str) -> int:
        return self._tokens.login_with_personal_access_token(session, token)


class Groups:
    """A topic's named consumer groups (durable) and, through the membership the core was
    built with (a protocol's: ``GroupMembership``), who reads which partition."""

    def __init__(self, core: Core) -> None:
        self._groups = core.consumer_groups

    @property
    def membership(self) -> GroupMembership:
        return self._groups.membership

    def get_consumer_group(self, session: Session, stream: Ref, topic: Ref, group: Ref
                           ) -> Group:
        return self._groups.get_consumer_group(session, stream, topic, group)

    def get_consumer_groups(self, session: Session, stream: Ref, topic: Ref) -> list[Group]:
        return self._groups.get_consumer_groups(session, stream, topic)

    async def create_consumer_group(self, session: Session, stream: Ref, topic: Ref, name: str,
                                    group_id: int = 0) -> Group:
        return await self._groups.create_consumer_group(session, stream, topic, name, group_id)

    async def delete_consumer_group(self, session: Session, stream: Ref, topic: Ref,
                                    group: Ref) -> None:
        await self._groups.delete_consumer_group(session, stream, topic, group)

    def member_partition(self, session: Session, stream: Ref, topic: Ref, group: Ref,
                         partition_id: int, advance: bool) -> tuple[int, str]:
        """(the partition id a member of ``group`` reads, the name the group's positions are
        stored under): ``partition_id`` when it names one, else the one the membership deals
        it (``advance``: a read, which moves the member on; 0: it has none to read).
        READ_MESSAGES on the topic."""
        return self._groups.member_partition(session, stream, topic, group, partition_id,
                                             advance)


class ServerInfo:
    """The server's own state: its statistics, its clients, a diagnostic snapshot."""

    def __init__(self, core: Core) -> None:
        self._system, self._clients, self._snapshot = core.system, core.clients, core.snapshot

    def get_stats(self, session: Session) -> ServerStats:
        return self._system.get_stats(session)

    async def get_snapshot(self, session: Session, compression: Any, types: Any) -> bytes:
        return await self._snapshot.get_snapshot(session, compression, types)

    def get_me(self, session: Session) -> Session:
        return self._clients.get_me(session)

    def get_client(self, session: Session, client_id: int) -> Session:
        return self._clients.get_client(session, client_id)

    def get_clients(self, session: Session) -> list[Session]:
        return self._clients.get_clients(session)


class Staging:
    """Staged appends (rill extension, ``core.transactions``): records staged per producer
    and batch, committed or aborted as a whole."""

    def __init__(self, core: Core) -> None:
        self._transactions = core.transactions

    async def stage_messages(self, session: Session, stream: Ref, topic: Ref,
                             partition: int | PartitionChooser, producer_id: str, batch_id: int,
                             run_id: int, task_id: int, attempt_id: int,
                             positions: bytes | memoryview, records: bytes | memoryview,
                             owner: str = "") -> Any:
        return await self._transactions.stage_messages(
            session, stream, topic, partition, producer_id, batch_id, run_id, task_id,
            attempt_id, positions, records, owner)

    async def commit_staged_messages(self, session: Session, producer_id: str, batch_id: int,
                                     handles: Any, owner: str = "") -> Any:
        return await self._transactions.commit_staged_messages(session, producer_id, batch_id,
                                                               handles, owner)

    async def abort_staged_messages(self, session: Session, producer_id: str, batch_id: int,
                                    run_id: int, one_handle: bool, task_id: int,
                                    attempt_id: int, owner: str = "") -> None:
        await self._transactions.abort_staged_messages(session, producer_id, batch_id, run_id,
                                                       one_handle, task_id, attempt_id, owner)

    def get_producer_state(self, session: Session, producer_id: str) -> Any:
        return self._transactions.get_producer_state(session, producer_id)
