"""Streams: get, list, create, update, delete, purge (wire §3.6).

Files and metadata change in an order that a failure or a crash cannot turn into a half-made
or resurrected stream (see ``storage.directories``): create writes the stream's directory and
manifest, then commits the row (a failed commit removes the directory); delete renames the
directory to its tombstone, commits, then removes the tombstone (a failed commit renames it
back).
"""

from __future__ import annotations

import logging
from typing import Callable

from rill import errors
from rill.server.auth.permissioner import Action
from rill.server.core.applying import apply_stream_renamed
from rill.server.core.model import Session, Stream
from rill.server.core.names import validate_name
from rill.server.core.catalog import StreamRow
from rill.server.core.state import CoreState, catalogue_change
from rill.server.core.types import Ref
from rill.server.core.partitions import (
    purge_logs,
    remove_tombstones,
    restore_directories,
    retire_directories,
)
from rill.server.storage.directories import remove_tree, write_manifest

log = logging.getLogger(__name__)

class StreamService:
    def __init__(self, state: CoreState, on_stream_deleted: Callable[[Stream], None]) -> None:
        self.state = state
        self.on_stream_deleted = on_stream_deleted  # consumer groups drop the stream's groups

    def get_stream(self, session: Session, stream_id: Ref) -> Stream:
        stream = self.state.find_stream(stream_id)
        self.state.authorize(session, Action.READ_STREAM, stream.id)
        return stream

    def get_streams(self, session: Session) -> list[Stream]:
        self.state.authorize(session, Action.LIST_STREAMS)
        return [self.state.streams[sid] for sid in sorted(self.state.streams)]

    @catalogue_change
    async def create_stream(self, session: Session, name: str, stream_id: int = 0) -> Stream:
        """A new stream; ``stream_id`` 0 takes the lowest free id. A catalogue change (its
        one manifest is written on the loop): it cannot take the id or the name of a stream
        whose deletion is under way."""
        state = self.state
        state.authorize(session, Action.CREATE_STREAM)
        name = validate_name(name, errors.InvalidStreamName)
        if state.streams.named(name) is not None:
            raise errors.StreamNameAlreadyExists(name, field="name")
        stream_id = stream_id or state.streams.lowest_free_id()
        if stream_id in state.streams:
            raise errors.StreamIdAlreadyExists(stream_id, field="stream_id")
        row = StreamRow(stream_id, name, state.clock())
        directory = state.paths.stream_dir(stream_id)
        try:
            write_manifest(state.paths.stream_manifest(stream_id), row, state.durability)
        except OSError as error:
            remove_tree(directory)
            raise errors.CannotCreateStreamDirectory(stream_id, directory) from error
        try:
            row = await state.store.create_stream(row)
        except BaseException:
            remove_tree(directory)
            raise
        stream = state.streams[stream_id] = Stream(row.id, row.name, row.created_at)
        return stream

    async def update_stream(self, session: Session, stream_id: Ref, name: str) -> None:
        state = self.state
        stream = state.find_stream(stream_id)
        state.authorize(session, Action.MANAGE_STREAM, stream.id)
        name = validate_name(name, errors.InvalidStreamName)
        if name == stream.name:
            return
        if state.streams.named(name) is not None:
            raise errors.StreamNameAlreadyExists(name, field="name")
        await state.store.update_stream(stream.id, name)
        apply_stream_renamed(state, stream, name)  # and its manifest (``core.applying``)

    @catalogue_change
    async def delete_stream(self, session: Session, stream_id: Ref) -> None:
        """Removes its files off the event loop (``core.partitions``)."""
        state = self.state
        stream = state.find_stream(stream_id)
        state.authorize(session, Action.MANAGE_STREAM, stream.id)
        del state.streams[stream.id]  # nothing new reaches it; put back if the deletion fails
        try:
            tombstones = await retire_directories(state, [state.paths.stream_dir(stream.id)])
        except OSError as error:
            state.streams[stream.id] = stream
            raise errors.CannotDeleteStreamDirectory(stream.id) from error
        try:
            await state.store.delete_stream(stream.id)
        except BaseException:
            state.streams[stream.id] = stream
            await restore_directories(state, tombstones)
            raise
        self.on_stream_deleted(stream)
        await remove_tombstones(state, tombstones, [
            partition for topic in stream.topics.values()
            for partition in topic.partitions.values()])

    @catalogue_change
    async def purge_stream(self, session: Session, stream_id: Ref) -> None:
        state = self.state
        stream = state.find_stream(stream_id)
        state.authorize(session, Action.MANAGE_STREAM, stream.id)
        await state.store.purge_stream(stream.id)
        if state.cluster is not None:
            return  # every replica empties itself for the partition's new incarnation
        await purge_logs(state, [partition for topic in stream.topics.values()
                                 for partition in topic.partitions.values()])
