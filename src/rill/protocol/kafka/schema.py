"""Kafka's JSON message schemas, read as data (``schemas/``, see its README).

Owns: parsing the schema files (JSON with ``//`` comments), version ranges, defaults, and the
message classes: one immutable class per struct of a message (``namedtuple``), holding the
fields of *every* version of that message plus ``tagged_fields`` (unknown tags kept on decode,
``{tag: bytes}`` or None). A field a version lacks holds its default.

Names: the schema's ``CamelCase`` field names become ``snake_case`` attributes
(``ThrottleTimeMs`` -> ``throttle_time_ms``); struct classes keep the schema's names
(``MetadataResponse``, ``MetadataResponse.MetadataResponseTopic``).

Values: ints, ``float``, ``bool``, ``str`` (None when null), ``bytes`` for ``bytes`` fields,
a ``memoryview`` over the received frame for ``records`` (never decoded here), ``uuid.UUID``
for ``uuid``, tuples for arrays (None when a nullable array is null), struct instances.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import namedtuple
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

INFINITE = 1 << 15  # above every version Kafka can express (int16)

PRIMITIVES = frozenset({"int8", "int16", "int32", "int64", "uint16", "float64", "bool", "string",
                        "bytes", "records", "uuid"})
ZERO_UUID = uuid.UUID(int=0)


class SchemaError(ValueError):
    """A schema file this loader does not understand."""


def strip_comments(text: str) -> str:
    """Remove ``//`` comments (to end of line) outside JSON strings."""
    out: list[str] = []
    i, n = 0, len(text)
    start = 0
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "/" and text.startswith("//", i):
            out.append(text[start:i])
            end = text.find("\n", i)
            i = start = n if end < 0 else end
            continue
        i += 1
    out.append(text[start:])
    return "".join(out)


def parse_versions(spec: str | None) -> tuple[int, int] | None:
    """``"3+"`` -> (3, INFINITE); ``"1-4"`` -> (1, 4); ``"2"`` -> (2, 2); ``"none"``/None -> None."""
    if spec is None or spec == "none":
        return None
    spec = spec.strip()
    if spec.endswith("+"):
        return int(spec[:-1]), INFINITE
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo), int(hi)
    return int(spec), int(spec)


def in_range(version: int, versions: tuple[int, int] | None) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


_SNAKE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    return _SNAKE.sub("_", name).lower()


@dataclass(eq=False)
class FieldSpec:
    name: str  # as in the schema
    attr: str  # snake_case attribute
    type: str  # the element type for arrays ("int32", "MetadataResponseTopic", ...)
    is_array: bool
    struct: StructSpec | None  # the (element) struct, when not a primitive
    versions: tuple[int, int] | None
    nullable: tuple[int, int] | None
    tagged: tuple[int, int] | None
    tag: int | None
    flexible: tuple[int, int] | None | bool  # True: follow the message (the usual case)
    ignorable: bool
    default: Any = None

    def present(self, version: int) -> bool:
        return in_range(version, self.versions)

    def is_tagged(self, version: int) -> bool:
        return self.tag is not None and in_range(version, self.tagged)

    def is_nullable(self, version: int) -> bool:
        return in_range(version, self.nullable)


@dataclass(eq=False)
class StructSpec:
    name: str
    fields: list[FieldSpec]
    cls: type = field(init=False, repr=False)


@dataclass(eq=False)
class MessageSpec:
    name: str  # "MetadataRequest"
    api_key: int | None  # None for the headers
    kind: str  # "request", "response" or "header"
    valid_versions: tuple[int, int]
    flexible_versions: tuple[int, int] | None
    struct: StructSpec
    structs: dict[str, StructSpec]  # every struct of the message by name (itself included)

    @property
    def cls(self) -> type:
        return self.struct.cls

    def is_flexible(self, version: int) -> bool:
        return in_range(version, self.flexible_versions)


