"""Following a partition live: ``GET /streams/{s}/topics/{t}/messages/follow``, a stream of
server-sent events (``text/event-stream``), what the web console's "Follow" shows.

Owns: the follow route. It is a rill extension of the HTTP API, not in Iggy's. One request is
one bounded stream: it starts at ``offset`` (absent: the partition's end, so only new messages
come), and loops "long poll, then read": WAIT_FOR_MESSAGES (woken by the append, no timer
loop) then POLL_MESSAGES by offset (no consumer offset stored), each through the Iggy dispatch
with the caller's session, so permissions are those of a poll. Events:

* ``start`` once, ``{"offset": N}``: where the stream begins;
* ``messages``, ``id:`` the next offset, data as ``GET .../messages`` answers (PolledMessages);
* a comment line (``: waiting``) after each long poll that brought nothing, so idle proxies
  and the client see the link alive;
* ``end`` last, ``{"reason": ...}``: ``limit`` messages were sent, ``MAX_SECONDS`` passed,
  or an error (the topic was deleted, ...). The client reconnects from ``id`` if it wants more.

The stream ends when the client goes (seen at the next write, after a long poll at most),
after ``limit`` messages (at most ``MAX_MESSAGES``) or ``MAX_SECONDS``. Errors before the first
byte (unknown topic or partition, no permission) answer the usual JSON error.

Memory: an event carries at most ``BATCH`` messages and ``[http] max_poll_size`` bytes of them
(less while the reply memory is short: ``replies.ReplyMemory``), its JSON is written a message
at a time as the client reads, and the next event is read only once this one has left the
server (a client that reads nothing holds one event; one that reads too slowly is dropped:
``replies.ReplyWriter``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Iterator, Optional

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from rill import errors
from rill.protocol.iggy import http_json
from rill.protocol.iggy.commands.long_poll import WaitForMessages
from rill.protocol.iggy.http_json.records import polled_json_text
from rill.protocol.iggy.http_json.requests import path_ids
from rill.protocol.iggy.messages import iter_polled_messages
from rill.protocol.iggy.responses.messages import PolledMessages
from rill.server.transports.http.auth import session_of
from rill.server.transports.http.replies import ReplyWriter, StreamedReply
from rill.server.transports.http.routes.common import SECURED, context, execute_command, replies

router = APIRouter(tags=["messages"], dependencies=SECURED)

MAX_MESSAGES = 10_000  # per stream: then "end", and the client may reconnect
MAX_SECONDS = 600.0  # per stream
WAIT_MS = 15_000  # one long poll
BATCH = 100  # messages read at most per event

T = "/streams/{stream_id}/topics/{topic_id}"


def _event(name: str, data: Any, event_id: int | None = None) -> str:
    head = f"event: {name}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    return head + f"data: {json.dumps(data, separators=(',', ':'))}\n\n"


@router.get(T + "/messages/follow", response_class=StreamingResponse,  # (for OpenAPI)
            responses={**replies(body=False), 200: {"content": {"text/event-stream": {}},
                                                    "description": "Server-sent events"}},
            summary="Follow a partition's new messages as server-sent events (rill extension)")
async def follow_messages(
    request: Request,
    stream_id: str,
    topic_id: str,
    partition_id: int = Query(1, ge=1, le=2**32 - 1),
    offset: Optional[int] = Query(None, ge=0, le=2**64 - 1,
                                  description="The first offset to send; absent: the end (new messages only)"),
    limit: int = Query(1000, ge=1, le=MAX_MESSAGES, description="Messages to send, then the stream ends"),
) -> StreamedReply:
    core = context(request).core
    session = session_of(request)
    stream_ref, topic_ref = path_ids(request.path_params, "stream_id", "topic_id")

    async def wait(position: int, wait_ms: int) -> int:
        """Long-poll past ``position``; the partition's next offset."""
        ends = await execute_command(core, session, WaitForMessages(
            stream_ref, topic_ref, ((partition_id, position),), max_wait_ms=wait_ms))
        return ends[0].next_offset

    end = await wait(0, 0)  # checks the topic, the partition and the permission before streaming
    start = end if offset is None else offset
    http = context(request)

    async def events(writer: ReplyWriter) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MAX_SECONDS
        position, sent = start, 0
        if not await writer.write([_event("start", {"offset": start})]):
            return
        reason = "limit"
        try:
            while sent < limit:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    reason = "time"
                    break
                await wait(position, int(min(WAIT_MS, remaining * 1000)))
                if writer.gone:
                    return
                query = {"partition_id": str(partition_id), "kind": "offset", "value": str(position),
                         "count": str(min(BATCH, limit - sent))}
                command = http_json.decode_request("poll_messages", request.path_params, query, None)
                grant = http.replies.grant()
                try:
                    session.poll_limit = grant.size
                    polled = await execute_command(core, session, command)
                    grant.hold(len(polled.raw))
                    if not polled.count:
                        written = await writer.write([": waiting\n\n"])
                    else:
                        position = _last_offset(polled) + 1
                        sent += polled.count
                        # the next event is read only once this one has left (drain)
                        written = await writer.write(_messages_event(polled, position), drain=True)
                finally:
                    grant.release()
                if not written:
                    return
        except errors.RillError as error:
            reason = error.reason
        await writer.write([_event("end", {"reason": reason, "next_offset": position})])

    return StreamedReply(events, "text/event-stream", http.limits.min_request_rate,
                         http.limits.request_timeout,
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _last_offset(polled: PolledMessages) -> int:
    last = 0
    for message in iter_polled_messages(polled.raw, polled.count):
        last = message.offset
    return last


def _messages_event(polled: PolledMessages, next_offset: int) -> Iterator[str]:
    yield f"event: messages\nid: {next_offset}\ndata: "
    yield from polled_json_text(polled)
    yield "\n\n"
