"""Request bodies and queries of the HTTP JSON API that need more than one line (wire §8.4).

Owns: for the commands with structured bodies or queries (users, topics, messages, offsets,
snapshot, ...), command -> JSON body / query (``*_body``, ``*_query``: the SDK side) and
path params + query + JSON body -> command (the server side). The endpoint table in
``rill.protocol.iggy.http_json`` wires them up; one-liners live in the table itself.
"""

from __future__ import annotations

from typing import Any

from rill import errors
from rill.protocol.iggy.commands import groups as g
from rill.protocol.iggy.commands import messages as m
from rill.protocol.iggy.commands import offsets as o
from rill.protocol.iggy.commands import streams as s
from rill.protocol.iggy.commands import system as sy
from rill.protocol.iggy.commands import tokens as tk
from rill.protocol.iggy.commands import topics as t
from rill.protocol.iggy.commands import users as u
from rill.protocol.iggy.commands.system import DEFAULT_SNAPSHOT_TYPES
from rill.protocol.iggy.http_json import values as v
from rill.protocol.iggy.messages import Message, encode_messages
from rill.protocol.primitives import (
    CompressionAlgorithm,
    SnapshotCompression,
    SnapshotType,
    UserStatus,
)
from rill.protocol.iggy.primitives import (
    Identifier,
    Partitioning,
    PartitioningKind,
    PollingKind,
    PollingStrategy,
)

Params = v.Params


def ids(command: Any, *names: str) -> dict[str, str]:
    """Path params from a command's Identifier fields."""
    return {name: v.ident_text(getattr(command, name)) for name in names}


def path_ids(params: Params, *names: str) -> list[Identifier]:
    return [v.read_identifier(params.get(name, ""), name) for name in names]


def create_user(b: Any) -> u.CreateUser:
    d = v.body(b, ("username", "password"), ("status", "permissions"))
    status = v.USER_STATUS.value(d.get("status", "active"), "status")
    return u.CreateUser(v.read_str(d["username"], "username"), v.read_str(d["password"], "password"),
                        UserStatus(status), v.read_permissions(d.get("permissions")))


def update_user(params: Params, b: Any) -> u.UpdateUser:
    d = v.body(b, (), ("username", "status"))
    username = None if d.get("username") is None else v.read_str(d["username"], "username")
    status = None if d.get("status") is None else UserStatus(v.USER_STATUS.value(d["status"], "status"))
    return u.UpdateUser(*path_ids(params, "user_id"), username, status)


def login(b: Any) -> u.LoginUser:
    d = v.body(b, ("username", "password"), ("version", "context"))
    extra = [None if d.get(k) is None else v.read_str(d[k], k) for k in ("version", "context")]
    return u.LoginUser(v.read_str(d["username"], "username"), v.read_str(d["password"], "password"), *extra)


def topic_settings(d: dict[str, Any]) -> tuple[CompressionAlgorithm, int, int, int]:
    replication = d.get("replication_factor")
    if replication is not None and v.read_int(replication, "replication_factor", v.U8_MAX) == 0:
        raise errors.InvalidReplicationFactor(field="replication_factor")
    return (CompressionAlgorithm(v.COMPRESSION.value(d.get("compression_algorithm", "none"),
                                                       "compression_algorithm")),
            v.read_int(d.get("message_expiry", 0), "message_expiry"),
            v.read_int(d.get("max_topic_size", 0), "max_topic_size"), replication or 0)


TOPIC_OPTIONAL = ("compression_algorithm", "message_expiry", "max_topic_size", "replication_factor")


def topic_body(c: Any) -> dict[str, Any]:
    data = {"name": c.name, "compression_algorithm": v.COMPRESSION.name(c.compression_algorithm),
            "message_expiry": c.message_expiry, "max_topic_size": c.max_topic_size}
    if c.replication_factor:
        data["replication_factor"] = c.replication_factor
    return data


