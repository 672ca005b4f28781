"""``logs.Refusals``: a line a client can repeat at will is logged once per client host and
cause, then at most once per window with the count of those not logged (issue 27 item 5)."""

from __future__ import annotations

import logging

from rill.server.logs import Refusals


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_host_and_cause_then_one_per_window_with_a_count(caplog):
    clock = Clock()
    refusals = Refusals(window=60, clock=clock)
    log = logging.getLogger("test.refusals")
    with caplog.at_level(logging.INFO, logger="test.refusals"):
        logged = [refusals.log(log, f"10.0.0.1:{port}", "bad", "client at %s", port)
                  for port in range(5000, 5100)]  # a reconnect loop: a new port each time
        assert logged == [True] + [False] * 99
        assert refusals.log(log, "10.0.0.2:1", "bad", "client at %s", 1)  # another host
        assert refusals.log(log, "10.0.0.1:7", "other", "other cause")  # another cause
        clock.now += 60
        assert refusals.log(log, "10.0.0.1:8", "bad", "client at %s", 8)
        assert not refusals.log(log, "10.0.0.1:9", "bad", "client at %s", 9)
    assert [record.getMessage() for record in caplog.records] == [
        "client at 5000", "client at 1", "other cause",
        "client at 8 (99 more like it from 10.0.0.1 in the last 60 s, not logged)"]


def test_ipv6_addresses_keep_their_host_and_the_memory_is_bounded(caplog):
    refusals = Refusals(max_kept=2, clock=Clock())
    log = logging.getLogger("test.refusals")
    with caplog.at_level(logging.INFO, logger="test.refusals"):
        assert refusals.log(log, "::1:5000", "bad", "one")
        assert not refusals.log(log, "::1:5001", "bad", "one")
        assert refusals.log(log, "::2:5000", "bad", "two")
        assert refusals.log(log, "::3:5000", "bad", "three")  # forgets ::1, the oldest
        assert refusals.log(log, "::1:5002", "bad", "one again")
    assert len(caplog.records) == 4
