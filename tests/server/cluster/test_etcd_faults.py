"""The etcd gateway client against a real 3-member etcd cluster under faults: a watch resumes
on another member after its member is killed or paused, nothing lost or repeated; without a leader
(2 of 3 members paused) watches and requests fail fast instead of hanging; a lease holder
paused past its TTL knows on waking, from its own clock, that it lost the lease."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from watching import next_change, opened

from rill.server.cluster.coordinator import (
    Compare,
    CoordinatorUnavailable,
    NoLeader,
    Put,
)
from rill.server.cluster.etcd_gateway import EtcdGateway
from rill.server.cluster.leases import LOCAL_DEADLINE_PASSED
from rill.server.cluster.watch import ResumingWatch

HOLDER = Path(__file__).with_name("lease_holder.py")


async def write_once(client: EtcdGateway, key: bytes, value: bytes) -> int:
    """Create ``key`` exactly once, however often the attempt times out (a put forwarded to an
    etcd leader that just died or froze is lost there: its outcome is unknown until the
    client's timeout); returns the revision that created it."""
    while True:
        try:
            await client.txn([Compare.missing(key)], [Put(key, value)])
            return (await client.get(key)).create_revision
        except CoordinatorUnavailable:
            continue  # the compare makes the retry safe


def test_a_watch_resumes_on_another_member_after_its_member_is_killed(etcd):
    async def main():
        watching = EtcdGateway(etcd.endpoints, request_timeout=5)  # on e0 first
        writer = EtcdGateway(etcd.endpoints[1:], request_timeout=5)
        prefix = b"/faults/resume/"
        try:
            start = await writer.put(prefix + b"before", b"0")
            resuming = ResumingWatch(watching, prefix, start)
            changes = resuming.__aiter__()
            first = await next_change(changes)
            assert [event.kv.key for event in first.events] == [prefix + b"before"]
            assert watching.endpoint == etcd.endpoints[0]
            etcd.kill(0)
            written = [await write_once(writer, prefix + b"k%d" % index, b"%d" % index)
                       for index in range(3)]
            seen = []
            while len(seen) < 3:
                seen.extend((event.kv.key, event.kv.mod_revision)
                            for event in (await next_change(changes)).events)
            assert seen == [(prefix + b"k%d" % index, revision)
                            for index, revision in enumerate(written)]
            assert resuming.resumed >= 1 and watching.endpoint != etcd.endpoints[0]
            assert (await watching.get(prefix + b"k2")).value == b"2"  # requests fail over too
            await changes.aclose()
        finally:
            await watching.close()
            await writer.close()

    asyncio.run(main())


def test_a_watch_whose_member_is_paused_resumes_on_another_member(etcd):
    """A paused member keeps its connections open and says nothing: the watch's probe of
    its member times out, and the watch resumes elsewhere instead of waiting forever."""
    async def main():
        watching = EtcdGateway(etcd.endpoints, request_timeout=1)  # on e0 first
        writer = EtcdGateway(etcd.endpoints[1:], request_timeout=5)
        prefix = b"/faults/paused/"
        try:
            start = await writer.put(prefix + b"before", b"0")
            resuming = ResumingWatch(watching, prefix, start)
            changes = resuming.__aiter__()
            await next_change(changes)
            etcd.pause(0)
            written = [await write_once(writer, prefix + b"k%d" % index, b"%d" % index)
                       for index in range(3)]
            seen = []
            while len(seen) < 3:
                seen.extend(event.kv.mod_revision for event in (await next_change(changes)).events)
            assert seen == written and resuming.resumed >= 1
            await changes.aclose()
        finally:
            await watching.close()
            await writer.close()

    asyncio.run(main())


def test_without_a_leader_watches_and_requests_fail_fast(etcd):
    async def main():
        client = EtcdGateway(etcd.endpoints[:1], request_timeout=5)
        try:
            watch, _ = await opened(client.watch(b"/faults/leaderless/"))
            etcd.pause(1)
            etcd.pause(2)
            with pytest.raises(NoLeader):
                await watch.__anext__()  # not silence: the member says it has no leader
            with pytest.raises(NoLeader):
                await client.put(b"/faults/leaderless/k", b"v")
            with pytest.raises(NoLeader):
                await opened(client.watch(b"/faults/leaderless/"))
        finally:
            await client.close()

    asyncio.run(main())


def test_a_holder_paused_past_its_ttl_knows_from_its_own_clock_that_the_lease_is_lost(etcd):
    async def main():
        key = b"/faults/holder/%d" % os.getpid()
        holder = await asyncio.create_subprocess_exec(
            sys.executable, str(HOLDER), ",".join(etcd.endpoints), key.decode(),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        client = EtcdGateway(etcd.endpoints)
        try:
            held = json.loads(await holder.stdout.readline())
            kv = await client.get(key)
            assert kv.lease == held["lease"]
            watch, _ = await opened(client.watch(key, kv.mod_revision + 1, prefix=False))
            holder.send_signal(signal.SIGSTOP)
            try:
                gone = await next_change(watch)  # etcd expires the lease: nobody renews it
            finally:
                holder.send_signal(signal.SIGCONT)
            assert [event.type for event in gone.events] == ["delete"]
            holder.stdin.write(b"check\n")
            view = json.loads(await holder.stdout.readline())
            assert view["valid"] is False
            # given up on waking, before any keepalive (which etcd would have answered "gone")
            assert view["lost_reason"] == LOCAL_DEADLINE_PASSED
            await watch.aclose()
        finally:
            if holder.returncode is None:
                holder.kill()
            await holder.wait()
            await client.close()

    asyncio.run(main())
