"""Stream commands 200-205 (wire reference §3.6)."""

from __future__ import annotations

from dataclasses import dataclass

from rill.protocol.iggy.commands.base import (
    IDENT,
    STR8,
    U32,
    Command,
    EmptyCommand,
    list_response,
    optional_response,
    single_response,
)
from rill.protocol.iggy.primitives import Identifier
from rill.protocol.iggy.responses.streams import Stream, StreamDetails


@dataclass(frozen=True, slots=True)
class GetStream(Command):
    """200 GET_STREAM: ident stream_id. OK: StreamDetails, or empty when not found."""

    CODE = 200
    NAME = "get_stream"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT,)
    stream_id: Identifier

    decode_response = staticmethod(optional_response(StreamDetails.decode))


@dataclass(frozen=True, slots=True)
class GetStreams(EmptyCommand):
    """201 GET_STREAMS: empty. OK: concatenated stream headers."""

    CODE = 201
    NAME = "get_streams"

    decode_response = staticmethod(list_response(Stream.decode))


@dataclass(frozen=True, slots=True)
class CreateStream(Command):
    """202 CREATE_STREAM: u32 stream_id (0 = auto-assign); str8 name. OK: StreamDetails."""

    CODE = 202
    NAME = "create_stream"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (U32, STR8)
    stream_id: int
    name: str

    decode_response = staticmethod(single_response(StreamDetails.decode))


@dataclass(frozen=True, slots=True)
class DeleteStream(Command):
    """203 DELETE_STREAM: ident stream_id. OK: empty."""

    CODE = 203
    NAME = "delete_stream"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT,)
    stream_id: Identifier


@dataclass(frozen=True, slots=True)
class UpdateStream(Command):
    """204 UPDATE_STREAM: ident stream_id; str8 name. OK: empty."""

    CODE = 204
    NAME = "update_stream"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, STR8)
    stream_id: Identifier
    name: str


@dataclass(frozen=True, slots=True)
class PurgeStream(Command):
    """205 PURGE_STREAM: ident stream_id. OK: empty."""

    CODE = 205
    NAME = "purge_stream"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT,)
    stream_id: Identifier
