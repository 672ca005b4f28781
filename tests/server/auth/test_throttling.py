"""The login throttle on its own, with a fake clock: locks per (address, username), per address
and per username, their growth and expiry, the exemption of addresses a user logged in from, and
bounded state; the operator's unlock; the trust kept in the metadata store across a restart."""

from __future__ import annotations

import dataclasses

import pytest

from rill.errors import LoginThrottled
from rill.server.auth.throttling import LoginThrottle, ThrottleSettings, address_key
from rill.server.storage.metadata import MetadataStore

SETTINGS = ThrottleSettings(max_failures=3, max_failures_per_address=8, max_failures_per_user=5,
                            window=60, lock_time=10, max_lock_time=35, max_entries=100)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def throttle(clock):
    return LoginThrottle(SETTINGS, clock)


def fail(throttle: LoginThrottle, address: str, username: str | None = "alice", times: int = 1):
    for _ in range(times):
        throttle.check(address, username)
        throttle.failed(address, username)


def retry_after(throttle: LoginThrottle, address: str, username: str | None = "alice") -> int:
    with pytest.raises(LoginThrottled) as raised:
        throttle.check(address, username)
    return raised.value.args_values[0]


def test_a_wrong_password_locks_its_pair_and_the_lock_grows(clock):
    throttle = LoginThrottle(dataclasses.replace(SETTINGS, max_failures_per_address=100,
                                                 max_failures_per_user=100), clock)
    fail(throttle, "10.0.0.1:5000", times=2)
    throttle.check("10.0.0.1:5001", "alice")  # two failures: still allowed
    fail(throttle, "10.0.0.1:5002")
    assert retry_after(throttle, "10.0.0.1:6000", "alice") == 11  # any port of the address
    throttle.check("10.0.0.2:5000", "alice")  # another address is not affected
    clock.now += 10.5
    fail(throttle, "10.0.0.1:1", times=3)
    assert retry_after(throttle, "10.0.0.1:1") == 21  # the second lock is twice as long
    clock.now += 20.5
    fail(throttle, "10.0.0.1:1", times=3)
    assert retry_after(throttle, "10.0.0.1:1") == 36  # capped at max_lock_time (35 s)


def test_a_wrong_password_does_not_lock_the_other_users_of_its_address(throttle, clock):
    fail(throttle, "10.0.0.1:5000", "mallory", times=3)
    assert retry_after(throttle, "10.0.0.1:5000", "mallory") == 11
    throttle.check("10.0.0.1:5001", "bob")  # another user of the same address may
    throttle.check("10.0.0.1:5001", "alice")


def test_a_user_who_logged_in_from_the_address_is_never_refused_there(throttle, clock):
    throttle.succeeded("10.0.0.1:5000", "alice")  # alice's own client
    for _ in range(20):  # a stale client of hers retries a wrong password
        throttle.check("10.0.0.1:5001", "alice")
        throttle.failed("10.0.0.1:5001", "alice")
    throttle.check("10.0.0.1:5002", "alice")  # her right password is still checked
    throttle.check("10.0.0.1:5002", "bob")  # the stale client's failures lock no one else:
    throttle.check("10.0.0.7:1", "alice")  # not the address, nor alice elsewhere
    fail(throttle, "10.0.0.2:1", times=3)  # an address alice did not log in from is locked
    assert retry_after(throttle, "10.0.0.2:1") == 11
    clock.now += 86_401  # a day later the address is no longer trusted
    fail(throttle, "10.0.0.1:1", times=3)
    assert retry_after(throttle, "10.0.0.1:1") == 11


