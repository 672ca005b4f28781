"""The message classes, by schema name: ``from rill.protocol.kafka.messages import
ProduceRequest``; nested structs hang off their parent (``ProduceRequest.TopicProduceData``).
Each class holds the fields of every version (schema.py); build one with keywords, absent
fields take their defaults: ``MetadataRequest(topics=None, allow_auto_topic_creation=True)``.
"""

from __future__ import annotations

from rill.protocol.kafka.codec import message_spec
from rill.protocol.kafka.schema import SchemaError, schema_names


def __getattr__(name: str) -> type:
    if name.startswith("_"):
        raise AttributeError(name)
    try:
        return message_spec(name).cls
    except SchemaError:
        raise AttributeError(f"no Kafka message {name!r}") from None


def __dir__() -> list[str]:
    return schema_names()
