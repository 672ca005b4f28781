"""Users, permissions and personal access tokens come back after a clean stop and after
kill -9: logins, statuses, tokens and rights behave exactly as before the restart."""

from __future__ import annotations


import pytest

from rill import errors
from rill.client import UserStatus
from rill.protocol.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from server_process import session

ENV = {
    "RILL_ROOT_PASSWORD_HASH_COST": "4",
    # the expired token must still be there after the restart: no cleaner in this test
    "RILL_PERSONAL_ACCESS_TOKEN_CLEANER_INTERVAL": "none",
}
HOUR_US = 3_600_000_000

READER = Permissions(GlobalPermissions(read_streams=True))
WRITER = Permissions(
    GlobalPermissions(),
    {1: StreamPermissions(topics={1: TopicPermissions(send_messages=True)})},
)


def populate(server) -> dict[str, object]:
    """Build the world; return what the checks need (raw tokens, listings)."""
    with session(server) as root:
        root.create_stream("orders", stream_id=1)
        root.create_topic(1, "eu", partitions_count=1, topic_id=1)
        root.create_user("reader", "reader-pw", permissions=READER)
        root.create_user("writer", "writer-pw", permissions=WRITER)
        root.create_user("nobody", "nobody-pw")
        root.create_user("changer", "old-pass")
        root.create_user("sleeper", "sleeper-pw", permissions=READER)
        root.create_user("gone", "gone-pw", permissions=READER)
        with session(server, "changer", "old-pass") as changer:
            changer.change_password("changer", "old-pass", "new-pass")
        with session(server, "reader", "reader-pw") as reader:
            tokens = {
                "forever": reader.create_personal_access_token("forever"),
                "later": reader.create_personal_access_token("later", HOUR_US),
                "stale": reader.create_personal_access_token("stale", 1),  # expired at once
            }
            reader_tokens = reader.get_personal_access_tokens()
        with session(server, "sleeper", "sleeper-pw") as sleeper:
            tokens["nap"] = sleeper.create_personal_access_token("nap")
        with session(server, "gone", "gone-pw") as gone:
            tokens["gone"] = gone.create_personal_access_token("farewell")
        root.update_user("sleeper", status=UserStatus.INACTIVE)
        root.delete_user("gone")
        users = [root.get_user(user.id) for user in root.get_users()]
    return {"tokens": tokens, "reader_tokens": reader_tokens, "users": users}


def check(server, world: dict[str, object]) -> None:
    tokens = world["tokens"]
    with session(server) as root:
        assert [root.get_user(user.id) for user in root.get_users()] == world["users"]
    with session(server, None) as client:
        with pytest.raises(errors.InvalidCredentials):
            client.login_user("changer", "old-pass")
        client.login_user("changer", "new-pass")
        with pytest.raises(errors.UserInactive):
            client.login_user("sleeper", "sleeper-pw")
        with pytest.raises(errors.UserInactive):
            client.login_with_personal_access_token(tokens["nap"])
        with pytest.raises(errors.InvalidCredentials):
            client.login_user("gone", "gone-pw")
        with pytest.raises(errors.ResourceNotFound):
            client.login_with_personal_access_token(tokens["gone"])
        with pytest.raises(errors.PersonalAccessTokenExpired):
            client.login_with_personal_access_token(tokens["stale"])
    with session(server, None) as reader:
        assert reader.login_with_personal_access_token(tokens["forever"]).user_id == 2
        assert reader.get_personal_access_tokens() == world["reader_tokens"]
        assert [stream.name for stream in reader.get_streams()] == ["orders"]
        with pytest.raises(errors.Unauthorized):
            reader.create_stream("more")
        assert reader.login_with_personal_access_token(tokens["later"]).user_id == 2
    with session(server, "writer", "writer-pw") as writer:
        writer.send_messages(1, 1, [b"after restart"])
        with pytest.raises(errors.Unauthorized):
            writer.poll_messages(1, 1, partition_id=1)
        with pytest.raises(errors.Unauthorized):
            writer.get_streams()
    with session(server, "nobody", "nobody-pw") as nobody:
        with pytest.raises(errors.Unauthorized):
            nobody.get_streams()
    with session(server) as root:
        with pytest.raises(errors.CannotDeleteUser):
            root.delete_user(1)


@pytest.mark.parametrize("how", ["clean stop", "kill -9"])
def test_users_and_tokens_come_back(rill_factory, how):
    server = rill_factory(ENV).start()
    world = populate(server)
    check(server, world)  # the same checks pass before the restart
    if how == "clean stop":
        assert server.stop() == 0
    else:
        server.kill()
    server.start()
    check(server, world)
    with session(server) as root:
        highest = max(user.id for user in root.get_users())
        assert root.create_user("newcomer", "newcomer-pw").id == highest + 1