def test_spraying_usernames_locks_the_address_above_the_pair_limit(throttle, clock):
    for number in range(7):
        fail(throttle, "10.0.0.1:1", f"user{number}")
    throttle.check("10.0.0.1:1", "someone")  # 7 failures, each user once: still allowed
    fail(throttle, "10.0.0.1:1", "user7")  # the 8th locks the address for every username
    assert retry_after(throttle, "10.0.0.1:1", "someone") == 11
    assert retry_after(throttle, "10.0.0.1:1", None) == 11  # tokens too
    throttle.check("10.0.0.2:1", "someone")  # another address is not affected
    throttle.succeeded("10.0.0.1:9", "alice")  # trusted before: alice is still let in
    throttle.check("10.0.0.1:1", "alice")


def test_a_success_clears_its_pair(throttle, clock):
    fail(throttle, "10.0.0.1:1", times=2)
    throttle.succeeded("10.0.0.1:1", "alice")
    clock.now += 86_401  # (past the trust, so only the pair's count matters)
    fail(throttle, "10.0.0.1:1", times=2)
    throttle.check("10.0.0.1:1", "alice")


def test_failures_outside_the_window_do_not_add_up(throttle, clock):
    for _ in range(5):
        fail(throttle, "10.0.0.1:1", times=2)
        clock.now += 61
    throttle.check("10.0.0.1:1", "alice")


def test_a_user_guessed_from_many_addresses_is_locked_but_not_for_its_own_address(throttle, clock):
    throttle.succeeded("10.9.9.9:1", "alice")  # alice's own client
    for number in range(5):
        fail(throttle, f"10.0.1.{number}:1")
    assert retry_after(throttle, "10.0.2.1:1", "alice") == 11
    throttle.check("10.0.2.1:1", "bob")  # only alice is locked
    throttle.check("10.9.9.9:2", "alice")  # where alice logged in before still may
    clock.now += 86_401  # a day later that address is no longer trusted
    fail(throttle, "10.0.1.0:1", times=1)  # (the lock has expired; five more lock again)
    for number in range(1, 5):
        fail(throttle, f"10.0.1.{number}:1")
    assert retry_after(throttle, "10.9.9.9:2", "alice") > 0


def test_tokens_are_throttled_by_address_alone(throttle, clock):
    fail(throttle, "10.0.0.1:1", username=None, times=3)
    assert retry_after(throttle, "10.0.0.1:1", username=None) == 11
    throttle.check("10.0.0.1:1", "alice")  # a password login is not a token guess
    clock.now += 11
    fail(throttle, "10.0.0.1:1", username=None, times=2)
    throttle.succeeded("10.0.0.1:1", "alice", token=True)  # a good token clears the guesses
    clock.now += 86_401
    fail(throttle, "10.0.0.1:1", username=None, times=2)
    throttle.check("10.0.0.1:1", None)


def test_state_is_bounded(clock):
    throttle = LoginThrottle(ThrottleSettings(max_failures=3, max_entries=10), clock)
    for number in range(1000):
        throttle.failed(f"10.1.{number // 256}.{number % 256}:1", f"user{number}")
    assert len(throttle._pairs.records) == 10
    assert len(throttle._addresses.records) == 10 and len(throttle._users.records) == 10


def test_disabled_throttles_nothing(clock):
    throttle = LoginThrottle(ThrottleSettings(enabled=False, max_failures=1), clock)
    fail(throttle, "10.0.0.1:1", times=5)
    throttle.check("10.0.0.1:1", "alice")


def test_unlock_lets_a_locked_user_in_at_once(throttle, clock):
    fail(throttle, "10.0.3.1:1", times=3)  # one address's pair is locked
    for number in range(2):  # alice guessed from three addresses: alice is locked everywhere
        fail(throttle, f"10.0.1.{number}:1")
    for number in range(7):  # an address sprays usernames: locked for every username
        fail(throttle, "10.0.4.1:1", f"user{number}")
    fail(throttle, "10.0.4.1:1", "bob")
    assert retry_after(throttle, "10.0.2.1:1") == 11
    assert retry_after(throttle, "10.0.3.1:1") > 0
    throttle.unlock("alice")
    throttle.check("10.0.2.1:1", "alice")  # at once, from anywhere
    throttle.check("10.0.3.1:1", "alice")
    throttle.check("10.0.4.1:1", "alice")
    assert retry_after(throttle, "10.0.4.1:1", "bob") > 0  # the address stays locked for others
    fail(throttle, "10.0.1.0:1")  # alice fails again: the spraying address's lock is back
    assert retry_after(throttle, "10.0.4.1:1") > 0


