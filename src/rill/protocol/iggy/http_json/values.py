"""Values of the HTTP JSON API (wire §8.1): the readers and writers every body is built from.

Owns: the conventions -- snake_case keys, standard Base64 for binary data (payloads, header
values, the partitioning value), byte sizes written as ``"<n> B"`` and read from any
``"<number> <unit>"`` string (decimal and binary units), enums as the §8.1 strings, path ids
(all-digit text is a numeric Identifier, anything else a name), query integers and booleans,
header maps, the permissions object, and walking a SEND message region.

Readers of *request* values are strict: a wrong JSON type, an unknown key or a bad encoding
raises ``errors.InvalidFormat`` naming the field (HTTP 400). Sans-I/O, like all of
``rill.protocol``.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import fields
from typing import Any, Iterator, Mapping

from rill import errors
from rill.protocol.iggy.headers import HeaderKind, HeaderValue, decode_header_map, encode_header_map
from rill.protocol.iggy.layout import ID_SIZE, walk_send
from rill.protocol.iggy.messages import Message
from rill.protocol.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from rill.protocol.iggy.primitives import Consumer, Identifier

Params = Mapping[str, str]

U8_MAX, U32_MAX, U64_MAX, U128_MAX = 2**8 - 1, 2**32 - 1, 2**64 - 1, 2**128 - 1


# -- request values ---------------------------------------------------------------------------


def invalid(field: str, reason: str) -> errors.InvalidFormat:
    return errors.InvalidFormat(reason=f"Invalid format: {field}: {reason}", field=field)


def read_int(value: Any, field: str, maximum: int = U64_MAX, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(field, "expected an integer")
    if not minimum <= value <= maximum:
        raise invalid(field, f"must be between {minimum} and {maximum}")
    return value


def read_str(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise invalid(field, "expected a string")
    return value


def read_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise invalid(field, "expected true or false")
    return value


def read_object(value: Any, field: str, allowed: frozenset[str] | None = None) -> dict[str, Any]:
    """A JSON object; with ``allowed``, any other key is refused (unknown fields are errors)."""
    if not isinstance(value, dict):
        raise invalid(field, "expected an object")
    if allowed is not None:
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise invalid(field if field != "body" else unknown[0], f"unknown field {unknown[0]!r}")
    return value


def b64(data: bytes | bytearray | memoryview) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def read_b64(value: Any, field: str) -> bytes:
    text = read_str(value, field)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise invalid(field, "expected standard Base64") from None


# -- byte sizes -------------------------------------------------------------------------------

_SIZE_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15, "eb": 10**18,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50, "eib": 2**60,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")


def format_size(size: int) -> str:
    """Byte sizes are written in bytes, always: ``"1234 B"`` (exact, never rounded)."""
    return f"{size} B"


def parse_size(value: Any, field: str = "size") -> int:
    """``"1234 B"``, ``"10 KB"`` (10000), ``"10 KiB"`` (10240), ``"1.5 MB"`` or a plain number."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.fullmatch(value) if isinstance(value, str) else None
    factor = _SIZE_UNITS.get(match.group(2).lower()) if match else None
    if match is None or factor is None:
        raise invalid(field, f"not a byte size: {value!r}")
    number = match.group(1)
    if "." in number:
        whole, fraction = number.split(".")
        return int(whole) * factor + int(fraction) * factor // 10 ** len(fraction)
    return int(number) * factor


# -- enums ------------------------------------------------------------------------------------


class Names:
    """A wire enum <-> its JSON strings."""

    def __init__(self, what: str, names: Mapping[int, str]) -> None:
        self.what = what
        self.names = dict(names)
        self.values = {name: value for value, name in self.names.items()}

    def name(self, value: int) -> str:
        try:
            return self.names[int(value)]
        except KeyError:
            raise ValueError(f"no {self.what} name for {value}") from None

    def value(self, name: Any, field: str) -> int:
        if not isinstance(name, str) or name not in self.values:
            choices = ", ".join(self.names.values())
            raise invalid(field, f"{self.what} must be one of {choices}")
        return self.values[name]


COMPRESSION = Names("compression algorithm", {1: "none", 2: "gzip"})
USER_STATUS = Names("user status", {1: "active", 2: "inactive"})
PARTITIONING = Names("partitioning kind", {1: "balanced", 2: "partition_id", 3: "messages_key"})
POLLING = Names("polling kind", {1: "offset", 2: "timestamp", 3: "first", 4: "last", 5: "next"})
MESSAGE_STATE = Names(
    "message state", {1: "available", 10: "unavailable", 20: "poisoned", 30: "marked_for_deletion"}
)
HEADER_KIND = Names("header kind", {kind.value: kind.name.lower() for kind in HeaderKind})
TRANSPORT = Names("transport", {1: "TCP", 2: "QUIC", 3: "HTTP"})
CONSUMER_KIND = Names("consumer kind", {1: "consumer", 2: "consumer_group"})
SNAPSHOT_TYPE = Names(
    "snapshot type",
    {1: "FilesystemOverview", 2: "ProcessList", 3: "ResourceUsage", 4: "Test", 5: "ServerLogs"},
)
SNAPSHOT_COMPRESSION = Names(
    "snapshot compression",
    {1: "Stored", 2: "Deflated", 3: "Bzip2", 4: "Zstd", 5: "Lzma", 6: "Xz"},
)


# -- headers and permissions ------------------------------------------------------------------


def headers_json(headers: Mapping[str, HeaderValue] | None) -> dict[str, Any] | None:
    if not headers:
        return None
    return {
        key: {"kind": HEADER_KIND.name(header.kind), "value": b64(header.value)}
        for key, header in headers.items()
    }


