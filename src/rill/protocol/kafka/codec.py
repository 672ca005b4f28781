"""Kafka's wire codec, compiled from the JSON message schemas (sans-I/O).

Owns: bytes <-> message values for every (API key, version) rill serves, both headers, and the
per-version compilation. For each struct and version the schema is compiled once into a plan:
runs of fixed-width fields (int8..int64, uint16, float64, bool) become one ``struct.Struct``
(un)pack, every other field one closure chosen for its type, nullability and flexibility, so
the run-time work per field is a call or a slice of one ``unpack_from`` - no schema lookups.

Message representation: one immutable ``namedtuple`` class per schema struct (schema.py).
Chosen because a decoded struct is built in C from the list of wire values
(``tuple.__new__(cls, values)``, reordered by an ``itemgetter`` when versions leave gaps),
attribute access is a C descriptor, equality and repr come free for tests, and immutability
lets absent fields share their defaults. Arrays are tuples for the same reason (primitive
arrays come straight out of one ``unpack_from``); encoders take any sequence.

``records`` fields are never decoded: they come out as a ``memoryview`` over the frame and are
written back as given (one copy into the joined frame; ``encode_*_parts`` hands the pieces out
for ``writelines`` without it). A ``records`` value may also be a list or tuple of parts
(anything with ``len()``: bytes-likes, or a server's file regions): its length prefix is their
sum and the parts go into the output as they are, uncopied and unlooked-at; only
``encode_*_parts`` can carry parts that are not bytes-like.

Flexible versions: compact lengths (unsigned varint N+1, 0 = null), a tagged-field section
after every struct; tagged fields are written only when they differ from their default (the
rule kafka-notes §2.1.4 needs for ApiVersions); unknown tags are kept in ``tagged_fields``
(``{tag: bytes}``) and written back. Encoding a non-default value into a field the version
lacks raises ``KafkaEncodeError`` unless the schema marks it ``ignorable``.

Headers: request header v2 for flexible request versions, else v1; response header v1 for
flexible versions, else v0 - except ApiVersions, whose response header is always v0.
"""

from __future__ import annotations

import struct
import uuid
from operator import itemgetter
from typing import Any, Callable, NamedTuple

from rill.protocol.kafka import apis
from rill.protocol.kafka.errors import (
    KafkaDecodeError,
    KafkaEncodeError,
    KafkaProtocolError,
    UnknownApiKey,
    UnsupportedVersion,
)
from rill.protocol.kafka.schema import FieldSpec, MessageSpec, StructSpec, in_range, load_schema

Decoder = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[Any, list], None]

_FIXED_CODES = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H",
                "float64": "d", "bool": "?"}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_REQUEST_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id
_i16_from = _I16.unpack_from
_i32_from = _I32.unpack_from
_i16_pack = _I16.pack
_i32_pack = _I32.pack
_unpack_from = struct.unpack_from
_pack = struct.pack
_new = tuple.__new__
_UUID = uuid.UUID
_NULL16 = b"\xff\xff"
_NULL32 = b"\xff\xff\xff\xff"
_EMPTY_TAGS = b"\x00"
_SMALL = [bytes((i,)) for i in range(128)]


