"""The login throttle on its own, with a fake clock: locks per address and per username, their
growth and expiry, the exemption of addresses a user logged in from, and bounded state."""

from __future__ import annotations

import pytest

from rill.errors import LoginThrottled
from rill.server.auth.throttling import LoginThrottle, ThrottleSettings, address_key

SETTINGS = ThrottleSettings(max_failures=3, max_failures_per_user=5, window=60, lock_time=10,
                            max_lock_time=35, max_entries=100)


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


def test_an_address_is_locked_after_its_failures_and_the_lock_grows(throttle, clock):
    fail(throttle, "10.0.0.1:5000", username=None, times=2)
    throttle.check("10.0.0.1:5001", "alice")  # two failures: still allowed
    fail(throttle, "10.0.0.1:5002", username=None)
    assert retry_after(throttle, "10.0.0.1:6000", "bob") == 11  # any user, any port of it
    throttle.check("10.0.0.2:5000", "bob")  # another address is not affected
    clock.now += 10.5
    fail(throttle, "10.0.0.1:1", username=None, times=3)
    assert retry_after(throttle, "10.0.0.1:1") == 21  # the second lock is twice as long
    clock.now += 20.5
    fail(throttle, "10.0.0.1:1", username=None, times=3)
    assert retry_after(throttle, "10.0.0.1:1") == 36  # capped at max_lock_time (35 s)


def test_a_success_clears_the_address(throttle, clock):
    fail(throttle, "10.0.0.1:1", times=2)
    throttle.succeeded("10.0.0.1:1", "alice")
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


def test_tokens_are_throttled_by_address_alone(throttle):
    fail(throttle, "10.0.0.1:1", username=None, times=3)
    assert retry_after(throttle, "10.0.0.1:1", username=None) == 11


def test_state_is_bounded(clock):
    throttle = LoginThrottle(ThrottleSettings(max_failures=3, max_entries=10), clock)
    for number in range(1000):
        throttle.failed(f"10.1.{number // 256}.{number % 256}:1", f"user{number}")
    assert len(throttle._addresses.records) == 10 and len(throttle._users.records) == 10


def test_disabled_throttles_nothing(clock):
    throttle = LoginThrottle(ThrottleSettings(enabled=False, max_failures=1), clock)
    fail(throttle, "10.0.0.1:1", times=5)
    throttle.check("10.0.0.1:1", "alice")


def test_address_keys():
    assert address_key("10.1.2.3:4567") == "10.1.2.3"
    assert address_key("::ffff:10.1.2.3:4567") == "10.1.2.3"
    assert address_key("2001:db8:1:2:3:4:5:6:4567") == "2001:db8:1:2::/64"
    assert address_key("[2001:db8:1:2::9]:80") == "2001:db8:1:2::/64"
    assert address_key("unknown") == "unknown"
