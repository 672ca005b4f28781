"""Every consumer of a topic, whatever its protocol: ``GET /streams/{s}/topics/{t}/consumers``,
what the web console's Consumers view shows (a rill extension of the HTTP API).

Owns: the route and the naming of consumers for people. Iggy's ``consumer-lag`` lists only
Iggy's consumers and groups, by number; this lists every stored position by its name and kind,
so Kafka consumer groups appear beside Iggy's. The answer: ``positions``, one row per consumer
and partition with the next offset it reads (null: nothing committed), the partition's end
offset and the lag (the stored messages it has not read); ``members``, the live members of the
groups whose membership a protocol keeps outside the core (Kafka's), with the partitions of this
topic each is assigned (Iggy's groups' members: ``GET .../consumer-groups/{id}``). Two Broker
calls (``consumer_lag``, ``group_members``; READ_TOPIC).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from rill.protocol.iggy.http_json.requests import path_ids
from rill.server.transports.http.auth import session_of
from rill.server.transports.http.routes.common import SECURED, context, replies
from rill.server.core.broker import TopicRef

router = APIRouter(tags=["consumer offsets"], dependencies=SECURED)

# the prefix a protocol stores its consumers' positions under -> the kind shown
KINDS = {
    "iggy-consumer": "iggy_consumer",  # protocols.iggy.consumers.consumer_name (a u32 id)
    "kafka-group": "kafka_group",  # protocols.kafka.group_apis.consumer_name (the group id)
}


def _who(consumer: str, group_name: str) -> dict[str, str]:
    if group_name:
        return {"kind": "iggy_group", "name": group_name}
    prefix, colon, name = consumer.partition(":")
    if colon and prefix in KINDS:
        return {"kind": KINDS[prefix], "name": name}
    return {"kind": "other", "name": consumer}


@router.get("/streams/{stream_id}/topics/{topic_id}/consumers", response_model=None,
            responses=replies(body=False),
            summary="Every consumer's position and lag per partition, Kafka groups included (rill extension)")
async def get_consumers(request: Request, stream_id: str, topic_id: str) -> dict[str, Any]:
    stream_ref, topic_ref = path_ids(request.path_params, "stream_id", "topic_id")
    broker, session = context(request).core.broker, session_of(request)
    ref = TopicRef(stream_ref.value, topic_ref.value)
    positions = [{**_who(row.consumer, row.group_name), "partition_id": row.partition_id,
                  "next_offset": row.next_offset, "end_offset": row.end_offset, "lag": row.lag}
                 for row in broker.consumer_lag(session, ref)]
    members = [{**_who(member.consumer, ""), "member_id": member.member_id,
                "client": member.client, "partitions": list(member.partitions)}
               for member in broker.group_members(session, ref)]
    return {"positions": positions, "members": members}