def _default(raw: dict, type_name: str, is_array: bool, struct: StructSpec | None,
             nullable: tuple[int, int] | None) -> Any:
    text = raw.get("default")
    if text is not None and not isinstance(text, str):  # a few schemas write JSON literals
        text = json.dumps(text)
    if is_array:
        if text == "null":
            return None
        return ()
    if struct is not None:
        return struct.cls()  # every field at its default
    if text == "null":
        return None
    if type_name in ("int8", "int16", "int32", "int64", "uint16"):
        return int(text, 0) if text not in (None, "") else 0
    if type_name == "float64":
        return float(text) if text not in (None, "") else 0.0
    if type_name == "bool":
        return text == "true"
    if type_name == "string":
        return text if text is not None else ""
    if type_name == "bytes":
        return b""
    if type_name == "records":
        return None
    if type_name == "uuid":
        return uuid.UUID(text) if text else ZERO_UUID
    raise SchemaError(f"no default for type {type_name!r}")


def _build_struct(name: str, raw_fields: list[dict], structs: dict[str, StructSpec],
                  common: dict[str, list[dict]]) -> StructSpec:
    fields: list[FieldSpec] = []
    for raw in raw_fields:
        type_text: str = raw["type"]
        is_array = type_text.startswith("[]")
        type_name = type_text[2:] if is_array else type_text
        struct = None
        if type_name not in PRIMITIVES:
            if "fields" in raw:
                struct = _build_struct(type_name, raw["fields"], structs, common)
            elif type_name in structs:
                struct = structs[type_name]
            elif type_name in common:
                struct = _build_struct(type_name, common[type_name], structs, common)
            else:
                raise SchemaError(f"{name}: unknown type {type_text!r}")
        elif type_name == "records" and is_array:
            raise SchemaError(f"{name}: arrays of records are not a Kafka type")
        flexible = raw.get("flexibleVersions")
        spec = FieldSpec(
            name=raw["name"],
            attr=snake_case(raw["name"]),
            type=type_name,
            is_array=is_array,
            struct=struct,
            versions=parse_versions(raw.get("versions")),
            nullable=parse_versions(raw.get("nullableVersions")),
            tagged=parse_versions(raw.get("taggedVersions")),
            tag=raw.get("tag"),
            flexible=True if flexible is None else parse_versions(flexible),
            ignorable=bool(raw.get("ignorable", False)),
        )
        if (spec.tag is None) != (spec.tagged is None):
            raise SchemaError(f"{name}.{spec.name}: tag and taggedVersions go together")
        spec.default = _default(raw, type_name, is_array, struct, spec.nullable)
        fields.append(spec)
    if name in structs:
        raise SchemaError(f"struct {name} is declared twice")
    attrs = [f.attr for f in fields]
    cls = namedtuple(name, [*attrs, "tagged_fields"],  # type: ignore[misc]
                     defaults=[*(f.default for f in fields), None])
    cls.__module__ = "rill.protocol.kafka.messages"
    for f in fields:  # nested classes reachable from their parent: Parent.Child(...)
        if f.struct is not None:
            setattr(cls, f.struct.name, f.struct.cls)
    spec = StructSpec(name, fields)
    spec.cls = cls
    structs[name] = spec
    return spec


def parse_schema(text: str) -> MessageSpec:
    raw = json.loads(strip_comments(text))
    name = raw["name"]
    valid = parse_versions(raw["validVersions"])
    if valid is None:
        raise SchemaError(f"{name}: no valid versions")
    common = {c["name"]: c["fields"] for c in raw.get("commonStructs", ())}
    structs: dict[str, StructSpec] = {}
    top = _build_struct(name, raw["fields"], structs, common)
    return MessageSpec(name=name, api_key=raw.get("apiKey"), kind=raw["type"],
                       valid_versions=valid,
                       flexible_versions=parse_versions(raw.get("flexibleVersions")),
                       struct=top, structs=structs)


def load_schema(name: str) -> MessageSpec:
    """``load_schema("MetadataRequest")`` from the vendored files."""
    path = resources.files("rill.protocol.kafka").joinpath("schemas", f"{name}.json")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SchemaError(f"no schema {name}.json") from None
    return parse_schema(text)


def schema_names() -> list[str]:
    folder = resources.files("rill.protocol.kafka").joinpath("schemas")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))
