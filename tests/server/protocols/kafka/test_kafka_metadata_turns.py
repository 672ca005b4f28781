"""Metadata of every topic does not hold the event loop (issue 28 item 5): 10,000 topics took
it for about 0.6 s at once. The topics are described a few hundred at a time, other work
running in between; the answer is the same."""

from __future__ import annotations

import asyncio

from rill.protocol.kafka import apis, decode_request, encode_request, request_class
from rill.server.core.model import Topic
from rill.server.protocols.kafka import dispatch
from rill.server.protocols.kafka.dispatch import KafkaSettings

from in_process_core import run_with_broker

TOPICS = 10_000


def test_metadata_of_10000_topics_lets_other_work_run(tmp_path):
    async def scenario(core, broker, session) -> None:
        topics = core.state.streams.named("ns").topics  # a description needs the model only
        for topic_id in range(2, TOPICS + 1):
            topics[topic_id] = Topic(topics.named("t").stream_id, topic_id, f"k{topic_id}", 0, 1,
                                     0, 0, 1, "kafka-v2", partitions={1: None, 2: None})
        settings = KafkaSettings(stream="ns", host="127.0.0.1", port=9092)
        body = request_class(apis.METADATA)(topics=None, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False)
        request = decode_request(memoryview(encode_request(apis.METADATA, 9, 1, body))[4:])
        task = asyncio.ensure_future(dispatch.metadata(core, session, settings, request))
        turns = 0
        while not task.done():
            await asyncio.sleep(0)
            turns += 1
        answer = task.result()
        assert sorted((t.name, len(t.partitions)) for t in answer.topics) == sorted(
            [("t", 2)] + [(f"k{i}", 2) for i in range(2, TOPICS + 1)])
        assert turns >= 10  # before, 0: the loop was held for the whole description
        for topic_id in range(2, TOPICS + 1):  # they have no logs for the stop to close
            del topics[topic_id]

    run_with_broker(tmp_path, scenario)
