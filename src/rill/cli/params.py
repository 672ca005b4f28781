"""Parsers for the values typed on a command line: ids, durations, sizes, headers, enums.

Owns: turning text into the SDK's argument types, raising ``typer.BadParameter`` (a usage
error, exit code 2) for anything malformed, before a connection is opened.

* identifiers: all digits -> numeric id, anything else -> name (``orders`` / ``7``);
* durations (message expiry, token expiry): ``90s``, ``15m``, ``1h 30m``, ``7d``, ``500ms``,
  or ``never`` / ``default`` (the server's default); the result is µs as on the wire;
* sizes (max topic size): ``10GB``, ``512MiB``, ``2000000`` (bytes), ``unlimited``, ``default``;
* headers: ``key:kind:value`` where kind is a header kind name (``string``, ``uint32``, ``bool``,
  ``raw`` with a hex value, ...); the value may itself contain ``:``;
* timestamps: µs since the epoch or an ISO 8601 date/time (local time unless it has an offset);
* separators (``--key-separator``): text with the escapes ``\\t``, ``\\r``, ``\\0``, ``\\\\``.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import IntEnum
from typing import TypeVar

import typer

from rill.cli.output import binary_cell, binary_text
from rill.protocol.iggy.headers import HeaderKind, HeaderValue

U64_MAX = 0xFFFF_FFFF_FFFF_FFFF
E = TypeVar("E", bound=IntEnum)

_DURATION_UNITS = {
    "us": 1, "µs": 1, "ms": 1_000, "s": 1_000_000, "sec": 1_000_000, "m": 60_000_000,
    "min": 60_000_000, "h": 3_600_000_000, "hour": 3_600_000_000, "d": 86_400_000_000,
    "day": 86_400_000_000, "days": 86_400_000_000, "w": 604_800_000_000,
}
_SIZE_UNITS = {
    "": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
_DURATION_PART = re.compile(r"(\d+)\s*([a-zµ]+)")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z]*)$")


def identifier(value: str) -> int | str:
    """``"7"`` -> 7, ``"orders"`` -> ``"orders"`` (checked against the wire limits)."""
    text = value.strip()
    if not text:
        raise typer.BadParameter("an id or a name is required")
    if text.isdigit():
        number = int(text)
        if not 0 < number <= 0xFFFFFFFF:
            raise typer.BadParameter(f"numeric id {number} is outside 1..4294967295")
        return number
    if len(text.encode("utf-8")) > 255:
        raise typer.BadParameter("a name is at most 255 bytes")
    return text


def identifier_or_none(value: str | None) -> int | str | None:
    return None if value is None else identifier(value)


def duration(value: str) -> int:
    """A duration in µs; ``never`` is u64::MAX and ``default`` 0 (wire §2.5)."""
    text = value.strip().lower()
    if text in ("never", "none", "unlimited", "forever"):
        return U64_MAX
    if text in ("default", "server_default", "server-default", "0"):
        return 0
    if text.isdigit():
        return int(text) * 1_000_000  # bare number: seconds
    total, position = 0, 0
    for match in _DURATION_PART.finditer(text):
        if text[position : match.start()].strip():
            break
        unit = _DURATION_UNITS.get(match.group(2))
        if unit is None:
            raise typer.BadParameter(f"unknown duration unit {match.group(2)!r} in {value!r}")
        total += int(match.group(1)) * unit
        position = match.end()
    if position == 0 or text[position:].strip():
        raise typer.BadParameter(f"{value!r} is not a duration (e.g. 90s, 15m, 1h 30m, 7d, never)")
    return total


def size(value: str) -> int:
    """A size in bytes; ``unlimited`` is u64::MAX and ``default`` 0 (wire §2.5)."""
    text = value.strip().lower().replace(" ", "")
    if text in ("unlimited", "none", "never"):
        return U64_MAX
    if text in ("default", "server_default", "server-default"):
        return 0
    match = _SIZE.match(text)
    if not match or match.group(2) not in _SIZE_UNITS:
        raise typer.BadParameter(f"{value!r} is not a size (e.g. 10GB, 512MiB, unlimited)")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2)])


def enum_value(enum_type: type[E], value: str, what: str) -> E:
    """An enum member by name (case-insensitive, ``-`` = ``_``) or number."""
    text = value.strip().upper().replace("-", "_")
    if text.isdigit():
        try:
            return enum_type(int(text))
        except ValueError:
            pass
    elif text in enum_type.__members__:
        return enum_type[text]
    names = ", ".join(member.name.lower() for member in enum_type)
    raise typer.BadParameter(f"unknown {what} {value!r} (one of: {names})")


_KIND_ALIASES = {"str": "string", "text": "string", "boolean": "bool", "bytes": "raw",
                 "int": "int64", "uint": "uint64", "float": "float64", "double": "float64"}


def header(spec: str) -> tuple[str, HeaderValue]:
    """``key:kind:value`` -> (key, HeaderValue)."""
    parts = spec.split(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise typer.BadParameter(f"header {spec!r} is not key:kind:value (e.g. trace:string:abc)")
    key, kind_name, text = parts
    kind = enum_value(HeaderKind, _KIND_ALIASES.get(kind_name.lower(), kind_name), "header kind")
    try:
        if kind == HeaderKind.RAW:
            header_value = HeaderValue.raw(bytes.fromhex(text))
        elif kind == HeaderKind.STRING:
            header_value = HeaderValue.string(text)
        elif kind == HeaderKind.BOOL:
            flag = text.strip().lower()
            if flag not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError("a bool is true or false")
            header_value = HeaderValue.bool(flag in ("true", "1", "yes"))
        elif kind in (HeaderKind.FLOAT32, HeaderKind.FLOAT64):
            header_value = HeaderValue.float(kind, float(text))
        else:
            header_value = HeaderValue.int(kind, int(text, 0))
    except (ValueError, OverflowError) as error:
        raise typer.BadParameter(f"header {spec!r}: bad {kind.name.lower()} value ({error})") from None
    if not 1 <= len(header_value.value) <= 255:
        raise typer.BadParameter(f"header {spec!r}: a value is 1..255 bytes")
    return key, header_value


def raw_text(data: bytes) -> str | None:
    """A raw header value as text when it is printable UTF-8 (a Kafka header's value usually
    is: Kafka headers arrive as raw bytes), else None (shown in hex)."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.isprintable() else None


