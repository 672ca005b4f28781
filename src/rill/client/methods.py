"""One friendly coroutine per protocol command, named exactly as the command's ``NAME``.

Owns: ``CommandMethods``, the mixin ``AsyncClient`` inherits. Each method only turns friendly
Python arguments into the command dataclass (ids as ``int | str | Identifier``, consumers as
``Consumer | int | str``, ``None`` partition = "not given") and hands it to ``self.execute``;
the result is whatever ``Command.decode_response`` returns (``None`` for empty OKs and for
get-single commands that found nothing). The blocking facade wraps these same methods.

Invariant: no method talks to a transport; ``execute`` is the single path of every request.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from rill.protocol.iggy.commands import (
    groups,
    offsets,
    partitions,
    streams,
    system,
    tokens,
    topics,
    users,
)
from rill.client.extensions import (
    ConsumerLike,
    ExtensionMethods,
    compression_algorithm,
    poll_command,
)
from rill.client.link import SDK_VERSION
from rill.protocol.iggy.commands.messages import FlushUnsavedBuffer, SendMessages
from rill.protocol.iggy.messages import Message
from rill.protocol.permissions import Permissions
from rill.protocol.primitives import (
    CompressionAlgorithm,
    SnapshotCompression,
    SnapshotType,
    UserStatus,
)
from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning, PollingStrategy
from rill.protocol.iggy.responses.groups import ConsumerGroup, ConsumerGroupDetails, ConsumerOffsetInfo
from rill.protocol.iggy.responses.messages import PolledMessages
from rill.protocol.iggy.responses.streams import Stream, StreamDetails
from rill.protocol.iggy.responses.system import ClientInfo, ClientInfoDetails, Stats
from rill.protocol.iggy.responses.topics import Topic, TopicDetails
from rill.protocol.iggy.responses.users import IdentityInfo, PersonalAccessTokenInfo, UserInfo, UserInfoDetails

Id = int | str | Identifier



def _id(value: Id) -> Identifier:
    return Identifier.of(value)


def _consumer(value: ConsumerLike) -> Consumer:
    return value if isinstance(value, Consumer) else Consumer.regular(value)


def _partition(partition_id: int | None) -> int:
    return 0 if partition_id is None else partition_id


def _partitioning(value: Partitioning | int | None) -> Partitioning:
    """None = balanced; an int is an explicit partition id."""
    if value is None:
        return Partitioning.balanced()
    if isinstance(value, Partitioning):
        return value
    return Partitioning.partition_id(value)


def _message(value: Message | bytes | bytearray | memoryview | str) -> Message | bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


class CommandMethods(ExtensionMethods):
    """The 44 command methods (+ ``send_messages_raw``), and rill's extension commands from
    ``ExtensionMethods``; subclasses provide ``execute``."""

    # ``execute`` comes from ExtensionMethods' declaration; AsyncClient defines it.

    # --- system --------------------------------------------------------------------------------

    async def ping(self) -> None:
        """PING the server (also refreshes the session's heartbeat)."""
        await self.execute(system.Ping())

    async def get_stats(self) -> Stats:
        """Server statistics (allowed without login)."""
        return await self.execute(system.GetStats())

    async def get_snapshot(
        self,
        compression: SnapshotCompression = SnapshotCompression.DEFLATED,
        types: Sequence[SnapshotType] = system.DEFAULT_SNAPSHOT_TYPES,
    ) -> bytes:
        """A diagnostic snapshot: the raw bytes of a ZIP archive."""
        return await self.execute(system.GetSnapshot(compression, tuple(types)))

    async def get_me(self) -> ClientInfoDetails:
        """This connection's own client record."""
        return await self.execute(system.GetMe())

    async def get_client(self, client_id: int) -> ClientInfoDetails | None:
        """One connected client, or None when it does not exist (or is not visible)."""
        return await self.execute(system.GetClient(client_id))

    async def get_clients(self) -> list[ClientInfo]:
        """Every connected client."""
        return await self.execute(system.GetClients())

    # --- users and sessions --------------------------------------------------------------------

    async def get_user(self, user_id: Id) -> UserInfoDetails | None:
        """One user with permissions, or None when not found."""
        return await self.execute(users.GetUser(_id(user_id)))

    async def get_users(self) -> list[UserInfo]:
        """Every user."""
        return await self.execute(users.GetUsers())

    async def create_user(
        self,
        username: str,
        password: str,
        status: UserStatus = UserStatus.ACTIVE,
        permissions: Permissions | None = None,
    ) -> UserInfoDetails:
        """Create a user; returns its details."""
        return await self.execute(users.CreateUser(username, password, UserStatus(status), permissions))

    async def delete_user(self, user_id: Id) -> None:
        """Delete a user (the root user cannot be deleted)."""
        await self.execute(users.DeleteUser(_id(user_id)))

    async def update_user(
        self, user_id: Id, username: str | None = None, status: UserStatus | None = None
    ) -> None:
        """Rename a user and/or change its status; None leaves a field unchanged."""
        status = None if status is None else UserStatus(status)
        await self.execute(users.UpdateUser(_id(user_id), username, status))

    async def update_permissions(self, user_id: Id, permissions: Permissions | None = None) -> None:
        """Replace a user's permissions (None = no permissions)."""
        await self.execute(users.UpdatePermissions(_id(user_id), permissions))

    async def change_password(self, user_id: Id, current_password: str, new_password: str) -> None:
        """Change a password (someone else's needs manage_users)."""
        await self.execute(users.ChangePassword(_id(user_id), current_password, new_password))

    async def login_user(
        self, username: str, password: str, version: str | None = SDK_VERSION, context: str | None = None
    ) -> IdentityInfo:
        """Log in; the credentials are remembered and replayed after a reconnect."""
        return await self.execute(users.LoginUser(username, password, version, context))

    async def logout_user(self) -> None:
        """Log out; the remembered credentials are forgotten."""
        await self.execute(users.LogoutUser())

    # --- personal access tokens ----------------------------------------------------------------

    async def get_personal_access_tokens(self) -> list[PersonalAccessTokenInfo]:
        """The caller's tokens (names and expiry, never the secret)."""
        return await self.execute(tokens.GetPersonalAccessTokens())

    async def create_personal_access_token(self, name: str, expiry: int = 0) -> str:
        """Create a token; returns the raw token (expiry in µs; 0 = server default)."""
        return await self.execute(tokens.CreatePersonalAccessToken(name, expiry))

    async def delete_personal_access_token(self, name: str) -> None:
        """Delete one of the caller's tokens by name."""
        await self.execute(tokens.DeletePersonalAccessToken(name))

    async def login_with_personal_access_token(self, token: str) -> IdentityInfo:
        """Log in with a token; it is remembered and replayed after a reconnect."""
        return await self.execute(tokens.LoginWithPersonalAccessToken(token))

    # --- messages ------------------------------------------------------------------------------

    async def poll_messages(
        self,
        stream_id: Id,
        topic_id: Id,
        consumer: ConsumerLike = 1,
        partition_id: int | None = None,
        strategy: PollingStrategy = PollingStrategy.next(),
        count: int = 100,
        auto_commit: bool = False,
    ) -> PolledMessages:
        """Poll up to ``count`` messages; ``consumer`` may be a Consumer or a regular id."""
        return await self.execute(poll_command(stream_id, topic_id, consumer, partition_id,
                                               strategy, count, auto_commit))

    async def send_messages(
        self,
        stream_id: Id,
        topic_id: Id,
        messages: Iterable[Message | bytes | str],
        partitioning: Partitioning | int | None = None,
    ) -> None:
        """Send a batch; str/bytes items are payloads with id 0 (server-assigned UUIDv7).

        ``partitioning`` defaults to balanced; an int is an explicit partition id.
        """
        batch = [_message(message) for message in messages]
        await self.execute(
            SendMessages.of(stream_id, topic_id, _partitioning(partitioning), batch)
        )

    async def send_messages_raw(
        self,
        stream_id: Id,
        topic_id: Id,
        partitioning: Partitioning | int | None,
        region: bytes | bytearray | memoryview,
    ) -> None:
        """Send a pre-encoded SEND region (messages back to back) as is, e.g. for benchmarks."""
        await self.execute(
            SendMessages(_id(stream_id), _id(topic_id), _partitioning(partitioning), region)
        )

    async def flush_unsaved_buffer(
        self, stream_id: Id, topic_id: Id, partition_id: int, fsync: bool = False
    ) -> None:
        """Write a partition's buffered messages to disk."""
        await self.execute(FlushUnsavedBuffer(_id(stream_id), _id(topic_id), partition_id, fsync))

    # --- consumer offsets ----------------------------------------------------------------------

    async def get_consumer_offset(
        self, stream_id: Id, topic_id: Id, consumer: ConsumerLike = 1, partition_id: int | None = None
    ) -> ConsumerOffsetInfo | None:
        """A consumer's (or group's) offset in a partition. A consumer that never stored one
        reads ``stored_offset`` 0, as from Iggy 0.4.95 (``get_consumer_lag`` rows carry
        ``committed`` to tell the two apart on a rill server). None: the server answered
        nothing (unknown stream, topic or partition, or no permission to read it)."""
        return await self.execute(
            offsets.GetConsumerOffset(
                _consumer(consumer), _id(stream_id), _id(topic_id), _partition(partition_id)
            )
        )

    async def store_consumer_offset(
        self,
        stream_id: Id,
        topic_id: Id,
        offset: int,
        consumer: ConsumerLike = 1,
        partition_id: int | None = None,
    ) -> None:
        """Store a consumer's offset."""
        await self.execute(
            offsets.StoreConsumerOffset(
                _consumer(consumer), _id(stream_id), _id(topic_id), _partition(partition_id), offset
            )
        )

    # --- streams -------------------------------------------------------------------------------

    async def get_stream(self, stream_id: Id) -> StreamDetails | None:
        """One stream with its topics, or None when not found."""
        return await self.execute(streams.GetStream(_id(stream_id)))

    async def get_streams(self) -> list[Stream]:
        """Every stream."""
        return await self.execute(streams.GetStreams())

    async def create_stream(self, name: str, stream_id: int = 0) -> StreamDetails:
        """Create a stream (``stream_id`` 0 = let the server choose)."""
        return await self.execute(streams.CreateStream(stream_id, name))

    async def delete_stream(self, stream_id: Id) -> None:
        """Delete a stream with all its topics and messages."""
        await self.execute(streams.DeleteStream(_id(stream_id)))

    async def update_stream(self, stream_id: Id, name: str) -> None:
        """Rename a stream."""
        await self.execute(streams.UpdateStream(_id(stream_id), name))

    async def purge_stream(self, stream_id: Id) -> None:
        """Delete every message of every topic of a stream."""
        await self.execute(streams.PurgeStream(_id(stream_id)))

    # --- topics --------------------------------------------------------------------------------

    async def get_topic(self, stream_id: Id, topic_id: Id) -> TopicDetails | None:
        """One topic with its partitions, or None when not found."""
        return await self.execute(topics.GetTopic(_id(stream_id), _id(topic_id)))

    async def get_topics(self, stream_id: Id) -> list[Topic]:
        """Every topic of a stream."""
        return await self.execute(topics.GetTopics(_id(stream_id)))

    async def create_topic(
        self,
        stream_id: Id,
        name: str,
        partitions_count: int = 1,
        compression: CompressionAlgorithm | int | str = CompressionAlgorithm.NONE,
        message_expiry: int = 0,
        max_topic_size: int = 0,
        replication_factor: int = 0,
        topic_id: int = 0,
        record_format: str | None = None,
    ) -> TopicDetails:
        """Create a topic (expiry in µs and size in bytes: 0 = server default, 2**64-1 = never
        / unlimited; ``topic_id`` 0 = let the server choose). ``record_format``: how it stores
        records, ``"iggy"`` (the server's default) or ``"kafka"`` (Kafka's RecordBatch v2); when
        given it is sent as rill's CREATE_TOPIC_WITH_FORMAT (1040), which Iggy servers refuse;
        another name raises ``errors.InvalidFormat`` before anything is sent."""
        if record_format is not None:
            return await self.create_topic_with_format(
                stream_id, name, record_format, partitions_count, compression, message_expiry,
                max_topic_size, replication_factor, topic_id)
        return await self.execute(
            topics.CreateTopic(
                _id(stream_id), topic_id, partitions_count, compression_algorithm(compression),
                message_expiry, max_topic_size, replication_factor, name,
            )
        )

    async def delete_topic(self, stream_id: Id, topic_id: Id) -> None:
        """Delete a topic with its partitions and messages."""
        await self.execute(topics.DeleteTopic(_id(stream_id), _id(topic_id)))

    async def update_topic(
        self,
        stream_id: Id,
        topic_id: Id,
        name: str,
        compression: CompressionAlgorithm | int | str = CompressionAlgorithm.NONE,
        message_expiry: int = 0,
        max_topic_size: int = 0,
        replication_factor: int = 0,
    ) -> None:
        """Change a topic's name and settings (same meaning of 0 as in create_topic)."""
        await self.execute(
            topics.UpdateTopic(
                _id(stream_id), _id(topic_id), compression_algorithm(compression),
                message_expiry, max_topic_size, replication_factor, name,
            )
        )

    async def purge_topic(self, stream_id: Id, topic_id: Id) -> None:
        """Delete every message of a topic."""
        await self.execute(topics.PurgeTopic(_id(stream_id), _id(topic_id)))

    # --- partitions ----------------------------------------------------------------------------

    async def create_partitions(self, stream_id: Id, topic_id: Id, partitions_count: int = 1) -> None:
        """Append ``partitions_count`` partitions to a topic."""
        await self.execute(partitions.CreatePartitions(_id(stream_id), _id(topic_id), partitions_count))

    async def delete_partitions(self, stream_id: Id, topic_id: Id, partitions_count: int = 1) -> None:
        """Remove the ``partitions_count`` highest-numbered partitions with their data."""
        await self.execute(partitions.DeletePartitions(_id(stream_id), _id(topic_id), partitions_count))

    # --- consumer groups -----------------------------------------------------------------------

    async def get_consumer_group(
        self, stream_id: Id, topic_id: Id, group_id: Id
    ) -> ConsumerGroupDetails | None:
        """One consumer group with its members, or None when not found."""
        return await self.execute(groups.GetConsumerGroup(_id(stream_id), _id(topic_id), _id(group_id)))

    async def get_consumer_groups(self, stream_id: Id, topic_id: Id) -> list[ConsumerGroup]:
        """Every consumer group of a topic."""
        return await self.execute(groups.GetConsumerGroups(_id(stream_id), _id(topic_id)))

    async def create_consumer_group(
        self, stream_id: Id, topic_id: Id, name: str, group_id: int = 0
    ) -> ConsumerGroupDetails:
        """Create a consumer group (``group_id`` 0 = let the server choose)."""
        return await self.execute(groups.CreateConsumerGroup(_id(stream_id), _id(topic_id), group_id, name))

    async def delete_consumer_group(self, stream_id: Id, topic_id: Id, group_id: Id) -> None:
        """Delete a consumer group and its stored offsets."""
        await self.execute(groups.DeleteConsumerGroup(_id(stream_id), _id(topic_id), _id(group_id)))

    async def join_consumer_group(self, stream_id: Id, topic_id: Id, group_id: Id) -> None:
        """Make this connection a member of a consumer group."""
        await self.execute(groups.JoinConsumerGroup(_id(stream_id), _id(topic_id), _id(group_id)))

    async def leave_consumer_group(self, stream_id: Id, topic_id: Id, group_id: Id) -> None:
        """Leave a consumer group."""
        await self.execute(groups.LeaveConsumerGroup(_id(stream_id), _id(topic_id), _id(group_id)))

