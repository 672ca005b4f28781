"""Permission rules of wire §6.2 (the full command x permission matrix runs with issue 3)."""

from __future__ import annotations

import pytest

from rill.errors import Unauthorized
from rill.protocol.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from rill.server.auth.permissioner import NO_PERMISSION_NEEDED, RULES, Permissioner
from rill.protocol.codes import COMMANDS_BY_NAME


def global_only(**flags) -> Permissions:
    return Permissions(GlobalPermissions(**flags), None)


def test_every_command_has_a_rule_or_needs_none():
    assert set(RULES) | NO_PERMISSION_NEEDED == set(COMMANDS_BY_NAME)
    assert not set(RULES) & NO_PERMISSION_NEEDED


def test_root_may_do_everything():
    permissioner = Permissioner()
    permissioner.set_user(1, Permissions.root())
    for name in COMMANDS_BY_NAME:
        permissioner.authorize(1, name, 1, 1)


def test_no_permissions_means_no_rights():
    permissioner = Permissioner()
    permissioner.set_user(2, None)
    with pytest.raises(Unauthorized):
        permissioner.authorize(2, "get_streams")
    permissioner.authorize(2, "ping")


def test_read_streams_does_not_grant_polling():
    permissioner = Permissioner()
    permissioner.set_user(2, global_only(read_streams=True))
    permissioner.authorize(2, "get_stream", 1)
    permissioner.authorize(2, "get_topic", 1, 1)
    assert not permissioner.is_allowed(2, "poll_messages", 1, 1)
    assert not permissioner.is_allowed(2, "create_stream")


def test_stream_and_topic_level_rights():
    topic_level = TopicPermissions(manage_topic=False, read_topic=False, poll_messages=False,
                                   send_messages=True)
    stream_level = StreamPermissions(
        manage_stream=False, read_stream=True, manage_topics=False, read_topics=False,
        poll_messages=False, send_messages=False, topics={7: topic_level},
    )
    permissioner = Permissioner()
    permissioner.set_user(3, Permissions(GlobalPermissions(), {5: stream_level}))
    assert permissioner.is_allowed(3, "get_stream", 5)
    assert permissioner.is_allowed(3, "poll_messages", 5, 1)  # stream-level read_stream
    assert permissioner.is_allowed(3, "send_messages", 5, 7)  # topic-level send
    assert not permissioner.is_allowed(3, "send_messages", 5, 8)
    assert not permissioner.is_allowed(3, "get_stream", 6)
    assert not permissioner.is_allowed(3, "delete_stream", 5)
