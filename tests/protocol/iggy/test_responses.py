"""Response records: exact layouts, round-trips of every record, and each command's
``decode_response`` (empty OK, lists, details, raw token, snapshot bytes)."""

from __future__ import annotations

import struct

import pytest

from rill.protocol.buffer import DecodeError, Reader
from rill.protocol.iggy.commands.groups import CreateConsumerGroup, GetConsumerGroup, GetConsumerGroups
from rill.protocol.iggy.commands.messages import PollMessages, SendMessages
from rill.protocol.iggy.commands.offsets import GetConsumerOffset, StoreConsumerOffset
from rill.protocol.iggy.commands.streams import CreateStream, GetStream, GetStreams
from rill.protocol.iggy.commands.system import GetClient, GetClients, GetMe, GetSnapshot, GetStats, Ping
from rill.protocol.iggy.commands.tokens import (
    CreatePersonalAccessToken,
    GetPersonalAccessTokens,
    LoginWithPersonalAccessToken,
)
from rill.protocol.iggy.commands.topics import CreateTopic, GetTopic, GetTopics
from rill.protocol.iggy.commands.users import CreateUser, GetUser, GetUsers, LoginUser
from rill.protocol.permissions import Permissions
from rill.protocol.iggy.responses.base import encode_records
from rill.protocol.iggy.responses.groups import (
    ConsumerGroup,
    ConsumerGroupDetails,
    ConsumerGroupMember,
    ConsumerOffsetInfo,
)
from rill.protocol.iggy.responses.messages import PolledMessages
from rill.protocol.iggy.responses.streams import Stream, StreamDetails
from rill.protocol.iggy.responses.system import STATS_FIXED_SIZE, ClientConsumerGroup, ClientInfo, ClientInfoDetails, Stats
from rill.protocol.iggy.responses.topics import Topic, TopicDetails
from rill.protocol.iggy.responses.users import (
    IdentityInfo,
    PersonalAccessTokenInfo,
    RawPersonalAccessToken,
    UserInfo,
    UserInfoDetails,
)

from rill.protocol.iggy.responses.columnar import StoredBatches

from .samples import RECORD_SAMPLES


@pytest.mark.parametrize("record", RECORD_SAMPLES, ids=lambda r: type(r).__name__)
def test_record_round_trip(record) -> None:
    data = record.to_bytes()
    reader = Reader(data)
    assert type(record).decode(reader) == record
    reader.expect_end()


def _decodable_prefixes(record) -> set[int]:
    """Prefix lengths that legitimately decode: details records whose items run to the end of
    the payload stop cleanly at an item boundary; "no permissions" may be the lone zero byte; stored batches' bytes run to the end."""
    if isinstance(record, (StreamDetails, TopicDetails, ConsumerGroupDetails)):
        header, items = {
            StreamDetails: lambda r: (r.stream, r.topics),
            TopicDetails: lambda r: (r.topic, r.partitions),
            ConsumerGroupDetails: lambda r: (r.group, r.members),
        }[type(record)](record)
        boundary = len(header.to_bytes())
        lengths = set()
        for item in items:
            lengths.add(boundary)
            boundary += len(item.to_bytes())
        return lengths
    if isinstance(record, UserInfoDetails) and record.permissions is None:
        return {len(record.to_bytes()) - 3}
    if isinstance(record, StoredBatches):  # the stored bytes run to the end, not parsed here
        prefix = len(record.prefix())
        return set(range(prefix, prefix + len(record.records) + 1))
    if isinstance(record, Stats):  # an Iggy server's answer ends before rill's server_version
        return {len(record.to_bytes()) - 4 - len(record.server_version)}
    return set()


@pytest.mark.parametrize("record", RECORD_SAMPLES, ids=lambda r: type(r).__name__)
def test_record_truncation_is_decode_error(record) -> None:
    data = record.to_bytes()
    allowed = _decodable_prefixes(record)
    for length in range(len(data)):
        reader = Reader(data[:length])
        if length in allowed:
            value = type(record).decode(reader)
            reader.expect_end()
            assert value.to_bytes() == data[:length] or isinstance(value, (UserInfoDetails, Stats))
        else:
            with pytest.raises(DecodeError):
                type(record).decode(reader)
                reader.expect_end()


