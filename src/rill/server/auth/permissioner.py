"""Authorization as (principal, action, resource): the permission rules of wire reference
§6.2, enforced once, in the core, for every protocol and transport.

Owns: the ``Action``s (each with the rule that grants it) and the decision allow/deny for a
user doing an action on a resource: the server (no ids), a stream (its id) or a topic (its
stream's id and its own). A rule lists the global flags, stream-level
flags and topic-level flags that each grant it; a user without a permissions object has no
rights beyond ``Action.LOGGED_IN`` (and what the core lets anyone do to themselves: their own
user, their own tokens). A missing stream/topic map simply means "no rights at that level".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from rill.errors import Unauthorized
from rill.protocol.permissions import Permissions


@dataclass(frozen=True, slots=True)
class Rule:
    global_flags: tuple[str, ...] = ()
    stream_flags: tuple[str, ...] = ()
    topic_flags: tuple[str, ...] = ()


class Action(Enum):
    """What a principal wants to do; each is granted by the flags of its rule (wire §6.2).
    Every protocol's requests map onto these (Iggy's per command in the core's services)."""

    LOGGED_IN = None  # a login suffices (stats, one's own tokens, producer state)
    READ_SERVER = Rule(("manage_servers", "read_servers"))
    READ_USERS = Rule(("manage_users", "read_users"))
    MANAGE_USERS = Rule(("manage_users",))
    LIST_STREAMS = Rule(("manage_streams", "read_streams"))
    READ_STREAM = Rule(("manage_streams", "read_streams"), ("manage_stream", "read_stream"))
    CREATE_STREAM = Rule(("manage_streams",))
    MANAGE_STREAM = Rule(("manage_streams",), ("manage_stream",))
    READ_TOPIC = Rule(
        ("read_streams", "manage_streams", "manage_topics", "read_topics"),
        ("manage_topics", "read_topics"),
        ("manage_topic", "read_topic"),
    )
    CREATE_TOPIC = Rule(("manage_streams", "manage_topics"), ("manage_topics",))
    MANAGE_TOPIC = Rule(("manage_streams", "manage_topics"), ("manage_topics",), ("manage_topic",))
    READ_MESSAGES = Rule(
        ("poll_messages",),
        ("poll_messages", "read_stream", "manage_topics", "read_topics"),
        ("poll_messages", "read_topic", "manage_topic"),
    )
    WRITE_MESSAGES = Rule(
        ("send_messages",),
        ("send_messages", "manage_stream", "manage_topics"),
        ("send_messages", "manage_topic"),
    )


def allows(permissions: Permissions | None, rule: Rule, stream_id: int | None = None,
           topic_id: int | None = None) -> bool:
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


MAX_REMEMBERED = 4096  # answers kept before the memo starts afresh


class Permissioner:
    """Holds each user's permissions and answers allow/deny for an action on a resource.

    Answers are remembered per (user, action, stream, topic) -- every data request asks the
    same question again -- and forgotten whenever any user's permissions are set or removed
    (``Permissions`` are frozen: they change only by being replaced here). At most
    ``MAX_REMEMBERED`` are kept: past that the memo starts afresh, so requests naming many
    resources cannot grow it."""

    def __init__(self) -> None:
        self._permissions: dict[int, Permissions | None] = {}
        self._answers: dict[tuple[int, Action, int | None, int | None], bool] = {}

    def set_user(self, user_id: int, permissions: Permissions | None) -> None:
        self._permissions[user_id] = permissions
        self._answers.clear()

    def remove_user(self, user_id: int) -> None:
        self._permissions.pop(user_id, None)
        self._answers.clear()

    def is_allowed(self, user_id: int, action: Action, stream_id: int | None = None,
                   topic_id: int | None = None) -> bool:
        key = (user_id, action, stream_id, topic_id)
        answer = self._answers.get(key)
        if answer is None:
            answer = action is Action.LOGGED_IN or allows(
                self._permissions.get(user_id), action.value, stream_id, topic_id)
            if len(self._answers) >= MAX_REMEMBERED:
                self._answers.clear()
            self._answers[key] = answer
        return answer

    def allows_somewhere(self, user_id: int, action: Action) -> bool:
        """Whether ``user_id`` may do ``action`` on some resource (a request it could make at
        all: what a large request's header is judged by before its body is read)."""
        if action is Action.LOGGED_IN:
            return True
        return allows_somewhere(self._permissions.get(user_id), action.value)

    def authorize(self, user_id: int, action: Action, stream_id: int | None = None,
                  topic_id: int | None = None) -> None:
        """Raise Unauthorized (41) unless ``user_id`` may do ``action`` on the resource: the
        server (no ids), stream ``stream_id``, or topic ``topic_id`` of that stream."""
        if not self.is_allowed(user_id, action, stream_id, topic_id):
            raise Unauthorized()


def allows_somewhere(permissions: Permissions | None, rule: Rule) -> bool:
    """Whether some resource exists on which ``permissions`` grant ``rule``."""
    if permissions is None:
        return False
    if any(getattr(permissions.global_permissions, flag) for flag in rule.global_flags):
        return True
    for stream in (permissions.streams or {}).values():
        if any(getattr(stream, flag) for flag in rule.stream_flags):
            return True
        for topic in (stream.topics or {}).values():
            if any(getattr(topic, flag) for flag in rule.topic_flags):
                return True
    return False
