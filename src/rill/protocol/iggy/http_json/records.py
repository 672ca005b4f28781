"""Reply records of the HTTP JSON API (wire §4 records as §8.4 JSON), both directions.

Owns: record -> JSON object (the server's routes) and JSON object -> record (the SDK's HTTP
transport, which re-encodes the record as the binary OK payload). Every record of
``rill.protocol.iggy.responses`` that an endpoint answers has its pair here; polled messages are
rebuilt into exactly the poll region the binary reply carries. A poll's JSON text can also be
made in pieces, a message at a time (``polled_json_text``), for replies written as they go.

The JSON -> record readers trust the server's shapes: a missing key raises KeyError, which
the SDK reports as ``errors.InvalidJsonResponse``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import fields
from typing import Any, Iterator

from rill.protocol.iggy.headers import encode_header_map
from rill.protocol.iggy.http_json.values import (
    COMPRESSION,
    CONSUMER_KIND,
    MESSAGE_STATE,
    TRANSPORT,
    USER_STATUS,
    b64,
    format_size,
    headers_json,
    parse_size,
    permissions_json,
    read_b64,
    read_headers,
    read_permissions,
)
from rill.protocol.iggy.messages import POLLED_FIXED, PolledMessage, iter_polled_messages
from rill.protocol.iggy.responses.groups import (
    ConsumerGroup,
    ConsumerGroupDetails,
    ConsumerGroupMember,
    ConsumerLag,
    ConsumerOffsetInfo,
)
from rill.protocol.iggy.responses.messages import PolledMessages
from rill.protocol.iggy.responses.streams import Stream, StreamDetails
from rill.protocol.iggy.responses.system import ClientConsumerGroup, ClientInfo, ClientInfoDetails, Stats
from rill.protocol.iggy.responses.topics import Partition, Topic, TopicDetails, TopicRecordFormat
from rill.protocol.iggy.responses.users import PersonalAccessTokenInfo, UserInfo, UserInfoDetails

_U32 = struct.Struct("<I")


def stream_json(stream: Stream) -> dict[str, Any]:
    return {"id": stream.id, "created_at": stream.created_at, "name": stream.name,
            "size": format_size(stream.size_bytes), "messages_count": stream.messages_count,
            "topics_count": stream.topics_count}


def stream_from_json(data: dict[str, Any]) -> Stream:
    return Stream(data["id"], data["created_at"], data["topics_count"], parse_size(data["size"]),
                  data["messages_count"], data["name"])


def topic_json(topic: Topic) -> dict[str, Any]:
    return {"id": topic.id, "created_at": topic.created_at, "name": topic.name,
            "size": format_size(topic.size_bytes), "message_expiry": topic.message_expiry,
            "compression_algorithm": COMPRESSION.name(topic.compression_algorithm),
            "max_topic_size": topic.max_topic_size, "replication_factor": topic.replication_factor,
            "messages_count": topic.messages_count, "partitions_count": topic.partitions_count,
            "record_format": topic.record_format}


def topic_from_json(data: dict[str, Any]) -> Topic:
    return Topic(data["id"], data["created_at"], data["partitions_count"], data["message_expiry"],
                 COMPRESSION.value(data["compression_algorithm"], "compression_algorithm"),
                 data["max_topic_size"], data["replication_factor"], parse_size(data["size"]),
                 data["messages_count"], data["name"], data.get("record_format"))


def record_format_json(found: TopicRecordFormat) -> dict[str, Any]:
    return {"topic_id": found.topic_id, "record_format": found.record_format}


def record_format_from_json(data: dict[str, Any]) -> TopicRecordFormat:
    return TopicRecordFormat(data["topic_id"], data["record_format"])


def partition_json(partition: Partition) -> dict[str, Any]:
    return {"id": partition.id, "created_at": partition.created_at,
            "segments_count": partition.segments_count, "current_offset": partition.current_offset,
            "size": format_size(partition.size_bytes), "messages_count": partition.messages_count}


def partition_from_json(data: dict[str, Any]) -> Partition:
    return Partition(data["id"], data["created_at"], data["segments_count"], data["current_offset"],
                     parse_size(data["size"]), data["messages_count"])


def stream_details_json(details: StreamDetails) -> dict[str, Any]:
    return {**stream_json(details.stream), "topics": [topic_json(t) for t in details.topics]}


def stream_details_from_json(data: dict[str, Any]) -> StreamDetails:
    return StreamDetails(stream_from_json(data), tuple(topic_from_json(t) for t in data["topics"]))


def topic_details_json(details: TopicDetails) -> dict[str, Any]:
    return {**topic_json(details.topic), "partitions": [partition_json(p) for p in details.partitions]}


def topic_details_from_json(data: dict[str, Any]) -> TopicDetails:
    return TopicDetails(topic_from_json(data), tuple(partition_from_json(p) for p in data["partitions"]))


def group_json(group: ConsumerGroup) -> dict[str, Any]:
    return {"id": group.id, "name": group.name, "partitions_count": group.partitions_count,
            "members_count": group.members_count}


def group_from_json(data: dict[str, Any]) -> ConsumerGroup:
    return ConsumerGroup(data["id"], data["partitions_count"], data["members_count"], data["name"])


def group_details_json(details: ConsumerGroupDetails) -> dict[str, Any]:
    members = [{"id": m.id, "partitions_count": len(m.partitions), "partitions": list(m.partitions)}
               for m in details.members]
    return {**group_json(details.group), "members": members}


def group_details_from_json(data: dict[str, Any]) -> ConsumerGroupDetails:
    members = tuple(ConsumerGroupMember(m["id"], tuple(m["partitions"])) for m in data["members"])
    return ConsumerGroupDetails(group_from_json(data), members)


def offset_json(info: ConsumerOffsetInfo) -> dict[str, Any]:
    return {"partition_id": info.partition_id, "current_offset": info.current_offset,
            "stored_offset": info.stored_offset}


def offset_from_json(data: dict[str, Any]) -> ConsumerOffsetInfo:
    return ConsumerOffsetInfo(data["partition_id"], data["current_offset"], data["stored_offset"])


def lag_json(lag: ConsumerLag) -> dict[str, Any]:
    return {"consumer_kind": CONSUMER_KIND.name(lag.consumer_kind), "consumer_id": lag.consumer_id,
            "group_name": lag.group_name or None, "partition_id": lag.partition_id,
            "committed_offset": lag.committed_offset if lag.committed else None,
            "end_offset": lag.end_offset, "lag": lag.lag}


def lag_from_json(data: dict[str, Any]) -> ConsumerLag:
    committed = data["committed_offset"]
    return ConsumerLag(CONSUMER_KIND.value(data["consumer_kind"], "consumer_kind"), data["consumer_id"],
                       data["group_name"] or "", data["partition_id"], committed is not None,
                       committed or 0, data["end_offset"], data["lag"])


def user_json(user: UserInfo) -> dict[str, Any]:
    return {"id": user.id, "created_at": user.created_at, "status": USER_STATUS.name(user.status),
            "username": user.username}


def user_from_json(data: dict[str, Any]) -> UserInfo:
    return UserInfo(data["id"], data["created_at"], USER_STATUS.value(data["status"], "status"),
                    data["username"])


def user_details_json(details: UserInfoDetails) -> dict[str, Any]:
    return {**user_json(details.user), "permissions": permissions_json(details.permissions)}


def user_details_from_json(data: dict[str, Any]) -> UserInfoDetails:
    return UserInfoDetails(user_from_json(data), read_permissions(data["permissions"]))


def token_info_json(token: PersonalAccessTokenInfo) -> dict[str, Any]:
    return {"name": token.name, "expiry_at": token.expiry_at or None}  # 0 (never) is null


def token_info_from_json(data: dict[str, Any]) -> PersonalAccessTokenInfo:
    return PersonalAccessTokenInfo(data["name"], data["expiry_at"] or 0)


_SIZE_STATS = frozenset({"memory_usage", "total_memory", "available_memory", "read_bytes",
                         "written_bytes", "messages_size_bytes"})
_STATS_FIELDS = [field.name for field in fields(Stats)]


def stats_json(stats: Stats) -> dict[str, Any]:
    return {name: format_size(getattr(stats, name)) if name in _SIZE_STATS else getattr(stats, name)
            for name in _STATS_FIELDS}


def stats_from_json(data: dict[str, Any]) -> Stats:
    return Stats(*(parse_size(data[name], name) if name in _SIZE_STATS else data[name]
                   for name in _STATS_FIELDS if name in data or name != "server_version"))


def client_json(client: ClientInfo) -> dict[str, Any]:
    return {"client_id": client.client_id, "user_id": client.user_id or None,
            "address": client.address, "transport": TRANSPORT.name(client.transport),
            "consumer_groups_count": client.consumer_groups_count}


def client_from_json(data: dict[str, Any]) -> ClientInfo:
    return ClientInfo(data["client_id"], data["user_id"] or 0,
                      TRANSPORT.value(data["transport"], "transport"), data["address"],
                      data["consumer_groups_count"])


def client_details_json(details: ClientInfoDetails) -> dict[str, Any]:
    groups = [{"stream_id": g.stream_id, "topic_id": g.topic_id, "group_id": g.group_id}
              for g in details.consumer_groups]
    return {**client_json(details.client), "consumer_groups": groups}


def client_details_from_json(data: dict[str, Any]) -> ClientInfoDetails:
    groups = tuple(ClientConsumerGroup(g["stream_id"], g["topic_id"], g["group_id"])
                   for g in data["consumer_groups"])
    return ClientInfoDetails(client_from_json(data), groups)


def _message_json(m: PolledMessage) -> dict[str, Any]:
    return {"offset": m.offset, "state": MESSAGE_STATE.name(m.state), "timestamp": m.timestamp,
            "id": m.id, "checksum": m.checksum, "headers": headers_json(m.headers),
            "payload": b64(m.payload)}


def polled_json(polled: PolledMessages) -> dict[str, Any]:
    return {"partition_id": polled.partition_id, "current_offset": polled.current_offset,
            "messages": [_message_json(m) for m in polled.messages]}


_PAYLOAD_SLICE = 48 * 1024  # a multiple of 3: the Base64 of the slices joined is the whole's


def polled_json_text(polled: PolledMessages) -> Iterator[str]:
    """The compact JSON text of ``polled_json(polled)`` in pieces, a message (and a large
    payload's Base64 48 KiB of it) at a time, so the text of a large poll is never whole in
    memory: their concatenation is
    ``json.dumps(polled_json(polled), separators=(",", ":"), ensure_ascii=False)``."""
    yield (f'{{"partition_id":{polled.partition_id},"current_offset":{polled.current_offset},'
           f'"messages":[')
    separator = ""
    for message in iter_polled_messages(polled.raw, polled.count):
        fields = _message_json(message)
        del fields["payload"]  # the last field: its Base64 comes in slices
        yield separator + json.dumps(fields, separators=(",", ":"), ensure_ascii=False)[:-1]
        yield ',"payload":"'
        payload = message.payload
        for start in range(0, len(payload), _PAYLOAD_SLICE):
            yield b64(payload[start:start + _PAYLOAD_SLICE])
        yield '"}'
        separator = ","
    yield "]}"


def polled_from_json(data: dict[str, Any]) -> PolledMessages:
    """Rebuilds the poll region exactly as the binary reply carries it."""
    region = bytearray()
    for m in data["messages"]:
        headers = encode_header_map(read_headers(m.get("headers")))
        payload = read_b64(m["payload"], "payload")
        region += POLLED_FIXED.pack(m["offset"], MESSAGE_STATE.value(m["state"], "state"),
                                    m["timestamp"], m["id"].to_bytes(16, "little"), m["checksum"],
                                    len(headers))
        region += headers
        region += _U32.pack(len(payload))
        region += payload
    return PolledMessages(data["partition_id"], data["current_offset"], len(data["messages"]),
                          bytes(region))