def test_fixed_sizes() -> None:
    stats = next(r for r in RECORD_SAMPLES if type(r).__name__ == "Stats")
    strings = sum(4 + len(s.encode()) for s in (stats.hostname, stats.os_name, stats.os_version, stats.kernel_version, stats.server_version))
    assert len(stats.to_bytes()) == STATS_FIXED_SIZE + strings
    assert len(Stream(1, 2, 3, 4, 5, "").to_bytes()) == 33
    assert len(Topic(1, 2, 3, 4, 1, 5, 1, 6, 7, "").to_bytes()) == 51
    assert len(UserInfo(1, 2, 1, "").to_bytes()) == 14
    assert len(ConsumerGroup(1, 2, 3, "").to_bytes()) == 13
    assert len(ConsumerOffsetInfo(1, 2, 3).to_bytes()) == 20
    assert IdentityInfo(1).to_bytes() == b"\x01\x00\x00\x00"


def test_stats_layout_start() -> None:
    stats = next(r for r in RECORD_SAMPLES if type(r).__name__ == "Stats")
    data = stats.to_bytes()
    assert struct.unpack_from("<Iff", data) == (4242, 12.5, 50.25)
    assert data[STATS_FIXED_SIZE:STATS_FIXED_SIZE + 8] == b"\x04\x00\x00\x00host"
    assert data.endswith(b"\x05\x00\x00\x000.1.0")  # rill's server_version, after Iggy's last field


def test_stats_from_an_iggy_server_has_no_server_version() -> None:
    stats = next(r for r in RECORD_SAMPLES if type(r).__name__ == "Stats")
    iggy_answer = stats.to_bytes()[:-len(b"\x05\x00\x00\x000.1.0")]  # ends at kernel_version
    decoded = GetStats.decode_response(iggy_answer)
    assert decoded.kernel_version == "6.1.0-rill" and decoded.server_version == ""
    assert GetStats.decode_response(stats.to_bytes()) == stats


def test_client_info_layout() -> None:
    details = ClientInfoDetails.of(7, 1, 2, "1.2.3.4:5", [ClientConsumerGroup(1, 2, 3)])
    assert details.to_bytes() == (
        struct.pack("<IIB", 7, 1, 2) + struct.pack("<I", 9) + b"1.2.3.4:5" + struct.pack("<I", 1)
        + struct.pack("<III", 1, 2, 3)
    )
    with pytest.raises(ValueError):
        ClientInfoDetails(ClientInfo(7, 1, 1, "a", 2), (ClientConsumerGroup(1, 2, 3),))


def test_user_details_without_permissions_writes_four_zeros() -> None:
    details = UserInfoDetails(UserInfo(3, 5, 1, "bob"), None)
    data = details.to_bytes()
    assert data.endswith(b"\x00\x00\x00\x00") and len(data) == 14 + 3 + 4
    # readers look only at the first byte
    assert UserInfoDetails.decode(Reader(data[:-3])) == details
    with pytest.raises(DecodeError):
        UserInfoDetails.decode(Reader(data[:-4] + b"\x02\x00\x00\x00"))


def test_user_details_with_permissions_layout() -> None:
    details = UserInfoDetails(UserInfo(1, 5, 1, "iggy"), Permissions.root())
    tail = details.to_bytes()[14 + 4:]
    assert tail == b"\x01" + struct.pack("<I", 11) + b"\x01" * 10 + b"\x00"


def test_group_member_count_bounds() -> None:
    data = ConsumerGroup(1, 1, 1, "g").to_bytes() + struct.pack("<II", 5, 0xFFFFFFFF)
    with pytest.raises(DecodeError):
        ConsumerGroupDetails.decode(Reader(data))
    assert ConsumerGroupMember(1, [2, 3]).partitions == (2, 3)


# ---------------------------------------------------------------- decode_response per command

STREAM = Stream(1, 2, 0, 0, 0, "s")
TOPIC = Topic(1, 2, 0, 3, 1, 4, 1, 0, 0, "t")


def test_empty_ok_responses() -> None:
    for command in (Ping, StoreConsumerOffset, SendMessages):
        assert command.decode_response(b"") is None
    for command in (GetStream, GetTopic, GetConsumerGroup, GetUser, GetClient, GetConsumerOffset):
        assert command.decode_response(b"") is None


