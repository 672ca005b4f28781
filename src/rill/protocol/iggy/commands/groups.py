"""Consumer group commands 600-605 (wire reference §3.9).

Every group command but CREATE names the group with an Identifier; CREATE carries a u32 id
(0 = auto-assign) and a name.
"""

from __future__ import annotations

from dataclasses import dataclass

from rill.protocol.iggy.commands.base import (
    IDENT,
    STR8,
    U32,
    Command,
    list_response,
    optional_response,
    single_response,
)
from rill.protocol.iggy.primitives import Identifier
from rill.protocol.iggy.responses.groups import ConsumerGroup, ConsumerGroupDetails


@dataclass(frozen=True, slots=True)
class GetConsumerGroup(Command):
    """600 GET_CONSUMER_GROUP: ident stream_id; ident topic_id; ident group_id.
    OK: ConsumerGroupDetails (§4.4), or empty on any failure."""

    CODE = 600
    NAME = "get_consumer_group"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, IDENT, IDENT)
    stream_id: Identifier
    topic_id: Identifier
    group_id: Identifier

    decode_response = staticmethod(optional_response(ConsumerGroupDetails.decode))


@dataclass(frozen=True, slots=True)
class GetConsumerGroups(Command):
    """601 GET_CONSUMER_GROUPS: ident stream_id; ident topic_id. OK: concatenated headers."""

    CODE = 601
    NAME = "get_consumer_groups"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, IDENT)
    stream_id: Identifier
    topic_id: Identifier

    decode_response = staticmethod(list_response(ConsumerGroup.decode))


@dataclass(frozen=True, slots=True)
class CreateConsumerGroup(Command):
    """602 CREATE_CONSUMER_GROUP: ident stream_id; ident topic_id; u32 group_id (0 = auto);
    str8 name. OK: ConsumerGroupDetails of the new group."""

    CODE = 602
    NAME = "create_consumer_group"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, IDENT, U32, STR8)
    stream_id: Identifier
    topic_id: Identifier
    group_id: int
    name: str

    decode_response = staticmethod(single_response(ConsumerGroupDetails.decode))


@dataclass(frozen=True, slots=True)
class DeleteConsumerGroup(Command):
    """603 DELETE_CONSUMER_GROUP: ident stream_id; ident topic_id; ident group_id. OK: empty."""

    CODE = 603
    NAME = "delete_consumer_group"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, IDENT, IDENT)
    stream_id: Identifier
    topic_id: Identifier
    group_id: Identifier


@dataclass(frozen=True, slots=True)
class JoinConsumerGroup(Command):
    """604 JOIN_CONSUMER_GROUP: ident stream_id; ident topic_id; ident group_id. OK: empty."""

    CODE = 604
    NAME = "join_consumer_group"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, IDENT, IDENT)
    stream_id: Identifier
    topic_id: Identifier
    group_id: Identifier


@dataclass(frozen=True, slots=True)
class LeaveConsumerGroup(Command):
    """605 LEAVE_CONSUMER_GROUP: ident stream_id; ident topic_id; ident group_id. OK: empty."""

    CODE = 605
    NAME = "leave_consumer_group"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, IDENT, IDENT)
    stream_id: Identifier
    topic_id: Identifier
    group_id: Identifier
