"""Command codes and the table code -> command class (wire reference §2 "Request codes").

Owns: ``COMMANDS``, the one dispatch table the server and the SDK share. Invariant: every code
of the seed's list (44 commands) appears exactly once; rill extensions use codes outside
Iggy's ranges and are listed in ``EXTENSION_CODES``.
"""

from __future__ import annotations

from rill.protocol.iggy.commands import (
    columnar,
    groups,
    long_poll,
    messages,
    offsets,
    partitions,
    streams,
    system,
    tokens,
    topics,
    transactions,
    users,
)
from rill.protocol.iggy.commands.base import Command

_MODULES = (system, users, tokens, messages, offsets, streams, topics, partitions, groups,
            columnar, transactions, long_poll)  # the last three: rill extensions
# (docs/extensions.md), as is offsets.GetConsumerLag


def _collect() -> dict[int, type[Command]]:
    table: dict[int, type[Command]] = {}
    for module in _MODULES:
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Command)
                and value.__module__ == module.__name__
                and hasattr(value, "CODE")
            ):
                if value.CODE in table:
                    raise RuntimeError(f"duplicate command code {value.CODE}")
                table[value.CODE] = value
    return dict(sorted(table.items()))


COMMANDS: dict[int, type[Command]] = _collect()
COMMANDS_BY_NAME: dict[str, type[Command]] = {cls.NAME: cls for cls in COMMANDS.values()}

# Codes of the Iggy 0.4.x seed list (wire reference / seeds/iggy-binary-schema.md).
IGGY_CODES: frozenset[int] = frozenset(
    {1, 10, 11, 20, 21, 22, 31, 32, 33, 34, 35, 36, 37, 38, 39, 41, 42, 43, 44, 100, 101, 102,
     120, 121, 200, 201, 202, 203, 204, 205, 300, 301, 302, 303, 304, 305, 402, 403,
     600, 601, 602, 603, 604, 605}
)
EXTENSION_CODES: frozenset[int] = frozenset(COMMANDS) - IGGY_CODES


def decode_command(code: int, payload: bytes | bytearray | memoryview) -> Command:
    """Decode a request payload; unknown codes and malformed payloads raise DecodeError."""
    from rill.protocol.buffer import DecodeError

    command_class = COMMANDS.get(code)
    if command_class is None:
        raise DecodeError(f"unknown command code {code}")
    return command_class.decode(payload)
