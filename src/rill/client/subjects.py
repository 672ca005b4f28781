"""What a request is about: the values that fill the messages of the errors the SDK raises.

Owns: ``subject(command)``, the mapping from a command's fields to the subject keys of
``rill.errors.PLACEHOLDERS`` (``stream``, ``topic``, ``partition``, ``group``, ``user``, ...).
The binary protocol answers an error with its status code alone; ``AsyncClient.execute`` hands
this subject to ``RillError.about`` so ``create_stream("orders")`` fails with "Stream with name
orders already exists." rather than a bare template.
"""

from __future__ import annotations

from typing import Any

from rill.protocol.iggy.commands.base import Command
from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning, PartitioningKind

# field of a command -> subject key
_FIELDS = {
    "stream_id": "stream",
    "topic_id": "topic",
    "partition_id": "partition",
    "group_id": "group",
    "user_id": "user",
    "username": "user",
    "client_id": "client",
    "offset": "offset",
    "producer_id": "producer",
    "batch_id": "batch",
    "task_id": "task",
    "attempt_id": "attempt",
}

# an int in one of these is the ID a create command asks for (0: the server chooses one)
_CREATED_IDS = frozenset({"stream_id", "topic_id", "group_id"})

# the ``name`` field names what the command's verb is about: create_stream -> stream_name
_NAMES = (
    ("consumer_group", "group_name"),
    ("personal_access_token", "token_name"),
    ("stream", "stream_name"),
    ("topic", "topic_name"),
)


def _value(value: Any) -> Any:
    return value.value if isinstance(value, Identifier) else value


def subject(command: Command) -> dict[str, Any]:
    """The subject keys ``command`` gives a value for (IDs as ints, names as strings)."""
    found: dict[str, Any] = {}
    for field_name, key in _FIELDS.items():
        value = getattr(command, field_name, None)
        if value is None:
            continue
        if field_name in _CREATED_IDS and isinstance(value, int):
            if value == 0:
                continue
            found[field_name] = value
        found[key] = _value(value)
    consumer = getattr(command, "consumer", None)
    if isinstance(consumer, Consumer) and consumer.is_group:
        found.setdefault("group", _value(consumer.id))
    partitioning = getattr(command, "partitioning", None)
    if (isinstance(partitioning, Partitioning) and len(partitioning.value) == 4
            and partitioning.kind == PartitioningKind.PARTITION_ID):
        found["partition"] = int.from_bytes(partitioning.value, "little")
    name = getattr(command, "name", None)
    if isinstance(name, str):
        for suffix, key in _NAMES:
            if command.NAME.endswith(suffix):
                found[key] = name
                break
    return found
