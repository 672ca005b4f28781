"""Name rules and normalisation for streams, topics, groups, users and tokens (wire §2.8)."""

from __future__ import annotations

import re

from rill.errors import RillError

_NAME_PATTERN = re.compile(r"^[\w.\-\s]+$")
_WHITESPACE = re.compile(r"\s+")


def normalize_name(name: str) -> str:
    """Lowercase, and whitespace-separated words joined with '.' ("My Stream" -> "my.stream")."""
    return ".".join(_WHITESPACE.split(name.strip().lower()))


def validate_name(
    name: str, error: type[RillError], min_length: int = 1, max_length: int = 255
) -> str:
    """Check length (UTF-8 bytes) and charset, then return the normalised name."""
    size = len(name.encode("utf-8"))
    if not min_length <= size <= max_length or not _NAME_PATTERN.match(name):
        raise error(field="name")
    normalized = normalize_name(name)
    if not normalized:
        raise error(field="name")
    return normalized
