"""Response records built from the model (wire §4.1-§4.3), shared by every service."""

from __future__ import annotations

from rill.protocol.responses.streams import Stream as StreamRecord
from rill.protocol.responses.streams import StreamDetails
from rill.protocol.responses.topics import Partition as PartitionRecord
from rill.protocol.responses.topics import Topic as TopicRecord
from rill.protocol.responses.topics import TopicDetails
from rill.server.core.model import Partition, Stream, Topic


def stream_record(stream: Stream) -> StreamRecord:
    topics = stream.topics.values()
    return StreamRecord(
        id=stream.id,
        created_at=stream.created_at,
        topics_count=len(stream.topics),
        size_bytes=sum(t.size_bytes for t in topics),
        messages_count=sum(t.messages_count for t in topics),
        name=stream.name,
    )


def stream_details(stream: Stream) -> StreamDetails:
    topics = tuple(topic_record(stream.topics[tid]) for tid in sorted(stream.topics))
    return StreamDetails(stream_record(stream), topics)


def topic_record(topic: Topic) -> TopicRecord:
    return TopicRecord(
        id=topic.id,
        created_at=topic.created_at,
        partitions_count=len(topic.partitions),
        message_expiry=topic.message_expiry,
        compression_algorithm=topic.compression_algorithm,
        max_topic_size=topic.max_topic_size,
        replication_factor=topic.replication_factor,
        size_bytes=topic.size_bytes,
        messages_count=topic.messages_count,
        name=topic.name,
    )


def partition_record(partition: Partition) -> PartitionRecord:
    log = partition.log
    return PartitionRecord(
        id=partition.id,
        created_at=partition.created_at,
        segments_count=log.segments_count,
        current_offset=log.current_offset,
        size_bytes=log.size_bytes,
        messages_count=log.messages_count,
    )


def topic_details(topic: Topic) -> TopicDetails:
    partitions = tuple(partition_record(topic.partitions[pid]) for pid in sorted(topic.partitions))
    return TopicDetails(topic_record(topic), partitions)
