"""Sample values shared by the protocol tests: at least one instance of every command (the
table must cover ``codes.COMMANDS`` exactly) and of every response record."""

from __future__ import annotations

from rill.protocol.iggy.commands.groups import (
    CreateConsumerGroup,
    DeleteConsumerGroup,
    GetConsumerGroup,
    GetConsumerGroups,
    JoinConsumerGroup,
    LeaveConsumerGroup,
)
from rill.protocol.iggy.commands.columnar import PollMessagesColumnar, PollStoredBatches
from rill.protocol.iggy.commands.messages import FlushUnsavedBuffer, PollMessages, SendMessages
from rill.protocol.iggy.commands.long_poll import PollMessagesWaiting, WaitForMessages
from rill.protocol.iggy.commands.offsets import GetConsumerLag, GetConsumerOffset, StoreConsumerOffset
from rill.protocol.iggy.commands.partitions import CreatePartitions, DeletePartitions
from rill.protocol.iggy.commands.streams import (
    CreateStream,
    DeleteStream,
    GetStream,
    GetStreams,
    PurgeStream,
    UpdateStream,
)
from rill.protocol.iggy.commands.system import GetClient, GetClients, GetMe, GetSnapshot, GetStats, Ping
from rill.protocol.iggy.commands.tokens import (
    CreatePersonalAccessToken,
    DeletePersonalAccessToken,
    GetPersonalAccessTokens,
    LoginWithPersonalAccessToken,
)
from rill.protocol.iggy.commands.topics import (
    CreateTopic,
    CreateTopicWithFormat,
    DeleteTopic,
    GetTopic,
    GetTopicRecordFormats,
    GetTopics,
    PurgeTopic,
    UpdateTopic,
)
from rill.protocol.iggy.commands.transactions import (
    AbortStagedMessages,
    CommitStagedMessages,
    GetProducerState,
    StageMessages,
)
from rill.protocol.iggy.commands.users import (
    ChangePassword,
    CreateUser,
    DeleteUser,
    GetUser,
    GetUsers,
    LoginUser,
    LogoutUser,
    UnlockUser,
    UpdatePermissions,
    UpdateUser,
)
from rill.protocol.iggy.headers import HeaderKind, HeaderValue
from rill.protocol.iggy.messages import Message
from rill.protocol.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from rill.protocol.primitives import (
    CompressionAlgorithm,
    SnapshotCompression,
    SnapshotType,
    UserStatus,
)
from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning, PollingStrategy
from rill.protocol.iggy.responses.columnar import ColumnarMessages, StoredBatches
from rill.protocol.iggy.responses.transactions import (
    CommitOutcome,
    CommitResult,
    ProducerState,
    StagedHandle,
    StageOutcome,
    StageResult,
)
from rill.protocol.iggy.responses.groups import (
    ConsumerGroup,
    ConsumerGroupDetails,
    ConsumerGroupMember,
    ConsumerLag,
    ConsumerOffsetInfo,
)
from rill.protocol.iggy.responses.long_poll import PartitionEnd
from rill.protocol.iggy.responses.streams import Stream, StreamDetails
from rill.protocol.iggy.responses.system import ClientConsumerGroup, ClientInfo, ClientInfoDetails, Stats
from rill.protocol.iggy.responses.topics import Partition, Topic, TopicDetails, TopicRecordFormat
from rill.protocol.iggy.responses.users import (
    IdentityInfo,
    PersonalAccessTokenInfo,
    RawPersonalAccessToken,
    UserInfo,
    UserInfoDetails,
)

S1 = Identifier(1)
ORDERS = Identifier("orders")
GROUP = Identifier("workers")
USER = Identifier("alice")

NESTED_PERMISSIONS = Permissions(
    GlobalPermissions(read_servers=True, poll_messages=True),
    {
        1: StreamPermissions(read_stream=True, send_messages=True),
        7: StreamPermissions(
            manage_topics=True,
            topics={
                3: TopicPermissions(read_topic=True),
                9: TopicPermissions(manage_topic=True, send_messages=True),
            },
        ),
    },
)

