"""Hypothesis strategies for Kafka messages, derived from the same schemas the codec reads: a
value of a struct at a version sets every field that version carries (nulls where it allows
them, tagged fields sometimes at their default and sometimes not, unknown tags in flexible
versions) and leaves every other field at its default, so a round trip must return it equal."""

from __future__ import annotations

from hypothesis import strategies as st

from rill.protocol.kafka.codec import message_spec
from rill.protocol.kafka.schema import FieldSpec, StructSpec

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
MAX_ARRAY = 3


def _primitive(type_name: str, flexible: bool):
    if type_name in _INTS:
        bits = _INTS[type_name]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if type_name == "uint16":
        return st.integers(0, 0xFFFF)
    if type_name == "float64":
        return st.floats(allow_nan=False)
    if type_name == "bool":
        return st.booleans()
    if type_name == "string":
        return st.text(max_size=12)
    if type_name in ("bytes", "records"):
        return st.binary(max_size=24)
    if type_name == "uuid":
        return st.uuids()
    raise AssertionError(type_name)


def field_strategy(f: FieldSpec, version: int, flexible: bool):
    if f.struct is not None:
        element = struct_strategy(f.struct, version, flexible)
    else:
        element = _primitive(f.type, flexible)
    if f.is_array:
        value = st.lists(element, max_size=MAX_ARRAY).map(tuple)
    else:
        value = element
    if f.is_nullable(version):
        value = st.none() | value
    return value


def struct_strategy(s: StructSpec, version: int, flexible: bool):
    fields = {}
    for f in s.fields:
        if not f.present(version):
            continue
        strategy = field_strategy(f, version, flexible)
        if f.is_tagged(version):
            strategy = st.just(f.default) | strategy
        fields[f.attr] = strategy
    if flexible:
        known = {f.tag for f in s.fields if f.tag is not None}
        tags = st.integers(0, 40).filter(lambda tag: tag not in known)
        fields["tagged_fields"] = st.none() | st.dictionaries(tags, st.binary(max_size=6),
                                                              min_size=1, max_size=2)
    return st.fixed_dictionaries(fields).map(lambda values: s.cls(**values))


def message_strategy(name: str, version: int):
    spec = message_spec(name)
    return struct_strategy(spec.struct, version, spec.is_flexible(version))
