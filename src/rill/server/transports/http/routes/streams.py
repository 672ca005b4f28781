"""Stream, topic and partition routes (wire §8.4).

Owns: the routes only; each is one Core call through ``run``. Path ids accept a number
(numeric id) or any other text (a name).
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from rill.server.transports.http import schemas
from rill.server.transports.http.models import (
    CreatePartitionsBody,
    CreateStreamBody,
    CreateTopicBody,
    UpdateStreamBody,
    UpdateTopicBody,
)
from rill.server.transports.http.routes.common import SECURED, replies, run

router = APIRouter(tags=["streams"], dependencies=SECURED)
topics = APIRouter(tags=["topics"], dependencies=SECURED)

Id = str  # a number (numeric id) or any other text (a name)
S = "/streams/{stream_id}"
T = S + "/topics/{topic_id}"


@router.get("/streams", response_model=None, responses=replies(list[schemas.Stream], body=False))
async def get_streams(request: Request) -> Response:
    return await run(request, "get_streams")


@router.get(S, response_model=None, responses=replies(schemas.StreamDetails, body=False))
async def get_stream(request: Request, stream_id: Id) -> Response:
    return await run(request, "get_stream")


@router.post("/streams", response_model=None, responses=replies(schemas.StreamDetails))
async def create_stream(request: Request, body: CreateStreamBody) -> Response:
    return await run(request, "create_stream", body)


@router.put(S, status_code=204, response_class=Response, responses=replies(status=204))
async def update_stream(request: Request, stream_id: Id, body: UpdateStreamBody) -> Response:
    return await run(request, "update_stream", body)


@router.delete(S, status_code=204, response_class=Response, responses=replies(status=204, body=False))
async def delete_stream(request: Request, stream_id: Id) -> Response:
    return await run(request, "delete_stream")


@router.delete(S + "/purge", status_code=204, response_class=Response,
               responses=replies(status=204, body=False))
async def purge_stream(request: Request, stream_id: Id) -> Response:
    return await run(request, "purge_stream")


@topics.get(S + "/topics", response_model=None, responses=replies(list[schemas.Topic], body=False))
async def get_topics(request: Request, stream_id: Id) -> Response:
    return await run(request, "get_topics")


@topics.get(T, response_model=None, responses=replies(schemas.TopicDetails, body=False))
async def get_topic(request: Request, stream_id: Id, topic_id: Id) -> Response:
    return await run(request, "get_topic")


@topics.post(S + "/topics", response_model=None, responses=replies(schemas.TopicDetails))
async def create_topic(request: Request, stream_id: Id, body: CreateTopicBody) -> Response:
    return await run(request, "create_topic", body)


@topics.get(S + "/topic-record-formats", response_model=None,
             responses=replies(list[schemas.TopicRecordFormat], body=False))
async def get_topic_record_formats(request: Request, stream_id: Id) -> Response:
    return await run(request, "get_topic_record_formats")


@topics.put(T, status_code=204, response_class=Response, responses=replies(status=204))
async def update_topic(request: Request, stream_id: Id, topic_id: Id, body: UpdateTopicBody) -> Response:
    return await run(request, "update_topic", body)


@topics.delete(T, status_code=204, response_class=Response, responses=replies(status=204, body=False))
async def delete_topic(request: Request, stream_id: Id, topic_id: Id) -> Response:
    return await run(request, "delete_topic")


@topics.delete(T + "/purge", status_code=204, response_class=Response,
               responses=replies(status=204, body=False))
async def purge_topic(request: Request, stream_id: Id, topic_id: Id) -> Response:
    return await run(request, "purge_topic")


@topics.post(T + "/partitions", status_code=201, response_class=Response, tags=["partitions"],
             responses=replies(status=201))
async def create_partitions(request: Request, stream_id: Id, topic_id: Id,
                            body: CreatePartitionsBody) -> Response:
    return await run(request, "create_partitions", body)


@topics.delete(T + "/partitions", status_code=204, response_class=Response, tags=["partitions"],
               responses=replies(status=204, body=False))
async def delete_partitions(request: Request, stream_id: Id, topic_id: Id,
                            partitions_count: int = Query(1, ge=0, le=2**32 - 1)) -> Response:
    return await run(request, "delete_partitions")
