"""Permission rules of wire §6.2 as actions on resources (the full command x permission matrix
runs through a server in test_permission_matrix.py)."""

from __future__ import annotations

import pytest

from rill.errors import Unauthorized
from rill.protocol.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from rill.server.auth.permissioner import MAX_REMEMBERED, Action, Permissioner


def global_only(**flags) -> Permissions:
    return Permissions(GlobalPermissions(**flags), None)


def test_root_may_do_everything():
    permissioner = Permissioner()
    permissioner.set_user(1, Permissions.root())
    for action in Action:
        permissioner.authorize(1, action, 1, 1)


def test_no_permissions_means_no_rights():
    permissioner = Permissioner()
    permissioner.set_user(2, None)
    with pytest.raises(Unauthorized):
        permissioner.authorize(2, Action.LIST_STREAMS)
    permissioner.authorize(2, Action.LOGGED_IN)


def test_read_streams_does_not_grant_polling():
    permissioner = Permissioner()
    permissioner.set_user(2, global_only(read_streams=True))
    permissioner.authorize(2, Action.READ_STREAM, 1)
    permissioner.authorize(2, Action.READ_TOPIC, 1, 1)
    assert not permissioner.is_allowed(2, Action.READ_MESSAGES, 1, 1)
    assert not permissioner.is_allowed(2, Action.CREATE_STREAM)


def test_stream_and_topic_level_rights():
    topic_level = TopicPermissions(manage_topic=False, read_topic=False, poll_messages=False,
                                   send_messages=True)
    stream_level = StreamPermissions(
        manage_stream=False, read_stream=True, manage_topics=False, read_topics=False,
        poll_messages=False, send_messages=False, topics={7: topic_level},
    )
    permissioner = Permissioner()
    permissioner.set_user(3, Permissions(GlobalPermissions(), {5: stream_level}))
    assert permissioner.is_allowed(3, Action.READ_STREAM, 5)
    assert permissioner.is_allowed(3, Action.READ_MESSAGES, 5, 1)  # stream-level read_stream
    assert permissioner.is_allowed(3, Action.WRITE_MESSAGES, 5, 7)  # topic-level send
    assert not permissioner.is_allowed(3, Action.WRITE_MESSAGES, 5, 8)
    assert not permissioner.is_allowed(3, Action.READ_STREAM, 6)
    assert not permissioner.is_allowed(3, Action.MANAGE_STREAM, 5)


def test_a_change_of_permissions_is_answered_at_once():
    """Answers are remembered per question; setting or removing any user's permissions
    forgets them, so the next request is judged by the new rights."""
    permissioner = Permissioner()
    permissioner.set_user(4, global_only(send_messages=True))
    assert permissioner.is_allowed(4, Action.WRITE_MESSAGES, 1, 1)
    permissioner.set_user(4, global_only(poll_messages=True))
    assert not permissioner.is_allowed(4, Action.WRITE_MESSAGES, 1, 1)
    assert permissioner.is_allowed(4, Action.READ_MESSAGES, 1, 1)
    permissioner.set_user(5, global_only())  # another user's change forgets too
    permissioner.remove_user(4)
    assert not permissioner.is_allowed(4, Action.READ_MESSAGES, 1, 1)
    assert permissioner.is_allowed(4, Action.LOGGED_IN)


def test_questions_about_many_resources_keep_the_memo_bounded():
    permissioner = Permissioner()
    permissioner.set_user(6, global_only(poll_messages=True))
    for topic_id in range(3 * MAX_REMEMBERED):
        assert permissioner.is_allowed(6, Action.READ_MESSAGES, 1, topic_id)
    assert len(permissioner._answers) <= MAX_REMEMBERED
