"""The permission rules of wire reference §6.2, enforced once, in the core, for every transport.

Owns: the table command name -> rule, and the decision allow/deny for a user. A rule lists the
global flags, stream-level flags and topic-level flags that each grant it; a user without a
permissions object has no rights beyond what needs no rule (login, ping, stats once logged in,
own user and own tokens). Invariant: every command the core serves has an entry here or is listed in
``NO_PERMISSION_NEEDED``; a missing stream/topic map simply means "no rights at that level".
"""

from __future__ import annotations

from dataclasses import dataclass

from rill.errors import Unauthorized
from rill.protocol.permissions import Permissions


@dataclass(frozen=True, slots=True)
class Rule:
    global_flags: tuple[str, ...] = ()
    stream_flags: tuple[str, ...] = ()
    topic_flags: tuple[str, ...] = ()


SERVER_READ = Rule(("manage_servers", "read_servers"))
USERS_READ = Rule(("manage_users", "read_users"))
USERS_MANAGE = Rule(("manage_users",))
STREAMS_LIST = Rule(("manage_streams", "read_streams"))
STREAM_READ = Rule(("manage_streams", "read_streams"), ("manage_stream", "read_stream"))
STREAM_CREATE = Rule(("manage_streams",))
STREAM_MANAGE = Rule(("manage_streams",), ("manage_stream",))
TOPIC_READ = Rule(
    ("read_streams", "manage_streams", "manage_topics", "read_topics"),
    ("manage_topics", "read_topics"),
    ("manage_topic", "read_topic"),
)
TOPIC_CREATE = Rule(("manage_streams", "manage_topics"), ("manage_topics",))
TOPIC_MANAGE = Rule(("manage_streams", "manage_topics"), ("manage_topics",), ("manage_topic",))
MESSAGES_POLL = Rule(
    ("poll_messages",),
    ("poll_messages", "read_stream", "manage_topics", "read_topics"),
    ("poll_messages", "read_topic", "manage_topic"),
)
MESSAGES_SEND = Rule(
    ("send_messages",),
    ("send_messages", "manage_stream", "manage_topics"),
    ("send_messages", "manage_topic"),
)

# command name -> rule. get_user and change_password on oneself need no rule (checked by core).
RULES: dict[str, Rule] = {
    "get_me": SERVER_READ,
    "get_snapshot": SERVER_READ,  # process list, resource usage, server logs
    "get_client": SERVER_READ,
    "get_clients": SERVER_READ,
    "get_user": USERS_READ,
    "get_users": USERS_READ,
    "create_user": USERS_MANAGE,
    "delete_user": USERS_MANAGE,
    "update_user": USERS_MANAGE,
    "update_permissions": USERS_MANAGE,
    "change_password": USERS_MANAGE,
    "get_streams": STREAMS_LIST,
    "get_stream": STREAM_READ,
    "create_stream": STREAM_CREATE,
    "update_stream": STREAM_MANAGE,
    "delete_stream": STREAM_MANAGE,
    "purge_stream": STREAM_MANAGE,
    "get_topic": TOPIC_READ,
    "get_topics": TOPIC_READ,
    "create_topic": TOPIC_CREATE,
    "update_topic": TOPIC_MANAGE,
    "delete_topic": TOPIC_MANAGE,
    "purge_topic": TOPIC_MANAGE,
    "create_partitions": TOPIC_MANAGE,
    "delete_partitions": TOPIC_MANAGE,
    "get_consumer_group": TOPIC_READ,
    "get_consumer_groups": TOPIC_READ,
    "create_consumer_group": TOPIC_READ,
    "delete_consumer_group": TOPIC_READ,
    "join_consumer_group": TOPIC_READ,
    "leave_consumer_group": TOPIC_READ,
    "poll_messages": MESSAGES_POLL,
    "get_consumer_offset": MESSAGES_POLL,
    "store_consumer_offset": MESSAGES_POLL,
    "send_messages": MESSAGES_SEND,
    "flush_unsaved_buffer": MESSAGES_SEND,
    # rill extensions (docs/extensions.md); staged appends are checked per topic staged to
    "poll_messages_columnar": MESSAGES_POLL,
    "get_consumer_lag": TOPIC_READ,
    "wait_for_messages": MESSAGES_POLL,  # offsets and ends, no message content: as get_consumer_group
    "stage_messages": MESSAGES_SEND,
    "commit_staged_messages": MESSAGES_SEND,
    "abort_staged_messages": MESSAGES_SEND,
}

NO_PERMISSION_NEEDED = frozenset(
    {
        "ping",
        "get_stats",  # any logged-in user (the login gate is in the core)
        "login_user",
        "logout_user",
        "login_with_personal_access_token",
        "get_personal_access_tokens",
        "create_personal_access_token",
        "delete_personal_access_token",
        "get_producer_state",  # rill extension: a login suffices
    }
)


def allows(
    permissions: Permissions | None,
    rule: Rule,
    stream_id: int | None = None,
    topic_id: int | None = None,
) -> bool:
    if permissions is None:
        return False
    global_permissions = permissions.global_permissions
    if any(getattr(global_permissions, flag) for flag in rule.global_flags):
        return True
    if stream_id is None or not permissions.streams:
        return False
    stream = permissions.streams.get(stream_id)
    if stream is None:
        return False
    if any(getattr(stream, flag) for flag in rule.stream_flags):
        return True
    if topic_id is None or not stream.topics or not rule.topic_flags:
        return False
    topic = stream.topics.get(topic_id)
    return topic is not None and any(getattr(topic, flag) for flag in rule.topic_flags)


class Permissioner:
    """Holds each user's permissions and answers allow/deny by command name."""

    def __init__(self) -> None:
        self._permissions: dict[int, Permissions | None] = {}

    def set_user(self, user_id: int, permissions: Permissions | None) -> None:
        self._permissions[user_id] = permissions

    def remove_user(self, user_id: int) -> None:
        self._permissions.pop(user_id, None)

    def is_allowed(
        self, user_id: int, command: str, stream_id: int | None = None, topic_id: int | None = None
    ) -> bool:
        if command in NO_PERMISSION_NEEDED:
            return True
        return allows(self._permissions.get(user_id), RULES[command], stream_id, topic_id)

    def authorize(
        self, user_id: int, command: str, stream_id: int | None = None, topic_id: int | None = None
    ) -> None:
        """Raise Unauthorized (41) unless ``user_id`` may run ``command`` on the target."""
        if not self.is_allowed(user_id, command, stream_id, topic_id):
            raise Unauthorized()