def create_topic(params: Params, b: Any) -> t.CreateTopic | t.CreateTopicWithFormat:
    """CREATE_TOPIC, or CREATE_TOPIC_WITH_FORMAT when the body names a ``record_format``."""
    d = v.body(b, ("name", "partitions_count"), ("topic_id", "record_format") + TOPIC_OPTIONAL)
    compression, expiry, max_size, replication = topic_settings(d)
    fields = (*path_ids(params, "stream_id"), v.optional_id(d, "topic_id", errors.InvalidTopicId),
              v.read_int(d["partitions_count"], "partitions_count", v.U32_MAX),
              compression, expiry, max_size, replication, v.read_str(d["name"], "name"))
    if "record_format" not in d:
        return t.CreateTopic(*fields)
    record_format = v.read_str(d["record_format"], "record_format")
    t.record_format_stored(record_format)  # a bad name: InvalidFormat naming the choices
    return t.CreateTopicWithFormat(*fields, record_format)


def update_topic(params: Params, b: Any) -> t.UpdateTopic:
    d = v.body(b, ("name",), TOPIC_OPTIONAL)
    compression, expiry, max_size, replication = topic_settings(d)
    return t.UpdateTopic(*path_ids(params, "stream_id", "topic_id"), compression, expiry, max_size,
                         replication, v.read_str(d["name"], "name"))


def send_body(c: m.SendMessages) -> dict[str, Any]:
    messages = []
    for message in v.iter_send_messages(c.messages):
        item: dict[str, Any] = {"id": message.id, "payload": v.b64(message.payload)}
        if message.headers:
            item["headers"] = v.headers_json(message.headers)
        messages.append(item)
    partitioning = {"kind": v.PARTITIONING.name(c.partitioning.kind),
                    "value": v.b64(c.partitioning.value)}
    return {"partitioning": partitioning, "messages": messages}


def send(params: Params, b: Any) -> m.SendMessages:
    d = v.body(b, ("partitioning", "messages"))
    part = v.read_object(d["partitioning"], "partitioning", frozenset({"kind", "value"}))
    kind = PartitioningKind(v.PARTITIONING.value(part.get("kind"), "partitioning.kind"))
    value = v.read_b64(part.get("value", ""), "partitioning.value")
    items = d["messages"]
    if not isinstance(items, list):
        raise v.invalid("messages", "expected an array")
    batch = []
    for index, item in enumerate(items):
        where = f"messages[{index}]"
        item = v.read_object(item, where, frozenset({"id", "payload", "headers"}))
        batch.append(Message(v.read_b64(item.get("payload"), f"{where}.payload"),
                             v.read_int(item.get("id") or 0, f"{where}.id", v.U128_MAX),
                             v.read_headers(item.get("headers"), f"{where}.headers")))
    stream_id, topic_id = path_ids(params, "stream_id", "topic_id")
    return m.SendMessages(stream_id, topic_id, Partitioning(kind, value), encode_messages(batch))


def poll_query(c: m.PollMessages) -> dict[str, str]:
    query = {"id": v.regular_consumer_text(c.consumer), "kind": v.POLLING.name(c.strategy.kind),
             "value": str(c.strategy.value), "count": str(c.count),
             "auto_commit": "true" if c.auto_commit else "false"}
    if c.partition_id:
        query["partition_id"] = str(c.partition_id)
    return query


def poll(params: Params, q: Params) -> m.PollMessages:
    kind = PollingKind(v.POLLING.value(q.get("kind", "offset"), "kind"))
    return m.PollMessages(v.read_consumer(q.get("id")), *path_ids(params, "stream_id", "topic_id"),
                          v.query_int(q, "partition_id", 0, v.U32_MAX),
                          PollingStrategy(kind, v.query_int(q, "value", 0)),
                          v.query_int(q, "count", 10, v.U32_MAX), v.query_bool(q, "auto_commit", False))