def read_headers(value: Any, field: str = "headers") -> dict[str, HeaderValue] | None:
    if value is None:
        return None
    headers: dict[str, HeaderValue] = {}
    for key, entry in read_object(value, field).items():
        entry = read_object(entry, f"{field}.{key}", frozenset({"kind", "value"}))
        kind = HEADER_KIND.value(entry.get("kind"), f"{field}.{key}.kind")
        headers[key] = HeaderValue(HeaderKind(kind), read_b64(entry.get("value"), f"{field}.{key}.value"))
    encode_header_map(headers)  # the same key/value length rules as the binary side (4018/4019)
    return headers or None


def _flag_names(cls: type) -> list[str]:
    return [field.name for field in fields(cls) if field.type in ("bool", bool)]


def _flags_json(value: Any) -> dict[str, bool]:
    return {name: getattr(value, name) for name in _flag_names(type(value))}


def _read_flags(cls: type, value: Any, field: str, extra: frozenset[str] = frozenset()) -> dict:
    names = _flag_names(cls)
    data = read_object(value, field, frozenset(names) | extra)
    return {name: read_bool(data[name], f"{field}.{name}") for name in names if name in data}


def permissions_json(permissions: Permissions | None) -> dict[str, Any] | None:
    if permissions is None:
        return None
    streams = None
    if permissions.streams:
        streams = {}
        for stream_id, stream in sorted(permissions.streams.items()):
            topics = None
            if stream.topics:
                topics = {str(tid): _flags_json(topic) for tid, topic in sorted(stream.topics.items())}
            streams[str(stream_id)] = {**_flags_json(stream), "topics": topics}
    return {"global": _flags_json(permissions.global_permissions), "streams": streams}


def _read_id_key(key: str, field: str) -> int:
    if not (key.isascii() and key.isdigit()):
        raise invalid(field, f"{key!r} is not a numeric id")
    return read_int(int(key), field, U32_MAX)


def read_permissions(value: Any, field: str = "permissions") -> Permissions | None:
    """Absent flags are false; stream and topic maps are keyed by numeric ids as strings."""
    if value is None:
        return None
    data = read_object(value, field, frozenset({"global", "streams"}))
    global_permissions = GlobalPermissions(
        **_read_flags(GlobalPermissions, data.get("global") or {}, f"{field}.global")
    )
    streams: dict[int, StreamPermissions] = {}
    for key, entry in read_object(data.get("streams") or {}, f"{field}.streams").items():
        where = f"{field}.streams.{key}"
        flags = _read_flags(StreamPermissions, entry, where, frozenset({"topics"}))
        topics = {
            _read_id_key(topic_key, f"{where}.topics"): TopicPermissions(
                **_read_flags(TopicPermissions, topic, f"{where}.topics.{topic_key}")
            )
            for topic_key, topic in read_object(entry.get("topics") or {}, f"{where}.topics").items()
        }
        streams[_read_id_key(key, f"{field}.streams")] = StreamPermissions(**flags, topics=topics)
    return Permissions(global_permissions, streams)


# -- ids, queries and bodies -----------------------------------------------------------------


def ident_text(identifier: Identifier) -> str:
    return str(identifier.value)


def read_identifier(text: Any, field: str) -> Identifier:
    """All-digit text is a numeric id, anything else a name (wire §8.1)."""
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str):
        raise invalid(field, "expected an identifier")
    try:
        if text.isascii() and text.isdigit() and int(text) <= U32_MAX:
            return Identifier(int(text))
        return Identifier(text)
    except ValueError as error:
        raise errors.InvalidIdentifier(reason=f"Invalid identifier: {error}", field=field) from None


def query_int(query: Params, name: str, default: int, maximum: int = U64_MAX) -> int:
    text = query.get(name)
    if text is None:
        return default
    if not (text.isascii() and text.isdigit()):
        raise invalid(name, "expected a non-negative integer")
    return read_int(int(text), name, maximum)


def query_bool(query: Params, name: str, default: bool) -> bool:
    text = query.get(name)
    if text is None:
        return default
    if text.lower() not in ("true", "false"):
        raise invalid(name, "expected true or false")
    return text.lower() == "true"


def body(value: Any, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    data = read_object(value if value is not None else {}, "body",
                           frozenset(required) | frozenset(optional))
    for name in required:
        if name not in data:
            raise invalid(name, "field required")
    return data


def optional_id(data: dict[str, Any], name: str, error: type[errors.RillError]) -> int:
    """Absent/null: 0 (the server chooses); an explicit 0 is refused with ``error``."""
    value = data.get(name)
    if value is None:
        return 0
    if read_int(value, name, U32_MAX) == 0:
        raise error(field=name)
    return value


def regular_consumer_text(consumer: Consumer) -> str:
    if consumer.is_group:
        raise errors.FeatureUnavailable(
            reason="Feature is unavailable: HTTP consumers are regular consumers; "
            "consumer-group polls and offsets need the TCP or QUIC transport"
        )
    return ident_text(consumer.id)


def read_consumer(text: Any, field: str = "id") -> Consumer:
    return Consumer.regular(read_identifier("1" if text is None else text, field))


def iter_send_messages(region: bytes | bytearray | memoryview) -> Iterator[Message]:
    """Walk a SEND region (id u128, headers_length u32, headers, payload_length u32, payload)."""
    view = memoryview(region)
    for parts in walk_send(view):
        message_id = int.from_bytes(view[parts.start : parts.start + ID_SIZE], "little")
        header_bytes = view[parts.headers_at : parts.headers_at + parts.headers_length]
        headers = decode_header_map(header_bytes) if parts.headers_length else None
        payload = bytes(view[parts.payload_at : parts.payload_at + parts.payload_length])
        yield Message(payload, message_id, headers)