# --- varints ---------------------------------------------------------------------------------


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (Kafka's lengths, counts and tags)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 28:
            raise KafkaDecodeError("unsigned varint longer than 5 bytes")


def uvarint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL[value]
    if value >> 32:
        raise KafkaEncodeError(f"{value} does not fit an unsigned varint of 32 bits")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _truncated(what: str, pos: int, need: int, have: int) -> KafkaDecodeError:
    return KafkaDecodeError(f"{what} at byte {pos} needs {need} bytes, {have} remain")


# --- primitive decoders ----------------------------------------------------------------------


def _string_decoder(nullable: bool, flexible: bool, name: str) -> Decoder:
    if flexible:
        def decode(buf, pos):
            n, pos = read_uvarint(buf, pos)
            if n == 0:
                if nullable:
                    return None, pos
                raise KafkaDecodeError(f"{name}: null in a non-nullable string")
            end = pos + n - 1
            if end > len(buf):
                raise _truncated(name, pos, n - 1, len(buf) - pos)
            return str(buf[pos:end], "utf-8"), end
    else:
        def decode(buf, pos):
            (n,) = _i16_from(buf, pos)
            pos += 2
            if n < 0:
                if n == -1 and nullable:
                    return None, pos
                raise KafkaDecodeError(f"{name}: string length {n}")
            end = pos + n
            if end > len(buf):
                raise _truncated(name, pos, n, len(buf) - pos)
            return str(buf[pos:end], "utf-8"), end
    return decode


def _bytes_decoder(nullable: bool, flexible: bool, name: str, view: bool) -> Decoder:
    """``bytes`` fields come out as bytes; ``records`` (view=True) as a memoryview slice."""
    convert = (lambda v: v) if view else bytes

    if flexible:
        def decode(buf, pos):
            n, pos = read_uvarint(buf, pos)
            if n == 0:
                if nullable:
                    return None, pos
                raise KafkaDecodeError(f"{name}: null in non-nullable bytes")
            end = pos + n - 1
            if end > len(buf):
                raise _truncated(name, pos, n - 1, len(buf) - pos)
            return convert(buf[pos:end]), end
    else:
        def decode(buf, pos):
            (n,) = _i32_from(buf, pos)
            pos += 4
            if n < 0:
                if n == -1 and nullable:
                    return None, pos
                raise KafkaDecodeError(f"{name}: bytes length {n}")
            end = pos + n
            if end > len(buf):
                raise _truncated(name, pos, n, len(buf) - pos)
            return convert(buf[pos:end]), end
    return decode


def _uuid_decode(buf, pos):
    end = pos + 16
    if end > len(buf):
        raise _truncated("uuid", pos, 16, len(buf) - pos)
    return _UUID(bytes=bytes(buf[pos:end])), end


def _fixed_decoder(code: str) -> Decoder:
    s = struct.Struct(">" + code)
    size = s.size
    unpack_from = s.unpack_from

    def decode(buf, pos):
        return unpack_from(buf, pos)[0], pos + size
    return decode


def _array_length_reader(nullable: bool, flexible: bool, name: str, min_size: int):
    """-> read(buf, pos) -> (count or None, pos); refuses counts the remaining bytes cannot
    hold (``min_size`` bytes per element at least), so no header makes us allocate."""
    per = max(min_size, 1)

    def check(n, buf, pos):
        if n * per > len(buf) - pos:
            raise KafkaDecodeError(f"{name}: {n} elements cannot fit the {len(buf) - pos} "
                                   f"bytes left")

    if flexible:
        def read(buf, pos):
            n = buf[pos]
            if n < 0x80:
                pos += 1
            else:
                n, pos = read_uvarint(buf, pos)
            if n == 0:
                if nullable:
                    return None, pos
                raise KafkaDecodeError(f"{name}: null in a non-nullable array")
            n -= 1
            if n * per > len(buf) - pos:
                check(n, buf, pos)
            return n, pos
    else:
        def read(buf, pos):
            (n,) = _i32_from(buf, pos)
            pos += 4
            if n < 0:
                if n == -1 and nullable:
                    return None, pos
                raise KafkaDecodeError(f"{name}: array length {n}")
            if n * per > len(buf) - pos:
                check(n, buf, pos)
            return n, pos
    return read


# --- primitive writers -----------------------------------------------------------------------


def _string_writer(nullable: bool, flexible: bool, name: str) -> Writer:
    if flexible:
        def write(value, out):
            if value is None:
                if not nullable:
                    raise KafkaEncodeError(f"{name}: null in a non-nullable string")
                out.append(_EMPTY_TAGS)
                return
            data = value.encode("utf-8")
            out.append(uvarint(len(data) + 1))
            out.append(data)
    else:
        def write(value, out):
            if value is None:
                if not nullable:
                    raise KafkaEncodeError(f"{name}: null in a non-nullable string")
                out.append(_NULL16)
                return
            data = value.encode("utf-8")
            if len(data) > 0x7FFF:
                raise KafkaEncodeError(f"{name}: string of {len(data)} bytes")
            out.append(_i16_pack(len(data)))
            out.append(data)
    return write


def _bytes_writer(nullable: bool, flexible: bool, name: str) -> Writer:
    if flexible:
        def write(value, out):
            if value is None:
                if not nullable:
                    raise KafkaEncodeError(f"{name}: null in non-nullable bytes")
                out.append(_EMPTY_TAGS)
                return
            out.append(uvarint(len(value) + 1))
            out.append(value)
    else:
        def write(value, out):
            if value is None:
                if not nullable:
                    raise KafkaEncodeError(f"{name}: null in non-nullable bytes")
                out.append(_NULL32)
                return
            out.append(_i32_pack(len(value)))
            out.append(value)
    return write


def _records_writer(nullable: bool, flexible: bool, name: str) -> Writer:
    """``bytes``' writer, and a list or tuple of parts: their summed length, then each part."""
    write_bytes = _bytes_writer(nullable, flexible, name)
    if flexible:
        def write(value, out):
            kind = type(value)
            if kind is not list and kind is not tuple:
                write_bytes(value, out)
                return
            out.append(uvarint(sum(map(len, value)) + 1))
            out.extend(value)
    else:
        def write(value, out):
            kind = type(value)
            if kind is not list and kind is not tuple:
                write_bytes(value, out)
                return
            out.append(_i32_pack(sum(map(len, value))))
            out.extend(value)
    return write


def _uuid_write(value, out):
    out.append(value.bytes)


def _fixed_writer(code: str) -> Writer:
    pack = struct.Struct(">" + code).pack

    def write(value, out):
        out.append(pack(value))
    return write


def _array_length_writer(nullable: bool, flexible: bool, name: str):
    """-> write(value, out) -> False when the array was null (nothing more to write)."""
    if flexible:
        def write(value, out):
            if value is None:
                if not nullable:
                    raise KafkaEncodeError(f"{name}: null in a non-nullable array")
                out.append(_EMPTY_TAGS)
                return False
            out.append(uvarint(len(value) + 1))
            return True
    else:
        def write(value, out):
            if value is None:
                if not nullable:
                    raise KafkaEncodeError(f"{name}: null in a non-nullable array")
                out.append(_NULL32)
                return False
            out.append(_i32_pack(len(value)))
            return True
    return write


# --- the compiler ----------------------------------------------------------------------------


def _is_default_predicate(f: FieldSpec) -> Callable[[Any], bool]:
    """Whether a value equals the field's default (tagged fields at their default are not
    written; a version lacking a non-ignorable field refuses anything else)."""
    default = f.default
    if f.is_array:
        if default is None:
            return lambda v: v is None
        return lambda v: v is not None and len(v) == 0
    if f.type == "records":
        return lambda v: v is None
    if f.type == "bytes":
        return lambda v: v is not None and len(v) == 0 if default == b"" else v is None
    return lambda v: v == default


def _min_size(f: FieldSpec, version: int, flexible: bool) -> int:
    """Fewest wire bytes one value of field ``f`` takes (for array-count sanity checks)."""
    code = _FIXED_CODES.get(f.type)
    if f.is_array or code is None:
        if f.struct is not None and not f.is_array:
            return _struct_min_size(f.struct, version, flexible)
        if f.type == "uuid" and not f.is_array:
            return 16
        return 1 if flexible else (4 if f.is_array or f.type in ("bytes", "records") else 2)
    return struct.calcsize(">" + code)


def _struct_min_size(s: StructSpec, version: int, flexible: bool) -> int:
    total = 1 if flexible else 0  # the tagged-field count
    for f in s.fields:
        if f.present(version) and not f.is_tagged(version):
            total += _min_size(f, version, flexible and _field_flexible(f, version))
    return total


def _field_flexible(f: FieldSpec, version: int) -> bool:
    return True if f.flexible is True else in_range(version, f.flexible)


class _Compiler:
    """Compiles the structs of one message at one version (memoised per struct)."""

    def __init__(self, message: MessageSpec, version: int) -> None:
        self.message = message
        self.version = version
        self.flexible = message.is_flexible(version)
        self._decoders: dict[str, Decoder] = {}
        self._writers: dict[str, Writer] = {}

    # -- values of one field --

    def _element_decoder(self, f: FieldSpec, flexible: bool, nullable: bool) -> Decoder:
        name = f"{self.message.name}.{f.name}"
        if f.struct is not None:
            return self.struct_decoder(f.struct)
        if f.type == "string":
            return _string_decoder(nullable, flexible, name)
        if f.type in ("bytes", "records"):
            return _bytes_decoder(nullable, flexible, name, view=f.type == "records")
        if f.type == "uuid":
            return _uuid_decode
        return _fixed_decoder(_FIXED_CODES[f.type])

    def field_decoder(self, f: FieldSpec) -> Decoder:
        version = self.version
        flexible = self.flexible and _field_flexible(f, version)
        nullable = f.is_nullable(version)
        if not f.is_array:
            return self._element_decoder(f, flexible, nullable)
        name = f"{self.message.name}.{f.name}"
        code = _FIXED_CODES.get(f.type)
        if f.struct is not None:
            element_size = _struct_min_size(f.struct, version, self.flexible)
        elif code is not None:
            element_size = struct.calcsize(">" + code)
        elif f.type == "uuid":
            element_size = 16
        else:
            element_size = 1 if flexible else 2 if f.type == "string" else 4
        read_length = _array_length_reader(nullable, flexible, name, element_size)
        if code is not None:  # a primitive array: one unpack_from (a Struct per count, cached)
            structs: dict[int, Any] = {}

            def decode(buf, pos):
                n, pos = read_length(buf, pos)
                if not n:
                    return (None if n is None else ()), pos
                unpack = structs.get(n)
                if unpack is None:
                    unpack = struct.Struct(f">{n}{code}").unpack_from
                    if len(structs) < 64:
                        structs[n] = unpack
                return unpack(buf, pos), pos + n * element_size
            return decode
        element = self._element_decoder(f, flexible, False)

        def decode(buf, pos):
            n, pos = read_length(buf, pos)
            if not n:
                return (None if n is None else ()), pos
            items = []
            append = items.append
            for _ in range(n):
                value, pos = element(buf, pos)
                append(value)
            return tuple(items), pos
        return decode

    def _element_writer(self, f: FieldSpec, flexible: bool, nullable: bool) -> Writer:
        name = f"{self.message.name}.{f.name}"
        if f.struct is not None:
            return self.struct_writer(f.struct)
        if f.type == "string":
            return _string_writer(nullable, flexible, name)
        if f.type == "bytes":
            return _bytes_writer(nullable, flexible, name)
        if f.type == "records":
            return _records_writer(nullable, flexible, name)
        if f.type == "uuid":
            return _uuid_write
        return _fixed_writer(_FIXED_CODES[f.type])

    def field_writer(self, f: FieldSpec) -> Writer:
        version = self.version
        flexible = self.flexible and _field_flexible(f, version)
        nullable = f.is_nullable(version)
        if not f.is_array:
            return self._element_writer(f, flexible, nullable)
        write_length = _array_length_writer(nullable, flexible, f"{self.message.name}.{f.name}")
        code = _FIXED_CODES.get(f.type)
        if code is not None:
            structs: dict[int, Any] = {}

            def write(value, out):
                if value is None or not flexible:
                    if not write_length(value, out):
                        return
                else:
                    n = len(value) + 1
                    out.append(_SMALL[n] if n < 0x80 else uvarint(n))
                if value:
                    pack = structs.get(len(value))
                    if pack is None:
                        pack = struct.Struct(f">{len(value)}{code}").pack
                        if len(structs) < 64:
                            structs[len(value)] = pack
                    out.append(pack(*value))
            return write
        element = self._element_writer(f, flexible, False)

        def write(value, out):
            if write_length(value, out):
                for item in value:
                    element(item, out)
        return write

    # -- structs --

    def _layout(self, s: StructSpec):
        version = self.version
        wire, tagged, absent = [], [], []
        for index, f in enumerate(s.fields):
            if not f.present(version):
                absent.append((index, f))
            elif f.is_tagged(version):
                tagged.append((index, f))
            else:
                wire.append((index, f))
        return wire, tagged, absent

    def struct_decoder(self, s: StructSpec) -> Decoder:
        known = self._decoders.get(s.name)
        if known is not None:
            return known
        cls = s.cls
        wire, tagged, absent = self._layout(s)
        n_wire = len(wire)
        rest = sorted(tagged + absent)  # the non-wire fields, in class order
        tail = tuple(f.default for _, f in rest) + (None,)  # + tagged_fields
        position = {index: i for i, (index, _) in enumerate(wire)}
        position.update({index: n_wire + i for i, (index, _) in enumerate(rest)})
        order = [position[i] for i in range(len(s.fields))] + [n_wire + len(rest)]
        permute = None if order == list(range(len(order))) else itemgetter(*order)

        plan: list[tuple[Any, int, Decoder | None]] = []  # (Struct, size, None) | (None, 0, dec)
        codes = ""
        for _, f in wire:
            code = None if f.is_array else _FIXED_CODES.get(f.type)
            if code is not None:
                codes += code
                continue
            if codes:
                fixed = struct.Struct(">" + codes)
                plan.append((fixed, fixed.size, None))
                codes = ""
            plan.append((None, 0, self.field_decoder(f)))
        if codes:
            fixed = struct.Struct(">" + codes)
            plan.append((fixed, fixed.size, None))
        plan_t = tuple(plan)

        read_tags = None
        if self.flexible:
            by_tag = {f.tag: (position[index], self.field_decoder(f)) for index, f in tagged}
            read_tags = _tag_reader(by_tag, f"{self.message.name}.{s.name}")

        def decode(buf, pos):
            values: list = []
            append = values.append
            for fixed, size, field in plan_t:
                if field is None:
                    values += fixed.unpack_from(buf, pos)
                    pos += size
                else:
                    value, pos = field(buf, pos)
                    append(value)
            values += tail
            if read_tags is not None:
                if buf[pos]:
                    pos = read_tags(buf, pos, values)
                else:  # no tagged fields: the usual case
                    pos += 1
            if permute is None:
                return _new(cls, values), pos
            return _new(cls, permute(values)), pos

        self._decoders[s.name] = decode
        return decode

    def struct_writer(self, s: StructSpec) -> Writer:
        known = self._writers.get(s.name)
        if known is not None:
            return known
        wire, tagged, absent = self._layout(s)
        indexes = [index for index, _ in wire]
        if not indexes:
            def get(obj):
                return ()
        elif len(indexes) == 1:
            only = indexes[0]

            def get(obj):
                return (obj[only],)
        else:
            get = itemgetter(*indexes)

        plan: list[tuple[Any, int, int, Writer | None]] = []  # (pack, lo, hi, None) | (None, i, 0, w)
        run_start, codes = 0, ""
        for i, (_, f) in enumerate(wire):
            code = None if f.is_array else _FIXED_CODES.get(f.type)
            if code is not None:
                if not codes:
                    run_start = i
                codes += code
                continue
            if codes:
                plan.append((struct.Struct(">" + codes).pack, run_start, i, None))
                codes = ""
            plan.append((None, i, 0, self.field_writer(f)))
        if codes:
            plan.append((struct.Struct(">" + codes).pack, run_start, len(wire), None))
        plan_t = tuple(plan)

        checks = tuple((index, _is_default_predicate(f), f.name)
                       for index, f in absent if not f.ignorable)
        version = self.version
        message_name = self.message.name

        write_tags = None
        no_tags = not tagged
        if self.flexible:
            write_tags = _tag_writer(tuple(
                (f.tag, index, self.field_writer(f), _is_default_predicate(f))
                for index, f in sorted(tagged, key=lambda item: item[1].tag)))

        def write(obj, out):
            values = get(obj)
            for pack, lo, hi, field in plan_t:
                if field is None:
                    out.append(pack(*values[lo:hi]))
                else:
                    field(values[lo], out)
            for index, is_default, name in checks:
                if not is_default(obj[index]):
                    raise KafkaEncodeError(f"{message_name}.{name} cannot be sent in version "
                                           f"{version} (it holds {obj[index]!r})")
            if write_tags is not None:
                if no_tags and not obj[-1]:
                    out.append(_EMPTY_TAGS)
                else:
                    write_tags(obj, out)

        self._writers[s.name] = write
        return write


def _tag_reader(by_tag: dict[int, tuple[int, Decoder]], name: str):
    def read_tags(buf, pos, values):
        count, pos = read_uvarint(buf, pos)
        unknown = None
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise _truncated(f"{name} tag {tag}", pos, size, len(buf) - pos)
            known = by_tag.get(tag)
            if known is None:
                if unknown is None:
                    unknown = {}
                unknown[tag] = bytes(buf[pos:end])
            else:
                slot, decode = known
                value, after = decode(buf[:end], pos)
                if after != end:
                    raise KafkaDecodeError(f"{name} tag {tag}: {end - after} bytes left over")
                values[slot] = value
            pos = end
        values[-1] = unknown
        return pos
    return read_tags


def _tag_writer(tagged: tuple[tuple[int, int, Writer, Callable[[Any], bool]], ...]):
    if not tagged:
        def write_tags(obj, out):
            unknown = obj[-1]
            if not unknown:
                out.append(_EMPTY_TAGS)
                return
            _write_tag_section(sorted(unknown.items()), out)
        return write_tags

    def write_tags(obj, out):
        items = []
        for tag, index, write, is_default in tagged:
            value = obj[index]
            if not is_default(value):
                sub: list = []
                write(value, sub)
                items.append((tag, b"".join(sub)))
        unknown = obj[-1]
        if unknown:
            items.extend(unknown.items())
            items.sort(key=lambda item: item[0])
        if not items:
            out.append(_EMPTY_TAGS)
            return
        _write_tag_section(items, out)
    return write_tags


def _write_tag_section(items, out):
    out.append(uvarint(len(items)))
    for tag, data in items:
        out.append(uvarint(tag))
        out.append(uvarint(len(data)))
        out.append(data)


# --- messages at one version -----------------------------------------------------------------


class MessageCodec(NamedTuple):
    """One message (a request, a response or a header) at one version."""

    spec: MessageSpec
    version: int
    flexible: bool
    decode_from: Decoder  # (buf: memoryview, pos) -> (value, pos)
    write_to: Writer  # (value, out: list of bytes-like) -> None

    @property
    def cls(self) -> type:
        return self.spec.cls

    def decode(self, data, *, strict: bool = True):
        """The message from ``data``; ``strict``: all of it, no byte left over."""
        buf = data if type(data) is memoryview else memoryview(data)
        value, pos = _guarded_decode(self.decode_from, buf, 0, self.spec.name)
        if strict and pos != len(buf):
            raise KafkaDecodeError(f"{self.spec.name} v{self.version}: {len(buf) - pos} bytes "
                                   "left over")
        return value

    def encode(self, value) -> bytes:
        out: list = []
        _guarded_write(self.write_to, value, out, self.spec.name)
        return b"".join(out)


def _guarded_decode(decode, buf, pos, name):
    try:
        return decode(buf, pos)
    except KafkaProtocolError:
        raise
    except (struct.error, IndexError) as e:
        raise KafkaDecodeError(f"{name}: truncated ({e})") from e
    except (UnicodeDecodeError, ValueError) as e:
        raise KafkaDecodeError(f"{name}: {e}") from e


def _guarded_write(write, value, out, name):
    try:
        write(value, out)
    except KafkaProtocolError:
        raise
    except (struct.error, AttributeError, TypeError, ValueError, OverflowError) as e:
        raise KafkaEncodeError(f"{name}: {e}") from e


_SPECS: dict[str, MessageSpec] = {}
_MESSAGE_CODECS: dict[tuple[str, int], MessageCodec] = {}


def message_spec(name: str) -> MessageSpec:
    spec = _SPECS.get(name)
    if spec is None:
        spec = _SPECS[name] = load_schema(name)
    return spec


def message_codec(name: str, version: int) -> MessageCodec:
    """The codec of schema ``name`` ("MetadataRequest", "RequestHeader") at ``version``: any
    version the schema declares, and for API messages also the lower ones rill's table
    accepts (Produce 0-2, Fetch 0-3, ListOffsets 0: the seed's dialect; OffsetCommit 0-1,
    OffsetFetch 0)."""
    key = (name, version)
    codec = _MESSAGE_CODECS.get(key)
    if codec is not None:
        return codec
    spec = message_spec(name)
    low, high = spec.valid_versions
    if spec.api_key is not None and spec.api_key in apis.SUPPORTED:
        low = min(low, apis.SUPPORTED[spec.api_key][0])
    if not low <= version <= high:
        raise KafkaEncodeError(f"{name} has no version {version} (versions {low}-{high})")
    compiler = _Compiler(spec, version)
    codec = MessageCodec(spec, version, compiler.flexible, compiler.struct_decoder(spec.struct),
                         compiler.struct_writer(spec.struct))
    _MESSAGE_CODECS[key] = codec
    return codec


# --- requests and responses with their headers --------------------------------------------


class ApiCodec(NamedTuple):
    """Everything about one (API key, version): both bodies and both headers."""

    api_key: int
    version: int
    flexible: bool
    request: MessageCodec
    response: MessageCodec
    request_header: MessageCodec  # v2 when flexible, else v1
    response_header: MessageCodec  # v1 when flexible, else v0 (ApiVersions: always v0)


_API_CODECS: dict[tuple[int, int], ApiCodec] = {}


def api_codec(api_key: int, version: int) -> ApiCodec:
    """The codec of an API at a version (not limited to the advertised table: clients and tests
    may encode other versions the schema has; ``decode_request`` enforces the table)."""
    key = (api_key, version)
    codec = _API_CODECS.get(key)
    if codec is not None:
        return codec
    api = apis.BY_KEY.get(api_key)
    if api is None:
        raise UnknownApiKey(api_key, version, -1)
    request = message_codec(api.name + "Request", version)
    response = message_codec(api.name + "Response", version)
    flexible = request.flexible
    codec = ApiCodec(
        api_key, version, flexible, request, response,
        message_codec("RequestHeader", 2 if flexible else 1),
        message_codec("ResponseHeader", 1 if flexible and api_key != apis.API_VERSIONS else 0),
    )
    _API_CODECS[key] = codec
    return codec


def request_header_version(api_key: int, version: int) -> int:
    return api_codec(api_key, version).request_header.version


def response_header_version(api_key: int, version: int) -> int:
    return api_codec(api_key, version).response_header.version


class Request(NamedTuple):
    header: Any  # RequestHeader: request_api_key, request_api_version, correlation_id, client_id
    body: Any  # e.g. ProduceRequest

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


def decode_request(payload, *, supported: dict[int, tuple[int, int]] | None = None,
                   strict: bool = False) -> Request:
    """A request frame's payload (after the int32 size) -> ``Request(header, body)``.

    Raises ``UnknownApiKey`` / ``UnsupportedVersion`` (carrying the correlation id) for keys
    and versions outside ``supported`` (default: rill's table, apis.SUPPORTED) before reading
    anything past the fixed header prefix, and ``KafkaDecodeError`` for malformed bytes. Bytes
    after the body are ignored, as Kafka does, unless ``strict``."""
    buf = payload if type(payload) is memoryview else memoryview(payload)
    if len(buf) < 8:
        raise KafkaDecodeError(f"a request of {len(buf)} bytes is shorter than its header")
    api_key, version, correlation_id = _REQUEST_PREFIX.unpack_from(buf, 0)
    table = apis.SUPPORTED if supported is None else supported
    bounds = table.get(api_key)
    if bounds is None:
        raise UnknownApiKey(api_key, version, correlation_id)
    if not bounds[0] <= version <= bounds[1]:
        raise UnsupportedVersion(api_key, version, correlation_id, bounds)
    codec = _API_CODECS.get((api_key, version)) or api_codec(api_key, version)
    header, pos = _guarded_decode(codec.request_header.decode_from, buf, 0, "RequestHeader")
    body, pos = _guarded_decode(codec.request.decode_from, buf, pos, codec.request.spec.name)
    if strict and pos != len(buf):
        raise KafkaDecodeError(f"{codec.request.spec.name} v{version}: {len(buf) - pos} bytes "
                               "left over")
    return Request(header, body)


def _frame(parts: list) -> list:
    """Fill the (empty) int32 size placeholder at parts[0]."""
    parts[0] = _i32_pack(sum(map(len, parts)))
    return parts


def encode_request_parts(api_key: int, version: int, correlation_id: int, body,
                         client_id: str | None = "rill", tagged_fields=None) -> list:
    codec = api_codec(api_key, version)
    header = codec.request_header.cls(api_key, version, correlation_id, client_id, tagged_fields)
    out: list = [b""]
    _guarded_write(codec.request_header.write_to, header, out, "RequestHeader")
    _guarded_write(codec.request.write_to, body, out, codec.request.spec.name)
    return _frame(out)


def encode_request(api_key: int, version: int, correlation_id: int, body,
                   client_id: str | None = "rill", tagged_fields=None) -> bytes:
    """A whole request frame (int32 size, header, body)."""
    return b"".join(encode_request_parts(api_key, version, correlation_id, body, client_id,
                                         tagged_fields))


def encode_response_parts(api_key: int, version: int, correlation_id: int, body) -> list:
    """The frame as a list of bytes-like pieces (for ``writelines``): a records field's bytes
    are handed on as given, uncopied."""
    codec = _API_CODECS.get((api_key, version)) or api_codec(api_key, version)
    out: list = [b""]
    header = codec.response_header
    _guarded_write(header.write_to, header.cls(correlation_id), out, "ResponseHeader")
    _guarded_write(codec.response.write_to, body, out, codec.response.spec.name)
    return _frame(out)


def encode_response(api_key: int, version: int, correlation_id: int, body) -> bytes:
    """A whole response frame (int32 size, header, body)."""
    return b"".join(encode_response_parts(api_key, version, correlation_id, body))


class Response(NamedTuple):
    header: Any  # ResponseHeader: correlation_id
    body: Any

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


def decode_response(api_key: int, version: int, payload, *, strict: bool = True) -> Response:
    """A response frame's payload (after the int32 size) for a request the caller sent."""
    codec = api_codec(api_key, version)
    buf = payload if type(payload) is memoryview else memoryview(payload)
    header, pos = _guarded_decode(codec.response_header.decode_from, buf, 0, "ResponseHeader")
    body, pos = _guarded_decode(codec.response.decode_from, buf, pos, codec.response.spec.name)
    if strict and pos != len(buf):
        raise KafkaDecodeError(f"{codec.response.spec.name} v{version}: {len(buf) - pos} bytes "
                               "left over")
    return Response(header, body)


def request_class(api_key: int) -> type:
    return message_spec(apis.BY_KEY[api_key].name + "Request").cls


def response_class(api_key: int) -> type:
    return message_spec(apis.BY_KEY[api_key].name + "Response").cls


def response_expected(api_key: int, body) -> bool:
    """False for a Produce with acks=0: Kafka sends no response at all (kafka-notes §9.8)."""
    return not (api_key == apis.PRODUCE and body.acks == 0)
