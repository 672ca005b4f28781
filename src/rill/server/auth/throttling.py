"""Login throttling: failed logins counted per (address, username), per address and per
username, and locks.

Owns the decision "may this address try to log in as this username now", for every login path
of every protocol (the core's password, SCRAM and personal-access-token logins call it; HTTP,
QUIC, TCP, Kafka SASL and any later protocol reach them). A refused attempt costs nothing (no
bcrypt) and says when to retry (``LoginThrottled``, 11100, HTTP 429); it does not tell whether
the user exists.

One client retrying a wrong password (a Kafka client re-authenticates every few hundred ms)
must not lock out the other clients of its address -- another user, or the same user's clients
with the right password -- on loopback, a shared host or behind NAT. Hence three counters
(``[login_throttle]``), an address being an IPv4 address or an IPv6 /64 (one host's addresses):

  * a (address, username) pair with ``max_failures`` failed logins within ``window`` is locked
    for ``lock_time``; each further lockout doubles the lock, up to ``max_lock_time``; a
    successful login as that user from that address clears it. Token logins are one pair per
    address (username ``None``): guessing tokens is throttled per address;
  * an address with ``max_failures_per_address`` failures within ``window``, whatever the
    usernames (spraying many usernames), is locked the same way for every username; this limit
    is set well above ``max_failures``, which a single wrong password reaches first;
  * a username with ``max_failures_per_user`` failures within ``window`` (from any number of
    addresses: a distributed guess) is locked the same way;
  * a username that logged in successfully from an address within the last day is never
    refused there (neither lock applies to it), and its failures there count only for its pair:
    a user's own client with a stale password does not lock the user's other addresses or the
    address's other users;
  * state is bounded: at most ``max_entries`` pairs, addresses and usernames are remembered
    (the least recently failed are forgotten first), and an entry expires once its window and
    lock have passed.

The trust (which username logged in from which address, until when) outlives a restart: it is
kept in the metadata store (``TrustStore``: its ``trusted_logins`` table), written when a pair
is first trusted and then at most once an hour per pair (``TRUST_REFRESH_SECONDS``; so a pair's
stored trust may end up to an hour early), and loaded at start. The counters and locks live in
memory only: a restart forgets them (as it always did), which only ever lets logins through.
A deleted or renamed username loses its trust and locks (``forget``): whoever gets the name
later starts a stranger.

``unlock(username)`` (``rill user unlock``, UNLOCK_USER 1050, ``POST /users/{user}/unlock``)
forgets a username's own lock and the locks of its pairs at once; an address locked for
spraying stays locked for the other usernames, not for this one (``check`` ignores the
address lock for an unlocked username until it fails again).

Failed logins are logged at warning with the address and the username, never the password:
the first of each pair in a window, and every lockout.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

from rill.errors import LoginThrottled

log = logging.getLogger(__name__)

TRUST_SECONDS = 86_400.0  # a successful login exempts its (address, username) this long
MAX_TRUSTED_PER_USER = 64
TRUST_REFRESH_SECONDS = 3_600.0  # a trusted pair's stored expiry is rewritten at most this often


class TrustStore(Protocol):
    """Where the trust is kept across restarts (``storage.metadata.MetadataStore``)."""

    def load_trusted_logins(self, now: int) -> Iterable[tuple[str, str, int]]:
        """(username, address key, until in unix seconds) of every trust not expired at now."""

    def trust_login(self, username: str, address: str, until: int, keep: int, now: int) -> None:
        """Trust ``username`` from ``address`` until ``until``; keep its ``keep`` latest."""

    def forget_trusted_logins(self, username: str) -> None:
        """No address is trusted for ``username`` any more."""


@dataclass(frozen=True, slots=True)
class ThrottleSettings:
    enabled: bool = True
    max_failures: int = 10  # per (address, username) within the window
    max_failures_per_address: int = 100  # per address, any usernames
    max_failures_per_user: int = 30  # per username, any addresses
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
    records: OrderedDict[object, _Record] = field(default_factory=OrderedDict)

    def get(self, key: object) -> _Record | None:
        return self.records.get(key)

    def failing(self, key: object) -> _Record:
        record = self.records.pop(key, None) or _Record()
        self.records[key] = record
        while len(self.records) > self.limit:
            self.records.popitem(last=False)
        return record

    def clear(self, key: object) -> None:
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
    def __init__(self, settings: ThrottleSettings, clock: Callable[[], float] = time.monotonic,
                 store: TrustStore | None = None,
                 wall_clock: Callable[[], float] = time.time):
        self.settings = settings
        self.clock = clock
        self.wall_clock = wall_clock  # the stored trust's expiries are unix seconds
        self._store = store
        self._pairs = _Table(settings.max_entries)  # (address key, username or None)
        self._addresses = _Table(settings.max_entries)
        self._users = _Table(settings.max_entries)
        self._trusted: dict[str, OrderedDict[str, float]] = {}  # username -> address -> until
        self._stored: dict[tuple[str, str], float] = {}  # (username, address) -> stored at
        self._unlocked: set[str] = set()  # usernames unlocked since their last failure
        if store is not None and settings.enabled:
            self._load(store)

    def _load(self, store: TrustStore) -> None:
        now, wall = self.clock(), self.wall_clock()
        for username, key, until in store.load_trusted_logins(int(wall)):
            self._trusted.setdefault(username, OrderedDict())[key] = now + (until - wall)
            # as if stored a full trust ago less what is left: refreshed by the next login
            self._stored[(username, key)] = now - (TRUST_SECONDS - (until - wall))

    def check(self, address: str, username: str | None = None) -> None:
        """Raise ``LoginThrottled`` if this attempt may not be made now."""
        if not self.settings.enabled:
            return
        now = self.clock()
        key = address_key(address)
        if username is not None and self._is_trusted(username, key, now):
            return
        records = [self._pairs.get((key, username)), self._addresses.get(key)]
        if username is not None:
            records.append(self._users.get(username))
        if username in self._unlocked:
            records = records[:1]  # unlocked by an operator: only its pair's new lock counts
        wait = max(self._remaining(record, now) for record in records)
        if wait > 0:
            raise LoginThrottled(int(wait) + 1)

    def failed(self, address: str, username: str | None = None) -> None:
        if not self.settings.enabled:
            return
        settings = self.settings
        now = self.clock()
        key = address_key(address)
        pair = self._pairs.failing((key, username))
        who = "a token" if username is None else repr(username)
        if self._count(pair, now, settings.max_failures):
            log.warning("login as %s from %s locked for %.0f s after %d failed logins", who, key,
                        pair.locked_until - now, settings.max_failures)
        elif pair.failures == 1:
            log.warning("failed login from %s as %s", address, who)
        if username is not None:
            self._unlocked.discard(username)
        if username is not None and self._is_trusted(username, key, now):
            return  # the user's own address: its stale client locks nobody else
        record = self._addresses.failing(key)
        if self._count(record, now, settings.max_failures_per_address):
            log.warning("login locked for %s for %.0f s after %d failed logins as any users "
                        "(last as %s)", key, record.locked_until - now,
                        settings.max_failures_per_address, who)
        if username is not None:
            user_record = self._users.failing(username)
            if self._count(user_record, now, settings.max_failures_per_user):
                log.warning("login as %r locked for %.0f s after %d failed logins from several "
                            "addresses", username, user_record.locked_until - now,
                            settings.max_failures_per_user)

    def succeeded(self, address: str, username: str, token: bool = False) -> None:
        """A login as ``username`` from ``address`` succeeded (``token``: with a token)."""
        if not self.settings.enabled:
            return
        key = address_key(address)
        now = self.clock()
        self._pairs.clear((key, None if token else username))
        trusted = self._trusted.setdefault(username, OrderedDict())
        trusted.pop(key, None)
        trusted[key] = now + TRUST_SECONDS
        while len(trusted) > MAX_TRUSTED_PER_USER:
            self._stored.pop((username, trusted.popitem(last=False)[0]), None)
        if len(self._trusted) > self.settings.max_entries:
            self._trusted.pop(next(iter(self._trusted)))
        self._persist(username, key, now)

    def unlock(self, username: str) -> None:
        """An operator lets ``username`` log in again now: its own lock and its pairs' locks
        are forgotten, and its addresses' spraying locks no longer apply to it (until its next
        failure)."""
        self._users.clear(username)
        for pair in [pair for pair in self._pairs.records if pair[1] == username]:
            self._pairs.clear(pair)
        self._unlocked.add(username)
        while len(self._unlocked) > self.settings.max_entries:
            self._unlocked.pop()

    def forget(self, username: str) -> None:
        """The username was deleted or renamed: a user that gets the name later inherits no
        trust (nor the old one's locks)."""
        self.unlock(username)
        self._unlocked.discard(username)
        self._trusted.pop(username, None)
        for pair in [pair for pair in self._stored if pair[0] == username]:
            del self._stored[pair]
        if self._store is not None:
            try:
                self._store.forget_trusted_logins(username)
            except Exception as error:  # noqa: BLE001 -- the user's change is done already
                log.warning("could not forget the login trust of %r: %s", username, error)

    def _persist(self, username: str, key: str, now: float) -> None:
        """Store the trust when it is new or its stored expiry is an hour old."""
        if self._store is None:
            return
        stored = self._stored.get((username, key))
        if stored is not None and now - stored < TRUST_REFRESH_SECONDS:
            return
        try:
            wall = self.wall_clock()
            self._store.trust_login(username, key, int(wall + TRUST_SECONDS),
                                    MAX_TRUSTED_PER_USER, int(wall))
        except Exception as error:  # noqa: BLE001 -- a login never fails for its bookkeeping
            log.warning("could not store the login trust of %r from %s: %s", username, key, error)
            return
        self._stored[(username, key)] = now
        if len(self._stored) > self.settings.max_entries:
            self._stored.pop(next(iter(self._stored)))

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
