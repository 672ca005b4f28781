"""The HTTP JSON mapping (rill.protocol.iggy.http_json): both directions, for every command that has
an endpoint and every record an endpoint answers. The server's routes and the SDK's HTTP
transport both go through this one table, so these round trips cover both sides."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qsl, unquote, urlsplit

import pytest

from rill import errors
from rill.protocol.iggy import http_json
from rill.protocol.iggy.commands.groups import JoinConsumerGroup
from rill.protocol.iggy.commands.messages import PollMessages, SendMessages
from rill.protocol.iggy.commands.offsets import GetConsumerOffset, StoreConsumerOffset
from rill.protocol.iggy.commands.streams import CreateStream, GetStream
from rill.protocol.iggy.commands.system import GetMe
from rill.protocol.iggy.commands.topics import CreateTopic
from rill.protocol.iggy.headers import HeaderKind, HeaderValue
from rill.protocol.iggy.http_json import values
from rill.protocol.iggy.messages import Message, encode_messages
from rill.protocol.primitives import CompressionAlgorithm
from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning, PollingStrategy
from rill.protocol.iggy.responses.base import encode_records
from rill.protocol.iggy.responses.groups import ConsumerGroup, ConsumerGroupDetails, ConsumerOffsetInfo
from rill.protocol.iggy.responses.messages import PolledMessages
from rill.protocol.iggy.responses.streams import Stream, StreamDetails
from rill.protocol.iggy.responses.system import ClientInfo, ClientInfoDetails, Stats
from rill.protocol.iggy.responses.topics import Topic, TopicDetails
from rill.protocol.iggy.responses.users import (
    IdentityInfo, PersonalAccessTokenInfo, RawPersonalAccessToken, UserInfo, UserInfoDetails,
)

from .samples import COMMAND_SAMPLES, RECORD_SAMPLES

HTTP_COMMANDS = [
    command for command in COMMAND_SAMPLES
    if command.NAME in http_json.ENDPOINTS
    and not (getattr(command, "consumer", None) is not None and command.consumer.is_group)
]


def _route(request: http_json.HttpRequest) -> tuple[dict[str, str], dict[str, str]]:
    """What a server router sees: the path params (percent-decoded) and the query."""
    parts = urlsplit(request.target)
    pattern = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", request.path)
    match = re.fullmatch(pattern, parts.path)
    assert match, (request.path, parts.path)
    return {k: unquote(v) for k, v in match.groupdict().items()}, dict(parse_qsl(parts.query))


@pytest.mark.parametrize("command", HTTP_COMMANDS, ids=lambda c: type(c).__name__)
def test_command_to_http_and_back(command):
    request = http_json.encode_request(command)
    spec = http_json.ENDPOINTS[command.NAME]
    assert (request.method, request.path) == (spec.method, spec.path)
    body = json.loads(json.dumps(request.body))  # it is plain JSON
    path_params, query = _route(request)
    assert http_json.decode_request(command.NAME, path_params, query, body) == command


def test_every_command_but_three_has_an_endpoint():
    from rill.protocol.iggy.codes import COMMANDS, IGGY_CODES

    # rill's extension commands (docs/extensions.md) are binary-only
    missing = {COMMANDS[code].NAME for code in IGGY_CODES} - set(http_json.ENDPOINTS)
    assert missing == {"get_me", "join_consumer_group", "leave_consumer_group"}
    for name in missing:
        with pytest.raises(errors.FeatureUnavailable):
            http_json.endpoint(name)


@pytest.mark.parametrize("command", [
    GetMe(),
    JoinConsumerGroup(Identifier(1), Identifier(1), Identifier(1)),
    PollMessages(Consumer.group(1), Identifier(1), Identifier(1), 0, PollingStrategy.next(), 1, False),
    GetConsumerOffset(Consumer.group("g"), Identifier(1), Identifier(1), 0),
    StoreConsumerOffset(Consumer.group(2), Identifier(1), Identifier(1), 0, 1),
], ids=lambda c: type(c).__name__)
def test_commands_http_cannot_carry_are_feature_unavailable(command):
    with pytest.raises(errors.FeatureUnavailable) as caught:
        http_json.encode_request(command)
    assert "TCP" in caught.value.reason


def test_exact_shapes_of_a_few_requests():
    request = http_json.encode_request(
        SendMessages.of(1, "orders", Partitioning.partition_id(1),
                        [Message(b"hi", id=5, headers={"k": HeaderValue.string("v")})])
    )
    assert request.target == "/streams/1/topics/orders/messages"
    assert request.body == {
        "partitioning": {"kind": "partition_id", "value": "AQAAAA=="},
        "messages": [{"id": 5, "payload": "aGk=", "headers": {"k": {"kind": "string", "value": "dg=="}}}],
    }
    poll = http_json.encode_request(
        PollMessages(Consumer.regular(7), Identifier(1), Identifier(2), 3, PollingStrategy.offset(4), 5, True)
    )
    assert poll.target == (
        "/streams/1/topics/2/messages?id=7&kind=offset&value=4&count=5&auto_commit=true&partition_id=3"
    )
    create = http_json.encode_request(
        CreateTopic(Identifier(1), 0, 3, CompressionAlgorithm.GZIP, 0, 2**64 - 1, 0, "t")
    )
    assert create.body == {"name": "t", "compression_algorithm": "gzip", "message_expiry": 0,
                           "max_topic_size": 2**64 - 1, "partitions_count": 3}
    assert http_json.encode_request(GetStream(Identifier("a b/c"))).target == "/streams/a%20b%2Fc"


def test_query_defaults_and_digit_identifiers():
    poll = http_json.decode_request("poll_messages", {"stream_id": "1", "topic_id": "x"}, {}, None)
    assert poll == PollMessages(Consumer.regular(1), Identifier(1), Identifier("x"), 0,
                                PollingStrategy.offset(0), 10, False)
    named = http_json.decode_request("get_consumer_offset", {"stream_id": "s", "topic_id": "t"},
                                     {"id": "reader", "partition_id": "2"}, None)
    assert named.consumer == Consumer.regular("reader") and named.partition_id == 2


@pytest.mark.parametrize("name, path, query, body, field", [
    ("create_stream", {}, {}, {"name": "s", "extra": 1}, "extra"),
    ("create_stream", {}, {}, {"name": 5}, "name"),
    ("create_stream", {}, {}, {}, "name"),
    ("create_stream", {}, {}, [], "body"),
    ("create_topic", {"stream_id": "1"}, {}, {"name": "t", "partitions_count": "3"}, "partitions_count"),
    ("create_topic", {"stream_id": "1"}, {},
     {"name": "t", "partitions_count": 1, "compression_algorithm": "zip"}, "compression_algorithm"),
    ("send_messages", {"stream_id": "1", "topic_id": "1"}, {},
     {"partitioning": {"kind": "balanced", "value": ""}, "messages": [{"payload": "not base64!"}]},
     "messages[0].payload"),
    ("poll_messages", {"stream_id": "1", "topic_id": "1"}, {"count": "ten"}, None, "count"),
    ("poll_messages", {"stream_id": "1", "topic_id": "1"}, {"auto_commit": "yes"}, None, "auto_commit"),
    ("create_user", {}, {}, {"username": "u", "password": "p", "permissions": {"streams": {"x": {}}}},
     "permissions.streams"),
])
def test_malformed_requests_are_invalid_format_naming_the_field(name, path, query, body, field):
    with pytest.raises(errors.InvalidFormat) as caught:
        http_json.decode_request(name, path, query, body)
    assert caught.value.field == field
    assert caught.value.http_status == 400


def test_explicit_zero_ids_are_refused():
    with pytest.raises(errors.InvalidStreamId):
        http_json.decode_request("create_stream", {}, {}, {"stream_id": 0, "name": "s"})
    with pytest.raises(errors.InvalidReplicationFactor):
        http_json.decode_request("create_topic", {"stream_id": "1"}, {},
                                 {"name": "t", "partitions_count": 1, "replication_factor": 0})
    with pytest.raises(errors.InvalidConsumerGroupId):
        http_json.decode_request("create_consumer_group", {"stream_id": "1", "topic_id": "1"}, {},
                                 {"group_id": 0, "name": "g"})
    assert http_json.decode_request("create_stream", {}, {}, {"name": "s"}) == CreateStream(0, "s")


def _polled() -> PolledMessages:
    """Two stored messages in the exact poll layout, built through the JSON path itself."""
    data = {"partition_id": 3, "current_offset": 41, "messages": [
        {"offset": 40, "state": "available", "timestamp": 1_700_000_000_000_000, "id": 2**128 - 1,
         "checksum": 907060870, "headers": None, "payload": "aGVsbG8="},
        {"offset": 41, "state": "poisoned", "timestamp": 1_700_000_000_000_001, "id": 7, "checksum": 1,
         "headers": {"trace": {"kind": "string", "value": "YWJj"},
                     "n": {"kind": "int32", "value": "+////w=="}}, "payload": "eA=="},
    ]}
    return http_json.decode_result("poll_messages", data)


def test_polled_messages_round_trip_and_shape():
    polled = _polled()
    assert polled.count == 2
    first, second = polled.messages
    assert (first.offset, first.payload, first.id) == (40, b"hello", 2**128 - 1)
    assert second.state == 20 and second.headers["n"] == HeaderValue.int(HeaderKind.INT32, -5)
    data = json.loads(json.dumps(http_json.encode_result("poll_messages", polled)))
    assert data["messages"][0]["headers"] is None
    assert data["messages"][1]["state"] == "poisoned"
    assert http_json.decode_result("poll_messages", data) == polled


def test_polled_json_text_in_pieces_is_the_whole_json():
    from rill.protocol.iggy.http_json.records import polled_json, polled_json_text

    large = {"partition_id": 1, "current_offset": 0, "messages": [
        {"offset": 0, "state": "available", "timestamp": 1, "id": 1, "checksum": 1,
         "headers": None, "payload": values.b64(bytes(range(256)) * 800)}]}  # 200 KiB
    for polled in (_polled(), PolledMessages(1, 0, 0), http_json.decode_result("poll_messages", large)):
        pieces = list(polled_json_text(polled))
        assert "".join(pieces) == json.dumps(polled_json(polled), separators=(",", ":"),
                                             ensure_ascii=False)
        assert max(map(len, pieces)) <= 64 * 1024  # a large payload's Base64 in slices


RESULT_NAMES = {
    Stream: "get_streams", StreamDetails: "get_stream", Topic: "get_topics",
    TopicDetails: "get_topic", Stats: "get_stats", ClientInfo: "get_clients",
    ClientInfoDetails: "get_client", UserInfo: "get_users", UserInfoDetails: "get_user",
    IdentityInfo: "login_user", PersonalAccessTokenInfo: "get_personal_access_tokens",
    ConsumerGroup: "get_consumer_groups", ConsumerGroupDetails: "get_consumer_group",
    ConsumerOffsetInfo: "get_consumer_offset",
}
LISTS = {"get_streams", "get_topics", "get_clients", "get_users", "get_personal_access_tokens",
         "get_consumer_groups"}


@pytest.mark.parametrize("record", [r for r in RECORD_SAMPLES if type(r) in RESULT_NAMES],
                         ids=lambda r: type(r).__name__)
def test_record_to_json_and_back(record):
    name = RESULT_NAMES[type(record)]
    value = [record] if name in LISTS else record
    data = json.loads(json.dumps(http_json.encode_result(name, value)))
    back = http_json.decode_result(name, data)
    assert back == value
    # and the binary encoding of what came back is byte for byte the original's
    assert (encode_records(back) if name in LISTS else back.to_bytes()) == (
        encode_records(value) if name in LISTS else value.to_bytes())


def test_raw_token_and_identity_shapes():
    token = RawPersonalAccessToken("Zm9v" * 17).token
    assert http_json.encode_result("create_personal_access_token", token) == {"token": token}
    # the Core answers the record; the SDK's decode_response gives the text
    assert http_json.encode_result("create_personal_access_token",
                                   RawPersonalAccessToken(token)) == {"token": token}
    assert http_json.decode_result("create_personal_access_token", {"token": token}) == token
    assert http_json.encode_identity(1, "jwt", 99) == {
        "user_id": 1, "access_token": {"token": "jwt", "expiry": 99}}
    assert http_json.decode_result("login_user", http_json.encode_identity(1, "jwt", 99)) == IdentityInfo(1)


def test_json_conventions_of_records():
    stream = http_json.encode_result("get_streams", [Stream(1, 5, 0, 1234, 2, "s")])[0]
    assert stream == {"id": 1, "created_at": 5, "name": "s", "size": "1234 B", "messages_count": 2,
                      "topics_count": 0}
    client = http_json.encode_result("get_clients", [ClientInfo(9, 0, 2, "1.2.3.4:5", 0)])[0]
    assert client["user_id"] is None and client["transport"] == "QUIC"
    tokens = http_json.encode_result("get_personal_access_tokens", [PersonalAccessTokenInfo("t", 0)])
    assert tokens == [{"name": "t", "expiry_at": None}]


@pytest.mark.parametrize("text, size", [
    ("0 B", 0), ("1234 B", 1234), ("10 KB", 10_000), ("10 KiB", 10_240), ("1.5 MB", 1_500_000),
    ("3 GiB", 3 * 2**30), ("7", 7), (" 2 gb ", 2 * 10**9), (42, 42),
])
def test_byte_sizes_accept_any_unit(text, size):
    assert values.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "B", "12 parsecs", "-1 B", True, None])
def test_bad_byte_sizes(text):
    with pytest.raises(errors.InvalidFormat):
        values.parse_size(text)


def test_send_region_walk_matches_the_encoder():
    batch = [Message(b"a", 1), Message(b"bc", 0, {"h": HeaderValue.bool(True)})]
    assert list(values.iter_send_messages(encode_messages(batch))) == batch