COMMAND_SAMPLES = [
    Ping(),
    GetStats(),
    GetSnapshot(),
    GetSnapshot(SnapshotCompression.ZSTD, (SnapshotType.TEST,)),
    GetSnapshot(SnapshotCompression.STORED, ()),
    GetMe(),
    GetClient(42),
    GetClients(),
    GetUser(USER),
    GetUser(Identifier(2)),
    GetUsers(),
    CreateUser("alice", "secret", UserStatus.ACTIVE, None),
    CreateUser("bob", "pässword", UserStatus.INACTIVE, Permissions.root()),
    CreateUser("carol", "pw-carol", UserStatus.ACTIVE, NESTED_PERMISSIONS),
    DeleteUser(USER),
    UpdateUser(USER, None, None),
    UpdateUser(USER, "alice2", None),
    UpdateUser(Identifier(5), None, UserStatus.INACTIVE),
    UpdateUser(Identifier(5), "eve", UserStatus.ACTIVE),
    UpdatePermissions(USER, None),
    UpdatePermissions(USER, NESTED_PERMISSIONS),
    ChangePassword(USER, "old-one", "new-one"),
    LoginUser("iggy", "iggy", "0.6.63", None),
    LoginUser("iggy", "iggy"),
    LoginUser("iggy", "iggy", "0.6.63", "ctx"),
    LogoutUser(),
    GetPersonalAccessTokens(),
    CreatePersonalAccessToken("laptop", 3_600_000_000),
    CreatePersonalAccessToken("forever", 0xFFFF_FFFF_FFFF_FFFF),
    DeletePersonalAccessToken("laptop"),
    LoginWithPersonalAccessToken("A" * 67 + "="),
    PollMessages(Consumer.regular(7), S1, S1, 1, PollingStrategy.next(), 10, True),
    PollMessages(Consumer.group(GROUP), S1, ORDERS, 0, PollingStrategy.offset(99), 1000, False),
    SendMessages.of(S1, ORDERS, Partitioning.partition_id(1), [b"hello"]),
    SendMessages.of(
        "stream-a",
        2,
        Partitioning.messages_key("user-17"),
        [
            Message(b"one", id=12345, headers={"trace": HeaderValue.string("abc")}),
            Message(b"two", headers={"n": HeaderValue.int(HeaderKind.INT32, -5)}),
        ],
    ),
    SendMessages.of(S1, S1, Partitioning.balanced(), []),
    FlushUnsavedBuffer(S1, ORDERS, 1, True),
    GetConsumerOffset(Consumer.regular("reader"), S1, ORDERS, 1),
    StoreConsumerOffset(Consumer.group(3), S1, ORDERS, 2, 500),
    GetStream(S1),
    GetStreams(),
    CreateStream(0, "events"),
    CreateStream(1, "test"),
    DeleteStream(Identifier("events")),
    UpdateStream(S1, "renamed"),
    PurgeStream(Identifier("ab")),
    GetTopic(S1, ORDERS),
    GetTopics(S1),
    CreateTopic(S1, 0, 3, CompressionAlgorithm.NONE, 0, 0, 0, "orders"),
    CreateTopic(
        Identifier("events"), 5, 1000, CompressionAlgorithm.GZIP,
        0xFFFF_FFFF_FFFF_FFFF, 0xFFFF_FFFF_FFFF_FFFF, 3, "clicks",
    ),
    DeleteTopic(S1, ORDERS),
    UpdateTopic(S1, ORDERS, CompressionAlgorithm.GZIP, 60_000_000, 2_000_000_000, 1, "orders2"),
    PurgeTopic(S1, Identifier(2)),
    CreatePartitions(S1, ORDERS, 10),
    DeletePartitions(S1, ORDERS, 2),
    GetConsumerGroup(S1, ORDERS, GROUP),
    GetConsumerGroups(S1, ORDERS),
    CreateConsumerGroup(S1, ORDERS, 0, "workers"),
    CreateConsumerGroup(S1, ORDERS, 17, "cg-17"),
    DeleteConsumerGroup(S1, ORDERS, Identifier(17)),
    JoinConsumerGroup(S1, ORDERS, GROUP),
    LeaveConsumerGroup(S1, ORDERS, GROUP),
    # rill extensions (docs/extensions.md)
    PollMessagesColumnar(S1, ORDERS, 2, 1000, 65536, 16 << 20),
    PollMessagesColumnar(Identifier("events"), S1, 1, 0, 0),
    PollStoredBatches(S1, ORDERS, 2, 1000, 65536, 16 << 20),
    PollStoredBatches(Identifier("events"), S1, 1, 0, 0),
    StageMessages.of("query-1", 7, 42, 3, 2**63 + 5, S1, ORDERS, Partitioning.partition_id(2),
                     [Message(b"staged", id=98), Message(b"two", id=99)]),
    StageMessages.of("q", 0, 0, 0, 0, "events", 2, Partitioning.messages_key(b"k"), []),
    CommitStagedMessages("query-1", 7, (StagedHandle(3, 2**63 + 5, 2), StagedHandle(0, 1, 0))),
    CommitStagedMessages("job", 0, ()),
    AbortStagedMessages("query-1", 7),
    AbortStagedMessages("query-1", 7, 42),
    AbortStagedMessages("query-1", 7, 0, True, 3, 2**63 + 5),
    StageMessages.of("q", 1, 2, 3, 4, S1, ORDERS, Partitioning.balanced(), [Message(b"o", id=1)],
                     owner="spark query 5f0c"),
    CommitStagedMessages("job", 0, (StagedHandle(0, 1, 1),), "spark batch job"),
    AbortStagedMessages("query-1", 7, 42, owner="o"),
    AbortStagedMessages("query-1", 7, 0, True, 3, 5, "o" * 255),
    GetProducerState("query-1"),
    GetConsumerLag(Identifier.of(1), Identifier.of("orders")),
    CreateTopicWithFormat(S1, 0, 3, CompressionAlgorithm.NONE, 0, 0, 0, "orders", "kafka"),
    CreateTopicWithFormat(Identifier("events"), 5, 1, CompressionAlgorithm.GZIP, 60_000_000,
                          0xFFFF_FFFF_FFFF_FFFF, 3, "clicks", "iggy"),
    GetTopicRecordFormats(S1),
    UnlockUser(Identifier("bob")),
    UnlockUser(Identifier.of(7)),
    WaitForMessages(Identifier.of(1), Identifier.of("orders"), ((1, 0), (3, 41)), 500, 1024),
    PollMessagesWaiting(PollMessages(Consumer.regular(7), S1, S1, 1, PollingStrategy.next(), 10,
                                     True), 250),
    PollMessagesWaiting(PollMessages(Consumer.group(GROUP), S1, ORDERS, 0,
                                     PollingStrategy.offset(99), 1000, False), 0xFFFF_FFFF),
]