def flush(params: Params) -> m.FlushUnsavedBuffer:
    partition = params.get("partition_id", "")
    if not (partition.isascii() and partition.isdigit()):
        raise v.invalid("partition_id", "expected a non-negative integer")
    return m.FlushUnsavedBuffer(*path_ids(params, "stream_id", "topic_id"),
                                v.read_int(int(partition), "partition_id", v.U32_MAX),
                                v.query_bool({"fsync": params.get("fsync", "")}, "fsync", False))


def offset_query(c: o.GetConsumerOffset) -> dict[str, str]:
    query = {"id": v.regular_consumer_text(c.consumer)}
    if c.partition_id:
        query["partition_id"] = str(c.partition_id)
    return query


def store_offset_body(c: o.StoreConsumerOffset) -> dict[str, Any]:
    data: dict[str, Any] = {"id": v.regular_consumer_text(c.consumer), "offset": c.offset}
    if c.partition_id:
        data["partition_id"] = c.partition_id
    return data


def store_offset(params: Params, b: Any) -> o.StoreConsumerOffset:
    d = v.body(b, ("offset",), ("id", "partition_id"))
    return o.StoreConsumerOffset(v.read_consumer(d.get("id")), *path_ids(params, "stream_id", "topic_id"),
                                 v.read_int(d.get("partition_id") or 0, "partition_id", v.U32_MAX),
                                 v.read_int(d["offset"], "offset"))


def snapshot(b: Any) -> sy.GetSnapshot:
    d = v.body(b, (), ("snapshot_types", "compression"))
    names = d.get("snapshot_types")
    if names is None:
        types = DEFAULT_SNAPSHOT_TYPES
    elif not isinstance(names, list) or len(names) > 255:
        raise v.invalid("snapshot_types", "expected an array of at most 255 snapshot types")
    else:
        types = tuple(SnapshotType(v.SNAPSHOT_TYPE.value(n, "snapshot_types")) for n in names)
    compression = v.SNAPSHOT_COMPRESSION.value(d.get("compression", "Deflated"), "compression")
    return sy.GetSnapshot(SnapshotCompression(compression), types)


def client_id(params: Params) -> sy.GetClient:
    text = params.get("client_id", "")
    if not (text.isascii() and text.isdigit()):
        raise v.invalid("client_id", "expected a non-negative integer")
    return sy.GetClient(v.read_int(int(text), "client_id", v.U32_MAX))




def change_password(params: Params, b: Any) -> u.ChangePassword:
    d = v.body(b, ("current_password", "new_password"))
    return u.ChangePassword(*path_ids(params, "user_id"),
                            v.read_str(d["current_password"], "current_password"),
                            v.read_str(d["new_password"], "new_password"))


def update_permissions(params: Params, b: Any) -> u.UpdatePermissions:
    d = v.body(b, (), ("permissions",))
    return u.UpdatePermissions(*path_ids(params, "user_id"), v.read_permissions(d.get("permissions")))


def create_token(b: Any) -> tk.CreatePersonalAccessToken:
    d = v.body(b, ("name",), ("expiry",))
    return tk.CreatePersonalAccessToken(v.read_str(d["name"], "name"),
                                        v.read_int(d.get("expiry", 0), "expiry"))


def create_stream(b: Any) -> s.CreateStream:
    d = v.body(b, ("name",), ("stream_id",))
    return s.CreateStream(v.optional_id(d, "stream_id", errors.InvalidStreamId),
                          v.read_str(d["name"], "name"))


def create_group(params: Params, b: Any) -> g.CreateConsumerGroup:
    d = v.body(b, ("name",), ("group_id",))
    return g.CreateConsumerGroup(*path_ids(params, "stream_id", "topic_id"),
                                 v.optional_id(d, "group_id", errors.InvalidConsumerGroupId),
                                 v.read_str(d["name"], "name"))


def with_id(name: str, identifier: int, data: dict[str, Any]) -> dict[str, Any]:
    """A create body with the optional explicit id (0 = the server chooses = absent)."""
    return {name: identifier, **data} if identifier else data
