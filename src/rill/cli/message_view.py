"""How a polled message is shown: a JSON object, a table row, a streamed line, a ``--format``.

Owns: the JSON shape of a message, the columns of the message table, the line ``--follow`` and
``--exit-at-end`` print, and the ``--format`` template language.

Bytes are never mangled (``output.binary_text``): with ``--encoding text`` (the default) a
payload that is valid UTF-8 is shown as text and any other as base64 -- marked
``"payload_encoding": "base64"`` in JSON and ``base64:`` in text; ``--encoding base64|hex``
encodes every payload. A message's key is its ``rill.key`` header (``KEY_HEADER``). A raw
header value -- every Kafka header arrives as one -- is shown as text when it is printable
UTF-8, else in hex (``params.header_text``/``header_json``).

``--format`` tokens (kcat-like; each message is printed through the template, followed by a
line break unless the template ends with one):

====  =========================================  ====  ======================================
%t    topic (as given on the command line)       %T    timestamp, µs since the epoch
%p    partition ID                               %s    payload
%o    offset                                     %S    payload size in bytes
%k    key (the ``rill.key`` header; empty)       %h    headers, ``key=value`` comma-separated
%i    message ID (UUID)                          %%    a percent sign
====  =========================================  ====  ======================================

Escapes: ``\\n`` line break, ``\\t`` tab, ``\\r``, ``\\0`` NUL, ``\\\\`` backslash.
"""

from __future__ import annotations

import base64
from typing import Any, Callable

import typer

from rill.cli import params
from rill.cli.output import binary_cell, binary_text, format_time, message_id
from rill.protocol.iggy.headers import KEY_HEADER
from rill.protocol.iggy.primitives import MessageState

ENCODINGS = ("text", "base64", "hex")
MESSAGE_COLUMNS = ("Offset", "Timestamp", "ID", "Headers", "Payload")
MESSAGE_DROPPABLE = ("ID", "Headers")  # at narrow widths
FORMAT_HELP = ("Print each message through this template: %t topic, %p partition, %o offset, "
               "%k key, %i message ID, %T timestamp (µs), %s payload, %S payload size, "
               "%h headers, %% a percent sign; escapes \\n \\t \\r \\0 \\\\. "
               "A line break follows unless the template ends with one.")


def payload_text(payload: bytes, encoding: str) -> tuple[str, str]:
    """(payload as text, its encoding): ``--encoding text`` keeps UTF-8, else base64."""
    if encoding == "base64":
        return base64.b64encode(payload).decode("ascii"), "base64"
    if encoding == "hex":
        return payload.hex(), "hex"
    return binary_text(payload)


def payload_cell(payload: bytes, encoding: str) -> str:
    return binary_cell(payload) if encoding == "text" else payload_text(payload, encoding)[0]


def key_cell(message: Any) -> str:
    key = message.headers.get(KEY_HEADER)
    return "" if key is None else binary_cell(key.value)


def message_json(message: Any, partition_id: int, encoding: str) -> dict[str, Any]:
    try:
        state: Any = MessageState(message.state).name.lower()
    except ValueError:
        state = message.state
    payload, payload_encoding = payload_text(message.payload, encoding)
    return {
        "partition_id": partition_id, "offset": message.offset, "timestamp": message.timestamp,
        "id": message_id(message.id), "checksum": message.checksum, "state": state,
        "headers": {key: params.header_json(value) for key, value in message.headers.items()},
        "payload": payload, "payload_encoding": payload_encoding,
    }


def message_row(message: Any, encoding: str) -> tuple[Any, ...]:
    return (message.offset, format_time(message.timestamp), message_id(message.id),
            params.header_text(message.headers), payload_cell(message.payload, encoding))


def message_line(message: Any, partition_id: int, encoding: str) -> str:
    """The streamed line: partition, offset, time, [headers,] payload, tab-separated."""
    headers = params.header_text(message.headers)
    fields = [str(partition_id), str(message.offset), format_time(message.timestamp),
              *([headers] if headers else []), payload_cell(message.payload, encoding)]
    return "\t".join(fields)


# --- --format --------------------------------------------------------------------------------

_Field = Callable[[Any, int, str, str], str]  # (message, partition_id, topic, encoding) -> text

_TOKENS: dict[str, _Field] = {
    "t": lambda message, partition, topic, encoding: topic,
    "p": lambda message, partition, topic, encoding: str(partition),
    "o": lambda message, partition, topic, encoding: str(message.offset),
    "k": lambda message, partition, topic, encoding: key_cell(message),
    "i": lambda message, partition, topic, encoding: message_id(message.id),
    "T": lambda message, partition, topic, encoding: str(message.timestamp),
    "s": lambda message, partition, topic, encoding: payload_cell(message.payload, encoding),
    "S": lambda message, partition, topic, encoding: str(len(message.payload)),
    "h": lambda message, partition, topic, encoding: params.header_text(message.headers),
}


class MessageFormat:
    """A parsed ``--format`` template (a usage error for an unknown token or escape)."""

    def __init__(self, template: str) -> None:
        self.pieces: list[str | _Field] = []
        literal: list[str] = []
        characters = iter(template)
        for character in characters:
            if character not in "%\\":
                literal.append(character)
                continue
            following = next(characters, "")
            if character == "\\" and following in params.ESCAPES:
                literal.append(params.ESCAPES[following])
            elif character == "%" and following == "%":
                literal.append("%")
            elif character == "%" and following in _TOKENS:
                self.pieces.extend(["".join(literal), _TOKENS[following]])
                literal = []
            else:
                tokens = ", ".join(f"%{token}" for token in _TOKENS)
                raise typer.BadParameter(
                    f"--format: unknown {character}{following} (tokens: {tokens}, %%; "
                    "escapes: \\n \\t \\r \\0 \\\\)")
        if not literal or literal[-1] != "\n":
            literal.append("\n")
        self.pieces.append("".join(literal))

    def render(self, message: Any, partition_id: int, topic: str, encoding: str) -> str:
        return "".join(piece if isinstance(piece, str) else piece(message, partition_id, topic, encoding)
                       for piece in self.pieces)