def header_json(value: HeaderValue) -> dict[str, object]:
    """A header value as ``{"kind": "uint32", "value": 5}``: raw values in hex, or as text with
    ``"encoding": "text"`` when printable UTF-8; a string that is not valid UTF-8 in base64 with
    ``"encoding": "base64"``."""
    kind = value.kind.name.lower()
    if value.kind == HeaderKind.STRING:
        text, encoding = binary_text(value.value)
        return {"kind": kind, "value": text, **({"encoding": encoding} if encoding != "text" else {})}
    if value.kind == HeaderKind.RAW and (text := raw_text(value.value)) is not None:
        return {"kind": kind, "value": text, "encoding": "text"}
    python = value.to_python()
    if isinstance(python, bytes):
        python = python.hex()
    return {"kind": kind, "value": python}


def header_text(headers: dict[str, HeaderValue]) -> str:
    """``key=value`` pairs for a table cell (``hex:``/``base64:`` mark values shown encoded; a
    raw value that is printable UTF-8, as Kafka's headers usually are, is shown as text)."""
    def shown(value: HeaderValue) -> str:
        if value.kind == HeaderKind.RAW:
            text = raw_text(value.value)
            return f"hex:{value.value.hex()}" if text is None else text
        if value.kind == HeaderKind.STRING:
            return binary_cell(value.value)
        return str(value.to_python())

    return ", ".join(f"{key}={shown(value)}" for key, value in headers.items())


def timestamp(value: str) -> int:
    """µs since the epoch from digits or an ISO 8601 date/time."""
    text = value.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is not a timestamp (µs since the epoch or e.g. 2025-01-31T12:00:00)"
        ) from None
    return int(moment.timestamp() * 1_000_000)


ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}  # after a backslash


def separator(value: str) -> bytes:
    """A line's key/payload separator, escapes replaced; never empty, never a line break."""
    text = re.sub(r"\\(.)", lambda match: ESCAPES.get(match.group(1), match.group(0)), value)
    if not text or "\n" in text:
        raise typer.BadParameter("a key separator is not empty and has no line break")
    return text.encode("utf-8")


def examples(*lines: str) -> str:
    """A verb's help epilog: ``Examples:`` and one command per paragraph."""
    return "Examples:\n\n" + "\n\n".join(f"  {line}" for line in lines)


# --- reusable arguments ----------------------------------------------------------------------


def _identifier_callback(value: str | None) -> int | str | None:
    return identifier_or_none(value)


def id_argument(help: str) -> object:
    """A required positional id-or-name (converted before the verb runs)."""
    return typer.Argument(..., help=help, callback=_identifier_callback, show_default=False)


def stream_argument() -> object:
    return id_argument("Stream ID or name.")


def topic_argument() -> object:
    return id_argument("Topic ID or name.")