_TOPIC = Topic(2, 1_700_000_000_000_000, 2, 0xFFFF_FFFF_FFFF_FFFF, 1, 10**10, 1, 4096, 12, "orders")
_PARTITION = Partition(1, 1_700_000_000_000_001, 1, 11, 2048, 6)
_STREAM = Stream(1, 1_700_000_000_000_000, 1, 4096, 12, "events")

RECORD_SAMPLES = [
    _STREAM,
    StreamDetails(_STREAM, (_TOPIC,)),
    StreamDetails(Stream(2, 0, 0, 0, 0, "empty"), ()),
    _TOPIC,
    _PARTITION,
    TopicDetails(_TOPIC, (_PARTITION, Partition(2, 5, 0, 0, 0, 0))),
    TopicDetails(_TOPIC, ()),
    Stats(
        4242, 12.5, 50.25, 10_000_000, 16_000_000_000, 8_000_000_000, 3_000_000,
        1_700_000_000_000_000, 100, 200, 4096, 2, 3, 6, 6, 12, 5, 1,
        "host", "Linux", "6.1", "6.1.0-rill", "0.1.0",
    ),
    ClientInfo(7, 1, 1, "127.0.0.1:50000", 2),
    ClientInfoDetails.of(7, 1, 1, "127.0.0.1:50000", [ClientConsumerGroup(1, 2, 3), ClientConsumerGroup(1, 2, 4)]),
    ClientInfoDetails.of(8, 0, 2, "[::1]:1", []),
    UserInfo(1, 1_700_000_000_000_000, 1, "iggy"),
    UserInfoDetails(UserInfo(1, 5, 1, "iggy"), Permissions.root()),
    UserInfoDetails(UserInfo(2, 5, 2, "carol"), NESTED_PERMISSIONS),
    UserInfoDetails(UserInfo(3, 5, 1, "nobody"), None),
    IdentityInfo(1),
    PersonalAccessTokenInfo("laptop", 1_800_000_000_000_000),
    PersonalAccessTokenInfo("forever", 0),
    RawPersonalAccessToken("Zm9v" * 17),
    ConsumerGroup(1, 3, 2, "workers"),
    ConsumerGroupDetails(
        ConsumerGroup(1, 3, 2, "workers"),
        (ConsumerGroupMember(11, (1, 3)), ConsumerGroupMember(12, (2,))),
    ),
    ConsumerGroupDetails(ConsumerGroup(2, 3, 1, "idle"), (ConsumerGroupMember(13, ()),)),
    ConsumerGroupDetails(ConsumerGroup(3, 0, 0, "new"), ()),
    ConsumerOffsetInfo(1, 11, 5),
    ConsumerLag(2, 1, "workers", 3, 1, 6, 10, 3),
    ConsumerLag(1, 7, "", 1, 0, 0, 4, 4),
    PartitionEnd(3, 42, 1100),
    TopicRecordFormat(2, "kafka"),
    # rill extensions
    ColumnarMessages(3, 0, 12, 10, 2, 4000, bytes(range(16)),
                     (4000).to_bytes(4, "little") + (4050).to_bytes(4, "little")
                     + (4101).to_bytes(4, "little"), b"r" * 101),
    ColumnarMessages(1, 5, 5, 5, 0, 0, b"", bytes(4), b""),
    StoredBatches(2, 3, 40, "kafka", b"b" * 61),
    StoredBatches(1, 0, 0, "iggy", b""),
    StagedHandle(3, 2**64 - 1, 10),
    StageResult(StageOutcome.STAGED, 2, 10),
    StageResult(StageOutcome.ALREADY_COMMITTED, 0, 0),
    CommitResult(CommitOutcome.COMMITTED, 1_000_000),
    CommitResult(CommitOutcome.ALREADY_COMMITTED, 0),
    ProducerState(True, 41, 2, 300),
    ProducerState(False, 0, 0, 0),
]
