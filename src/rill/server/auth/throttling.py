"""Login throttling: failed logins counted per client address and per username, and locks.

Owns the decision "may this address / this username try to log in now", for every login path
of every protocol (the core's password and personal-access-token logins call it; HTTP, QUIC,
TCP and any later protocol reach them). A refused attempt costs nothing (no bcrypt) and says
when to retry (``LoginThrottled``, 11100, HTTP 429); it does not tell whether the user exists.

Rules (``[login_throttle]``):
  * an address (an IPv4 address, or an IPv6 /64: one host's addresses) with ``max_failures``
    failed logins within ``window`` is locked for ``lock_time``; each further lockout doubles
    the lock, up to ``max_lock_time``; a successful login clears the address;
  * a username with ``max_failures_per_user`` failures within ``window`` (from any number of
    addresses: a distributed guess) is locked the same way, except for addresses that logged
    in as that user successfully within the last day: an attacker can slow the guessing down
    without locking the user's own clients out;
  * state is bounded: at most ``max_entries`` addresses and usernames are remembered (the
    least recently failed are forgotten first), and an entry expires once its window and lock
    have passed.

Failed logins are logged at warning with the address and the username, never the password:
the first of each address in a window, and every lockout.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

from rill.errors import LoginThrottled

log = logging.getLogger(__name__)

TRUST_SECONDS = 86_400.0  # a successful login exempts its address from the user's lock this long
MAX_TRUSTED_PER_USER = 64


@dataclass(frozen=True, slots=True)
class ThrottleSettings:
    enabled: bool = True
    max_failures: int = 10  # per address within the window
    max_failures_per_user: int = 30
    window: float = 60.0
    lock_time: float = 60.0
    max_lock_time: float = 900.0
    max_entries: int = 100_000


@dataclass(slots=True)
class _Record:
    failures: int = 0
    window_start: float = 0.0
    locked_until: float = 0.0
    lockouts: int = 0  # consecutive, for the growing lock


@dataclass(slots=True)
class _Table:
    """Records by key, least recently failed first, at most ``limit`` of them."""

    limit: int
    records: OrderedDict[str, _Record] = field(default_factory=OrderedDict)

    def get(self, key: str) -> _Record | None:
        return self.records.get(key)

    def failing(self, key: str) -> _Record:
        record = self.records.pop(key, None) or _Record()
        self.records[key] = record
        while len(self.records) > self.limit:
            self.records.popitem(last=False)
        return record

    def clear(self, key: str) -> None:
        self.records.pop(key, None)


def address_key(address: str) -> str:
    """The throttled unit of a client address ("host:port", "[v6]:port" or a bare host)."""
    host = address.rsplit(":", 1)[0].strip("[]") if ":" in address else address
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class LoginThrottle:
    def __init__(self, settings: ThrottleSettings, clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self.clock = clock
        self._addresses = _Table(settings.max_entries)
        self._users = _Table(settings.max_entries)
        self._trusted: dict[str, OrderedDict[str, float]] = {}  # username -> address -> until

    def check(self, address: str, username: str | None = None) -> None:
        """Raise ``LoginThrottled`` if this attempt may not be made now."""
        if not self.settings.enabled:
            return
        now = self.clock()
        key = address_key(address)
        waits = [self._remaining(self._addresses.get(key), now)]
        if username is not None and not self._is_trusted(username, key, now):
            waits.append(self._remaining(self._users.get(username), now))
        wait = max(waits)
        if wait > 0:
            raise LoginThrottled(int(wait) + 1)

    def failed(self, address: str, username: str | None = None) -> None:
        if not self.settings.enabled:
            return
        now = self.clock()
        key = address_key(address)
        record = self._addresses.failing(key)
        if self._count(record, now, self.settings.max_failures):
            log.warning("login locked for %s for %.0f s after %d failed logins (last as %r)",
                        key, record.locked_until - now, self.settings.max_failures, username)
        elif record.failures == 1:
            log.warning("failed login from %s as %r", address, username)
        if username is not None:
            user_record = self._users.failing(username)
            if self._count(user_record, now, self.settings.max_failures_per_user):
                log.warning("login as %r locked for %.0f s after %d failed logins from several "
                            "addresses", username, user_record.locked_until - now,
                            self.settings.max_failures_per_user)

    def succeeded(self, address: str, username: str) -> None:
        if not self.settings.enabled:
            return
        key = address_key(address)
        self._addresses.clear(key)
        trusted = self._trusted.setdefault(username, OrderedDict())
        trusted.pop(key, None)
        trusted[key] = self.clock() + TRUST_SECONDS
        while len(trusted) > MAX_TRUSTED_PER_USER:
            trusted.popitem(last=False)
        if len(self._trusted) > self.settings.max_entries:
            self._trusted.pop(next(iter(self._trusted)))

    # -- rules ------------------------------------------------------------------------------

    def _count(self, record: _Record, now: float, limit: int) -> bool:
        """Count one failure; True when it locks."""
        settings = self.settings
        if now - record.window_start > settings.window:
            record.failures = 0
            record.window_start = now
            if now > record.locked_until + settings.max_lock_time:
                record.lockouts = 0  # long quiet: the next lock starts short again
        record.failures += 1
        if record.failures < limit:
            return False
        lock = min(settings.lock_time * 2 ** record.lockouts, settings.max_lock_time)
        record.locked_until = now + lock
        record.lockouts += 1
        record.failures = 0
        record.window_start = now
        return True

    @staticmethod
    def _remaining(record: _Record | None, now: float) -> float:
        return 0.0 if record is None else max(0.0, record.locked_until - now)

    def _is_trusted(self, username: str, key: str, now: float) -> bool:
        until = self._trusted.get(username, {}).get(key)
        return until is not None and until > now
