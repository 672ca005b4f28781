"""Long listings do not hold the event loop (issue 28 item 5): GET_STREAMS of 100,000 streams
took it for 1.4 s at once, so every other connection waited. The records are now built and
encoded a few hundred at a time, other work running in between; the answer is the same."""

from __future__ import annotations

import asyncio

from rill.protocol.iggy.commands.streams import GetStreams
from rill.protocol.iggy.commands.topics import GetTopics
from rill.protocol.iggy.primitives import Identifier
from rill.server.config import ServerConfig
from rill.server.core.core import Core
from rill.server.core.model import Stream, Topic
from rill.server.protocols.iggy.handler import handle_request

STREAMS = 20_000


async def _turns_while(work) -> tuple[int, object]:
    """How many turns another task got while ``work`` ran, and its result."""
    task = asyncio.ensure_future(work)
    turns = 0
    while not task.done():
        await asyncio.sleep(0)
        turns += 1
    return turns, task.result()


def test_get_streams_and_get_topics_of_20000_let_other_work_run(tmp_path):
    async def main() -> None:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        config.root.password_hash_cost = 4
        core = Core(config)
        await core.start()
        try:
            session = core.connect("127.0.0.1:1", "tcp")
            await core.users.login_user(session, "iggy", "iggy")
            streams = core.state.streams  # a listing needs no files: the model alone
            for stream_id in range(1, STREAMS + 1):
                streams[stream_id] = Stream(stream_id, f"s{stream_id}", stream_id)
            topics = streams[1].topics
            for topic_id in range(1, STREAMS + 1):
                topics[topic_id] = Topic(1, topic_id, f"t{topic_id}", topic_id, 1, 0, 0, 1,
                                         "iggy-v1")

            turns, reply = await _turns_while(handle_request(
                core, session, GetStreams.CODE, memoryview(GetStreams().encode())))
            listed = GetStreams.decode_response(b"".join(reply.parts)[8:])
            assert [(s.id, s.name, s.topics_count) for s in listed] == [
                (i, f"s{i}", STREAMS if i == 1 else 0) for i in range(1, STREAMS + 1)]
            assert turns >= 10  # before, 0: the loop was held for the whole listing

            command = GetTopics(Identifier.of(1))
            turns, reply = await _turns_while(handle_request(
                core, session, GetTopics.CODE, memoryview(command.encode())))
            listed = GetTopics.decode_response(b"".join(reply.parts)[8:])
            assert [(t.id, t.name) for t in listed] == [
                (i, f"t{i}") for i in range(1, STREAMS + 1)]
            assert turns >= 10
        finally:
            await core.stop()

    asyncio.run(main())
