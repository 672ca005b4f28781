"""What connections may hold and how long they may take: the limits every binary link obeys.

Owns four things the TCP and QUIC links share through ``BinaryConnection``:

* ``ConnectionLimits``: the settings (``[connections]`` in the configuration): how many
  connections may be open at once (in all, and from one client address), the largest request
  before login, and the three timeouts (not logged in, idle, a request trickling in);
* ``AddressCounts``: the connections open from each client address (an IPv4 address, or an
  IPv6 /64, as the login throttle counts them), against ``max_connections_per_address``: one
  address cannot take every connection (the HTTP listener keeps its own);
* ``RequestMemory``: the bytes of requests received and not yet served, summed over every
  connection, against one server-wide budget. Links account what they hold and stop reading
  while the budget is spent; they are woken when it is given back. A stranger therefore cannot
  make the server allocate what he only announces, nor more than the budget in all;
* ``Supervisor``: one sweep for all connections (a timer per connection, reset at every read,
  would cost more than the rare expiry it serves) that closes those past a timeout.

Invariants: every byte taken from ``RequestMemory`` is given back exactly once (when its request
has been served, or its connection is gone); the supervisor never closes a connection while the
server is working on or answering one of its requests.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from typing import Callable, Hashable, Protocol

from rill.server.auth.throttling import address_key

log = logging.getLogger(__name__)

NEVER = math.inf


RATE_GRACE = 5.0  # s a large frame may take before its rate is judged (min_request_rate)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_request_size_unauthenticated: int = 4096
    unauthenticated_timeout: float = 10.0  # s from accept (or logout) to a login
    idle_timeout: float = 600.0  # s without a request while logged in
    request_timeout: float = 60.0  # s from a request's first byte to its last
    max_connections: float = NEVER  # TCP and QUIC together; more are closed at once
    # bytes/s a large frame must average while the server reads it, judged after RATE_GRACE
    # (0: no minimum): a frame trickled in holds a connection, not the others
    min_request_rate: float = 0.0
    max_connections_per_address: float = NEVER  # of max_connections, from one client address

    @property
    def sweep_period(self) -> float:
        """How often the supervisor looks: a quarter of the shortest timeout, 50 ms .. 1 s."""
        shortest = min(self.unauthenticated_timeout, self.idle_timeout, self.request_timeout)
        return min(1.0, max(0.05, shortest / 4))


UNLIMITED = ConnectionLimits(
    max_request_size_unauthenticated=1 << 62, unauthenticated_timeout=NEVER,
    idle_timeout=NEVER, request_timeout=NEVER, max_connections=NEVER,
    max_connections_per_address=NEVER,
)


class RequestMemory:
    """Bytes of requests held by all connections, against ``limit``: only bytes that arrived
    (a header's announcement takes nothing). Large frames being read are kept in the order
    they began: the first may always go on reading, past the limit if need be, so that frames
    that began together cannot all wait for each other (the overdraft is one frame at most)."""

    def __init__(self, limit: float = NEVER) -> None:
        self.limit = limit
        self.used = 0
        self._waiting: dict[Hashable, Callable[[], None]] = {}
        self._large: dict[Hashable, None] = {}  # links reading a large frame, oldest first

    @property
    def spent(self) -> bool:
        return self.used >= self.limit

    def begin_large(self, key: Hashable) -> None:
        self._large[key] = None

    def end_large(self, key: Hashable) -> None:
        """The large frame of ``key`` is whole (or its link gone): the next oldest may go on."""
        if self._large.pop(key, 0) is None and self._large:
            first = next(iter(self._large))
            resume = self._waiting.pop(first, None)
            if resume is not None:
                resume()

    def may_read_large(self, key: Hashable) -> bool:
        """Whether the link ``key`` may read more of its large frame now."""
        return not self.spent or next(iter(self._large), None) == key

    def take(self, size: int) -> None:
        self.used += size

    def give_back(self, size: int) -> None:
        self.used -= size
        if self._waiting and self.used < self.limit:
            waiting, self._waiting = self._waiting, {}
            for resume in waiting.values():
                resume()

    def wait(self, key: Hashable, resume: Callable[[], None]) -> None:
        """Call ``resume`` once the budget is no longer spent (once; register again to wait
        again)."""
        self._waiting[key] = resume

    def forget(self, key: Hashable) -> None:
        self._waiting.pop(key, None)
        self.end_large(key)


class AddressCounts:
    """Connections open per client address, against ``limit``. ``admit`` counts one more when
    it may open (the caller then ``release``s it exactly once, when it closes)."""

    def __init__(self, limit: float = NEVER) -> None:
        self.limit = limit
        self.open: dict[str, int] = {}
        self._refused: set[str] = set()  # addresses refused since their count was last below

    def admit(self, address: str) -> bool:
        key = address_key(address)
        count = self.open.get(key, 0)
        if count >= self.limit:
            if key not in self._refused:
                self._refused.add(key)
                log.warning("refusing connections from %s: max_connections_per_address (%d) "
                            "are open from it", key, self.limit)
            return False
        self.open[key] = count + 1
        return True

    def release(self, address: str) -> None:
        key = address_key(address)
        count = self.open.get(key, 0) - 1
        if count > 0:
            self.open[key] = count
        else:
            self.open.pop(key, None)
        self._refused.discard(key)


class Supervised(Protocol):
    address: str  # the client's "host:port" (admitted by ``Supervisor.admits``)

    def overdue(self, now: float) -> str | None:
        """Why this connection must be closed now, or None."""

    def expire(self, reason: str) -> None:
        """Close it, saying why."""


class Supervisor:
    """Every ``limits.sweep_period`` seconds, closes the connections that are overdue."""

    def __init__(self, limits: ConnectionLimits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self.clock = clock
        self.connections: set[Supervised] = set()
        self.addresses = AddressCounts(limits.max_connections_per_address)
        self._refusing = False  # refusals logged since the count was last below the limit
        self._task: asyncio.Task[None] | None = None

    def add(self, connection: Supervised) -> None:
        """Supervise ``connection`` (admitted by ``admits``: its address is counted already)."""
        self.connections.add(connection)
        if self._task is None and self.limits is not UNLIMITED:
            self._task = asyncio.get_running_loop().create_task(self._sweep())

    def discard(self, connection: Supervised) -> None:
        if connection in self.connections:
            self.connections.remove(connection)
            self.addresses.release(connection.address)

    def admits(self, address: str) -> bool:
        """Whether one more connection from ``address`` may open: fewer than max_connections
        in all and max_connections_per_address from its address (then counted for it: the
        link made for it must be ``add``ed). Says so once per burst of refusals when not."""
        if len(self.connections) < self.limits.max_connections:
            self._refusing = False
            return self.addresses.admit(address)
        if not self._refusing:
            self._refusing = True
            log.warning("refusing connections (the first from %s): max_connections (%d) are "
                        "open", address, self.limits.max_connections)
        return False

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self.limits.sweep_period)
            now = self.clock()
            for connection in list(self.connections):
                reason = connection.overdue(now)
                if reason is not None:
                    try:
                        connection.expire(reason)
                    except Exception:  # noqa: BLE001 - one link's failure must not stop the sweep
                        log.exception("closing an overdue connection failed")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
