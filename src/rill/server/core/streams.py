"""Streams: get, list, create, update, delete, purge (wire §3.6)."""

from __future__ import annotations

from rill import errors
from rill.protocol.commands.streams import (
    CreateStream,
    DeleteStream,
    GetStream,
    GetStreams,
    PurgeStream,
    UpdateStream,
)
from rill.protocol.responses.streams import Stream as StreamRecord
from rill.protocol.responses.streams import StreamDetails
from rill.server.core.model import Session, Stream
from rill.server.core.names import validate_name
from rill.server.core.state import CoreState
from rill.server.core.views import stream_details, stream_record
from rill.server.storage.directories import remove_stream_files
from rill.server.storage.metadata import StreamRow


class StreamService:
    def __init__(self, state: CoreState) -> None:
        self.state = state
        self.on_stream_deleted = lambda stream: None  # consumer groups drop the stream's groups

    def get_stream(self, session: Session, command: GetStream) -> StreamDetails:
        stream = self.state.find_stream(command.stream_id)
        self.state.authorize(session, "get_stream", stream.id)
        return stream_details(stream)

    def get_streams(self, session: Session, command: GetStreams) -> list[StreamRecord]:
        self.state.authorize(session, "get_streams")
        return [stream_record(self.state.streams[sid]) for sid in sorted(self.state.streams)]

    def create_stream(self, session: Session, command: CreateStream) -> StreamDetails:
        state = self.state
        state.authorize(session, "create_stream")
        name = validate_name(command.name, errors.InvalidStreamName)
        if any(stream.name == name for stream in state.streams.values()):
            raise errors.StreamNameAlreadyExists(name, field="name")
        stream_id = command.stream_id or state.lowest_free_id(state.streams)
        if stream_id in state.streams:
            raise errors.StreamIdAlreadyExists(stream_id, field="stream_id")
        stream = Stream(stream_id, name, state.clock())
        state.store.create_stream(StreamRow(stream.id, stream.name, stream.created_at))
        state.streams[stream.id] = stream
        return stream_details(stream)

    def update_stream(self, session: Session, command: UpdateStream) -> None:
        state = self.state
        stream = state.find_stream(command.stream_id)
        state.authorize(session, "update_stream", stream.id)
        name = validate_name(command.name, errors.InvalidStreamName)
        if name == stream.name:
            return
        if any(other.name == name for other in state.streams.values()):
            raise errors.StreamNameAlreadyExists(name, field="name")
        state.store.update_stream(stream.id, name)
        stream.name = name

    def delete_stream(self, session: Session, command: DeleteStream) -> None:
        state = self.state
        stream = state.find_stream(command.stream_id)
        state.authorize(session, "delete_stream", stream.id)
        state.store.delete_stream(stream.id)
        del state.streams[stream.id]
        self.on_stream_deleted(stream)
        for topic in stream.topics.values():
            for partition in topic.partitions.values():
                partition.log.destroy()
        remove_stream_files(state.paths, stream.id)

    def purge_stream(self, session: Session, command: PurgeStream) -> None:
        state = self.state
        stream = state.find_stream(command.stream_id)
        state.authorize(session, "purge_stream", stream.id)
        state.store.purge_stream(stream.id)
        for topic in stream.topics.values():
            for partition in topic.partitions.values():
                partition.log.purge()
                partition.offsets.clear()