def test_get_single_responses() -> None:
    details = StreamDetails(STREAM, (TOPIC,))
    assert GetStream.decode_response(details.to_bytes()) == details
    topic_details = TopicDetails(TOPIC, ())
    assert GetTopic.decode_response(topic_details.to_bytes()) == topic_details
    offset = ConsumerOffsetInfo(1, 10, 4)
    assert GetConsumerOffset.decode_response(offset.to_bytes()) == offset
    group = ConsumerGroupDetails(ConsumerGroup(1, 1, 1, "g"), (ConsumerGroupMember(9, (1,)),))
    assert GetConsumerGroup.decode_response(group.to_bytes()) == group
    user = UserInfoDetails(UserInfo(1, 2, 1, "iggy"), Permissions.root())
    assert GetUser.decode_response(user.to_bytes()) == user
    client = ClientInfoDetails.of(1, 1, 1, "a:1")
    assert GetClient.decode_response(client.to_bytes()) == client
    assert GetMe.decode_response(client.to_bytes()) == client
    with pytest.raises(DecodeError):
        GetConsumerOffset.decode_response(offset.to_bytes() + b"\x00")


def test_list_responses() -> None:
    assert GetStreams.decode_response(encode_records([STREAM, STREAM])) == [STREAM, STREAM]
    assert GetStreams.decode_response(b"") == []
    assert GetTopics.decode_response(encode_records((TOPIC,))) == [TOPIC]
    groups = [ConsumerGroup(1, 2, 0, "a"), ConsumerGroup(2, 2, 1, "b")]
    assert GetConsumerGroups.decode_response(encode_records(groups)) == groups
    users = [UserInfo(1, 2, 1, "iggy"), UserInfo(2, 3, 2, "bob")]
    assert GetUsers.decode_response(encode_records(users)) == users
    clients = [ClientInfo(1, 0, 1, "a:1", 0), ClientInfo(2, 1, 2, "b:2", 3)]
    assert GetClients.decode_response(encode_records(clients)) == clients
    tokens = [PersonalAccessTokenInfo("a", 0), PersonalAccessTokenInfo("b", 99)]
    assert GetPersonalAccessTokens.decode_response(encode_records(tokens)) == tokens
    with pytest.raises(DecodeError):
        GetStreams.decode_response(STREAM.to_bytes()[:-1])


def test_create_and_login_responses() -> None:
    details = StreamDetails(STREAM, ())
    assert CreateStream.decode_response(details.to_bytes()) == details
    topic_details = TopicDetails(TOPIC, ())
    assert CreateTopic.decode_response(topic_details.to_bytes()) == topic_details
    group = ConsumerGroupDetails(ConsumerGroup(1, 0, 0, "g"), ())
    assert CreateConsumerGroup.decode_response(group.to_bytes()) == group
    user = UserInfoDetails(UserInfo(2, 3, 1, "bob"), None)
    assert CreateUser.decode_response(user.to_bytes()) == user
    assert LoginUser.decode_response(IdentityInfo(5).to_bytes()) == IdentityInfo(5)
    assert LoginWithPersonalAccessToken.decode_response(b"\x07\x00\x00\x00").user_id == 7
    token = "Zm9v" * 17
    raw = RawPersonalAccessToken(token).to_bytes()
    assert raw[0] == len(token)
    assert CreatePersonalAccessToken.decode_response(raw) == token
    for empty_is_error in (CreateStream, LoginUser, CreatePersonalAccessToken, GetStats):
        with pytest.raises(DecodeError):
            empty_is_error.decode_response(b"")


def test_snapshot_response_is_raw_bytes() -> None:
    archive = b"PK\x05\x06" + b"\x00" * 18
    assert GetSnapshot.decode_response(memoryview(archive)) == archive
    assert isinstance(GetSnapshot.decode_response(memoryview(archive)), bytes)


def test_poll_response() -> None:
    empty = PolledMessages(1, 0, 0)
    assert len(empty.prefix()) == 16
    decoded = PollMessages.decode_response(empty.prefix())
    assert (decoded.partition_id, decoded.current_offset, decoded.count, decoded.messages) == (1, 0, 0, [])
    with pytest.raises(DecodeError):
        PollMessages.decode_response(b"\x00" * 15)