class Wall:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_trust_survives_a_restart_through_the_metadata_store(tmp_path, clock):
    wall = Wall()
    store = MetadataStore(tmp_path / "metadata.db", synchronous_full=False)
    before = LoginThrottle(SETTINGS, clock, store=store, wall_clock=wall)
    before.succeeded("10.9.9.9:1", "alice")
    before.succeeded("10.9.9.8:1", "alice")
    store.close()
    clock.now = 5.0  # another process: another monotonic clock
    wall.now += 3_600
    store = MetadataStore(tmp_path / "metadata.db", synchronous_full=False)
    after = LoginThrottle(SETTINGS, clock, store=store, wall_clock=wall)
    for number in range(5):
        fail(after, f"10.0.1.{number}:1")
    assert retry_after(after, "10.0.2.1:1") == 11  # alice is locked ...
    after.check("10.9.9.9:2", "alice")  # ... but not where she logged in before the restart
    after.check("10.9.9.8:2", "alice")
    clock.now += 86_400 - 3_600 + 1  # the stored trust ends a day after the login
    for number in range(5):
        fail(after, f"10.0.1.{number}:1")
    assert retry_after(after, "10.9.9.9:2", "alice") > 0
    store.close()


def test_a_deleted_or_renamed_username_leaves_no_trust_behind(tmp_path, clock):
    wall = Wall()
    store = MetadataStore(tmp_path / "metadata.db", synchronous_full=False)
    throttle = LoginThrottle(SETTINGS, clock, store=store, wall_clock=wall)
    throttle.succeeded("10.9.9.9:1", "alice")
    throttle.succeeded("10.9.9.9:1", "bob")
    throttle.forget("alice")  # alice was deleted; a new alice is a stranger at her address
    assert [row[0] for row in store.load_trusted_logins(0)] == ["bob"]
    for number in range(5):
        fail(throttle, f"10.0.1.{number}:1")
    assert retry_after(throttle, "10.9.9.9:2", "alice") > 0
    store.close()


def test_the_stored_trust_is_written_once_an_hour_and_bounded(tmp_path, clock):
    wall = Wall()
    store = MetadataStore(tmp_path / "metadata.db", synchronous_full=False)
    throttle = LoginThrottle(SETTINGS, clock, store=store, wall_clock=wall)
    throttle.succeeded("10.9.9.9:1", "alice")
    first = store.load_trusted_logins(0)
    clock.now += 60
    wall.now += 60
    throttle.succeeded("10.9.9.9:2", "alice")  # a minute later: not written again
    assert store.load_trusted_logins(0) == first == [("alice", "10.9.9.9", 1_800_086_400)]
    clock.now += 3_600
    wall.now += 3_600
    throttle.succeeded("10.9.9.9:3", "alice")  # an hour later: the expiry moves on
    assert store.load_trusted_logins(0) == [("alice", "10.9.9.9", 1_800_090_060)]
    for number in range(100):
        throttle.succeeded(f"10.8.{number}.1:1", "alice")
        wall.now += 1
    assert len(store.load_trusted_logins(0)) == 64  # the latest addresses of the user
    store.close()


def test_address_keys():
    assert address_key("10.1.2.3:4567") == "10.1.2.3"
    assert address_key("::ffff:10.1.2.3:4567") == "10.1.2.3"
    assert address_key("2001:db8:1:2:3:4:5:6:4567") == "2001:db8:1:2::/64"
    assert address_key("[2001:db8:1:2::9]:80") == "2001:db8:1:2::/64"
    assert address_key("unknown") == "unknown"
