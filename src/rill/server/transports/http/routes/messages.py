"""Message, consumer-offset and consumer-group routes (wire §8.4).

Owns: the routes only; each is one Core call through ``run``. The consumer of a poll or an
offset is always a regular consumer named by ``id`` (a number, or a name hashed like on the
binary side); HTTP callers cannot join groups, so there are no join/leave routes and no
group polls. A poll reads at most ``[http] max_poll_size`` (less while the reply memory is
short: ``replies.ReplyMemory``) and its JSON is written a message at a time as the client reads.
"""

from __future__ import annotations

from typing import Literal, Optional

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from rill.protocol.iggy.http_json.records import polled_json_text
from rill.server.transports.http import schemas
from rill.server.transports.http.models import CreateGroupBody, SendMessagesBody, StoreOffsetBody
from rill.server.transports.http.routes.common import SECURED, context, execute, replies, run

router = APIRouter(tags=["messages"], dependencies=SECURED)
groups = APIRouter(tags=["consumer groups"], dependencies=SECURED)

Id = str  # a number (numeric id) or any other text (a name)
T = "/streams/{stream_id}/topics/{topic_id}"
U32 = 2**32 - 1
U64 = 2**64 - 1
CONSUMER = Query("1", description="The consumer id: digits = numeric id, other text = a name")
PARTITION = Query(None, ge=0, le=U32, description="Absent: not given (partition 1)")


@router.post(T + "/messages", status_code=201, response_class=Response, responses=replies(status=201))
async def send_messages(request: Request, stream_id: Id, topic_id: Id, body: SendMessagesBody) -> Response:
    return await run(request, "send_messages", body)


@router.get(T + "/messages", response_model=None, responses=replies(schemas.PolledMessages, body=False))
async def poll_messages(
    request: Request,
    stream_id: Id,
    topic_id: Id,
    id: str = CONSUMER,
    partition_id: Optional[int] = PARTITION,
    kind: Literal["offset", "timestamp", "first", "last", "next"] = "offset",
    value: int = Query(0, ge=0, le=U64, description="An offset, or a µs timestamp"),
    count: int = Query(10, ge=0, le=U32),
    auto_commit: bool = False,
) -> Response:
    http = context(request)
    grant = http.replies.grant()
    try:
        polled = await execute(request, "poll_messages", poll_limit=grant.size)
        grant.hold(len(polled.raw))
        return http.reply(polled_json_text(polled), grant)
    except BaseException:
        grant.release()
        raise


@router.get(T + "/messages/flush/{partition_id}/{fsync}", response_class=Response,
            responses=replies(status=200, body=False))
async def flush_unsaved_buffer(request: Request, stream_id: Id, topic_id: Id,
                               partition_id: int = Path(ge=0, le=U32),
                               fsync: Literal["true", "false"] = Path()) -> Response:
    return await run(request, "flush_unsaved_buffer")


@router.get(T + "/consumer-offsets", response_model=None,
            responses=replies(schemas.ConsumerOffsetInfo, body=False), tags=["consumer offsets"])
async def get_consumer_offset(request: Request, stream_id: Id, topic_id: Id, id: str = CONSUMER,
                              partition_id: Optional[int] = PARTITION) -> Response:
    return await run(request, "get_consumer_offset")


@router.put(T + "/consumer-offsets", status_code=204, response_class=Response,
            responses=replies(status=204), tags=["consumer offsets"])
async def store_consumer_offset(request: Request, stream_id: Id, topic_id: Id,
                                body: StoreOffsetBody) -> Response:
    return await run(request, "store_consumer_offset", body)


@router.get(T + "/consumer-lag", response_model=None,
            responses=replies(list[schemas.ConsumerLag], body=False), tags=["consumer offsets"],
            summary="Committed offset, end offset and lag of every group and stored consumer")
async def get_consumer_lag(request: Request, stream_id: Id, topic_id: Id) -> Response:
    return await run(request, "get_consumer_lag")


@groups.get(T + "/consumer-groups", response_model=None,
            responses=replies(list[schemas.ConsumerGroup], body=False))
async def get_consumer_groups(request: Request, stream_id: Id, topic_id: Id) -> Response:
    return await run(request, "get_consumer_groups")


@groups.get(T + "/consumer-groups/{group_id}", response_model=None,
            responses=replies(schemas.ConsumerGroupDetails, body=False))
async def get_consumer_group(request: Request, stream_id: Id, topic_id: Id, group_id: Id) -> Response:
    return await run(request, "get_consumer_group")


@groups.post(T + "/consumer-groups", status_code=201, response_model=None,
             responses=replies(schemas.ConsumerGroupDetails, status=201))
async def create_consumer_group(request: Request, stream_id: Id, topic_id: Id,
                                body: CreateGroupBody) -> Response:
    return await run(request, "create_consumer_group", body)


@groups.delete(T + "/consumer-groups/{group_id}", status_code=204, response_class=Response,
               responses=replies(status=204, body=False))
async def delete_consumer_group(request: Request, stream_id: Id, topic_id: Id, group_id: Id) -> Response:
    return await run(request, "delete_consumer_group")
