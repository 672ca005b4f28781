"""The Coordinator port: one body of tests, run on the memory twin and on a real 3-member etcd
cluster (``coordinated``): key-value, revisions, transactions with every compare, leases,
watches from a revision, compaction and resync, elections, the lease keeper."""

from __future__ import annotations

import asyncio

import pytest
from watching import next_change, opened

from rill.server.cluster.coordinator import (
    Compacted,
    Compare,
    Delete,
    Get,
    KeyValue,
    LeaseNotFound,
    Put,
    prefix_end,
)
from rill.server.cluster.election import Election
from rill.server.cluster.leases import EXPIRED, LOCAL_DEADLINE_PASSED, LeaseKeeper
from rill.server.cluster.watch import ResumingWatch, Resync


def test_prefix_end():
    assert prefix_end(b"a/") == b"a0"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") == b"\0"


def test_put_get_range_and_delete(coordinated):
    async def body(env):
        client, p = env.client(), env.prefix
        first = await client.put(p + b"b", b"2")
        second = await client.put(p + b"a", b"1")
        assert second == first + 1
        await client.put(p + b"c/d", b"3")
        await client.put(p[:-1] + b"0", b"outside")  # after the prefix in key order
        listed = await client.range(p, prefix=True)
        assert [(kv.key, kv.value) for kv in listed.kvs] == [
            (p + b"a", b"1"), (p + b"b", b"2"), (p + b"c/d", b"3")]
        assert listed.revision == second + 2
        assert await client.get(p + b"missing") is None
        got = await client.get(p + b"b")
        assert (got.create_revision, got.mod_revision, got.version, got.lease) == (first, first, 1, 0)
        assert await client.delete(p + b"c", prefix=True) == 1
        assert await client.delete(p, prefix=True) == 2
        assert await client.delete(p + b"a") == 0
        assert (await client.range(p, prefix=True)).kvs == ()

    coordinated(body)


def test_revisions_versions_and_recreation(coordinated):
    async def body(env):
        client, key = env.client(), env.prefix + b"k"
        created = await client.put(key, b"1")
        changed = await client.put(key, b"2")
        kv = await client.get(key)
        assert (kv.create_revision, kv.mod_revision, kv.version) == (created, changed, 2)
        await client.delete(key)
        recreated = await client.put(key, b"3")
        kv = await client.get(key)
        assert (kv.create_revision, kv.version) == (recreated, 1) and recreated > changed
        # one revision for a transaction's writes; none for a transaction that changes nothing
        both = await client.txn((), [Put(key, b"4"), Put(env.prefix + b"j", b"5")])
        assert both.succeeded and both.revision == recreated + 1
        assert {kv.mod_revision for kv in (await client.range(env.prefix, prefix=True)).kvs} == {
            both.revision}
        idle = await client.txn((), [Get(key), Delete(env.prefix + b"nothing")])
        assert idle.revision == both.revision
        assert idle.results[0][0].value == b"4" and idle.results[1] == 0

    coordinated(body)


def test_transactions_compare_every_target(coordinated):
    async def body(env):
        client, key, missing = env.client(), env.prefix + b"k", env.prefix + b"missing"
        grant = await client.grant_lease(5)
        revision = await client.put(key, b"v", lease=grant.id)
        holding = [
            Compare.value(key, "==", b"v"), Compare.value(key, "!=", b"w"),
            Compare.value(key, ">", b"u"), Compare.value(key, "<", b"w"),
            Compare.version(key, "==", 1), Compare.create_revision(key, "==", revision),
            Compare.mod_revision(key, "<", revision + 1), Compare.lease(key, "==", grant.id),
            Compare.missing(missing), Compare.version(missing, "==", 0),
            Compare.lease(missing, "==", 0),
        ]
        for compare in holding:
            result = await client.txn([compare], [Get(key)], [])
            assert result.succeeded, compare
            assert result.results[0][0].value == b"v"
        failing = [Compare.value(key, "==", b"w"), Compare.version(key, ">", 1),
                   Compare.mod_revision(key, "!=", revision), Compare.missing(key),
                   Compare.value(missing, "==", b"")]  # a value compare on a missing key fails
        for compare in failing:
            result = await client.txn([compare], [Put(key, b"changed")], [Get(missing)])
            assert not result.succeeded and result.results == ((),), compare
        assert (await client.get(key)).value == b"v"
        await client.revoke_lease(grant.id)

    coordinated(body)


def test_compare_and_swap_has_one_winner(coordinated):
    async def body(env):
        first, second, key = env.client(), env.client(), env.prefix + b"state"
        await first.put(key, b"epoch 1")
        seen = (await second.get(key)).mod_revision
        won = await first.txn([Compare.mod_revision(key, "==", seen)], [Put(key, b"epoch 2 by first")])
        lost = await second.txn([Compare.mod_revision(key, "==", seen)],
                                [Put(key, b"epoch 2 by second")], [Get(key)])
        assert won.succeeded and not lost.succeeded
        assert lost.results[0][0].value == b"epoch 2 by first"

    coordinated(body)


def test_unknown_leases(coordinated):
    async def body(env):
        client = env.client()
        grant = await client.grant_lease(1)
        assert grant.ttl >= 1
        await client.revoke_lease(grant.id)
        assert await client.keepalive(grant.id) == 0
        assert await client.lease_time_to_live(grant.id) == -1
        with pytest.raises(LeaseNotFound):
            await client.revoke_lease(grant.id)
        with pytest.raises(LeaseNotFound):
            await client.put(env.prefix + b"k", b"v", lease=grant.id)
        assert await client.get(env.prefix + b"k") is None

    coordinated(body)


def test_revoking_a_lease_deletes_its_keys_in_one_revision(coordinated):
    async def body(env):
        client, p = env.client(), env.prefix
        grant = await client.grant_lease(10)
        await client.txn((), [Put(p + b"a", b"1", grant.id), Put(p + b"b", b"2", grant.id)])
        await client.put(p + b"b", b"kept", lease=0)  # detached from the lease
        assert 0 < await client.lease_time_to_live(grant.id) <= grant.ttl
        watch, _ = await opened(client.watch(p))
        await client.revoke_lease(grant.id)
        batch = await next_change(watch)
        assert [(event.type, event.kv.key) for event in batch.events] == [("delete", p + b"a")]
        assert [kv.key for kv in (await client.range(p, prefix=True)).kvs] == [p + b"b"]
        await watch.aclose()

    coordinated(body)


def test_a_lease_not_kept_alive_expires_and_its_keys_go(coordinated):
    async def body(env):
        client, key = env.client(), env.prefix + b"member"
        grant = await client.grant_lease(2)
        await client.put(key, b"alive", lease=grant.id)
        watch, _ = await opened(client.watch(key, prefix=False))
        await client.keepalive(grant.id)
        if env.twin is not None:
            await env.twin.advance(grant.ttl)
        batch = await next_change(watch)  # etcd: after the TTL, by itself
        assert [(event.type, event.kv.key) for event in batch.events] == [("delete", key)]
        assert await client.get(key) is None
        assert await client.keepalive(grant.id) == 0
        await watch.aclose()

    coordinated(body)


def test_watch_from_a_revision_sees_every_change_once_in_order(coordinated):
    async def body(env):
        client, p = env.client(), env.prefix
        start = await client.put(p + b"a", b"1")
        await client.put(p + b"b", b"1")
        await client.put(env.prefix[:-1] + b"-other", b"not watched")
        watch, _ = await opened(client.watch(p, start))
        await client.txn((), [Put(p + b"a", b"2"), Delete(p + b"b")])
        seen = []
        while len(seen) < 4:
            batch = await next_change(watch)
            assert batch.revision == max(event.kv.mod_revision for event in batch.events)
            seen.extend((event.type, event.kv.key, event.kv.value, event.kv.mod_revision)
                        for event in batch.events)
        last = start + 3
        assert seen == [("put", p + b"a", b"1", start), ("put", p + b"b", b"1", start + 1),
                        ("put", p + b"a", b"2", last), ("delete", p + b"b", b"", last)]
        await watch.aclose()

    coordinated(body)


def test_compaction_makes_old_watches_fail_and_a_resuming_watch_resync(coordinated):
    async def body(env):
        client, p = env.client(), env.prefix
        start = await client.put(p + b"a", b"1")
        await client.put(p + b"a", b"2")
        current = await client.put(p + b"b", b"1")
        await client.compact(current)
        with pytest.raises(Compacted):
            await client.compact(current)  # already done
        with pytest.raises(Compacted) as compacted:
            async for _ in client.watch(p, start):
                pass
        assert compacted.value.compact_revision == current
        resuming = ResumingWatch(client, p, start)
        iterator = resuming.__aiter__()
        resync = await next_change(iterator)
        assert isinstance(resync, Resync) and resync.revision >= current
        assert [(kv.key, kv.value) for kv in resync.kvs] == [(p + b"a", b"2"), (p + b"b", b"1")]
        revision = await client.put(p + b"c", b"1")
        batch = await next_change(iterator)
        assert [(event.kv.key, event.kv.mod_revision) for event in batch.events] == [(p + b"c", revision)]
        assert resuming.resynced == 1 and resuming.next_revision == revision + 1
        await iterator.aclose()

    coordinated(body)


def test_election_oldest_candidate_leads_resign_hands_over_and_fences(coordinated):
    async def body(env):
        first_client, second_client = env.client(), env.client()
        first_election = Election(first_client, env.prefix + b"controller/")
        second_election = Election(second_client, env.prefix + b"controller/")
        first_lease = await first_client.grant_lease(10)
        second_lease = await second_client.grant_lease(10)
        observed = first_election.observe().__aiter__()
        assert await observed.__anext__() is None
        first = await first_election.campaign(first_lease.id, b"node 1")
        assert (await observed.__anext__()).value == b"node 1"
        again = await first_election.campaign(first_lease.id, b"node 1")  # a retry keeps its place
        assert again.epoch == first.epoch
        waiting = asyncio.ensure_future(second_election.campaign(second_lease.id, b"node 2"))
        await asyncio.sleep(0)
        state = env.prefix + b"state"
        assert (await first_client.txn([first.fence()], [Put(state, b"by node 1")])).succeeded
        assert not waiting.done() and (await second_election.leader()).value == b"node 1"
        assert await first_election.resign(first)
        second = await waiting
        assert second.value == b"node 2" and second.epoch > first.epoch
        assert (await observed.__anext__()).value == b"node 2"
        # the deposed leader's fenced writes change nothing
        assert not (await first_client.txn([first.fence()], [Put(state, b"stale")])).succeeded
        assert not await first_election.resign(first)
        assert (await first_client.get(state)).value == b"by node 1"
        await observed.aclose()
        for lease in (first_lease, second_lease):
            await first_client.revoke_lease(lease.id)

    coordinated(body)


def test_a_lease_keeper_renews_and_a_lost_lease_hands_the_election_over(coordinated):
    async def body(env):
        client = env.client()
        keeper = LeaseKeeper(client, 2)
        lease = await keeper.start()
        election = Election(client, env.prefix + b"controller/")
        leader = await election.campaign(lease, b"kept")
        await env.pass_time(keeper.ttl + 1)  # past the TTL: only the keepalives keep it
        assert keeper.valid and keeper.keepalives_sent >= 2
        assert (await election.leader()).epoch == leader.epoch
        assert await client.lease_time_to_live(lease) > 0
        assert keeper.deadline > client.clock()
        # a second candidate takes over once the keeper stops and the lease runs out
        await keeper.stop(revoke=False)
        assert keeper.lost.is_set()
        other = await client.grant_lease(10)
        taking_over = asyncio.ensure_future(election.campaign(other.id, b"next"))
        if env.twin is not None:
            await env.twin.advance(keeper.ttl)
        assert (await taking_over).value == b"next"
        await client.revoke_lease(other.id)

    coordinated(body)


def test_twin_local_deadline_passes_while_the_coordinator_has_no_leader():
    """The keeper's own clock, not the coordinator, says when the lease may be gone; without a
    leader the twin expires nothing (etcd's lessor is the leader's) and restarts every TTL
    when the leader is back."""
    from rill.server.cluster.coordinator import NoLeader
    from rill.server.cluster.memory_coordinator import MemoryCoordinator

    async def main():
        twin = MemoryCoordinator()
        keeper = LeaseKeeper(twin, 3)
        lease = await keeper.start()
        await twin.put(b"/m/1", b"x", lease=lease)
        watch, _ = await opened(twin.watch(b"/m/"))
        twin.set_leader(False)
        with pytest.raises(NoLeader):
            await watch.__anext__()
        with pytest.raises(NoLeader):
            await twin.get(b"/m/1")
        await twin.advance(2.9)
        assert keeper.valid and keeper.keepalives_sent == 2  # both refused: no leader
        await twin.advance(0.2)  # past grant + TTL
        assert not keeper.valid
        await twin.advance(1)  # the keeper wakes: it gives the lease up without asking
        assert keeper.lost_reason == LOCAL_DEADLINE_PASSED and keeper.keepalives_sent == 2
        twin.set_leader(True)
        assert await twin.lease_time_to_live(lease) == 3  # the new leader restarted its TTL
        assert (await twin.get(b"/m/1")).value == b"x"
        gone = LeaseKeeper(twin, 2)
        await gone.start()
        await twin.revoke_lease(gone.lease)
        await twin.advance(1)
        assert gone.lost_reason == EXPIRED

    asyncio.run(main())


def test_key_values_are_neutral_values():
    assert KeyValue(b"k") == KeyValue(b"k", b"", 0, 0, 0, 0)


def test_a_watch_from_a_future_revision_starts_there(coordinated):
    async def body(env):
        client, p = env.client(), env.prefix
        now = (await client.range(p, prefix=True)).revision
        watch, _ = await opened(client.watch(p, now + 3))
        for index in range(3):
            await client.put(p + b"k", b"%d" % index)
        batch = await next_change(watch)
        assert [(event.kv.value, event.kv.mod_revision) for event in batch.events] == [(b"2", now + 3)]
        await watch.aclose()

    coordinated(body)


def test_twin_a_resuming_watch_waits_for_the_leader_and_gives_up_after_its_retries():
    from rill.server.cluster.coordinator import NoLeader
    from rill.server.cluster.memory_coordinator import MemoryCoordinator

    async def main():
        twin = MemoryCoordinator()
        start = await twin.put(b"/w/a", b"1")
        resuming = ResumingWatch(twin, b"/w/", start, retries=2, backoff=1)
        changes = resuming.__aiter__()
        assert (await next_change(changes)).events[0].kv.key == b"/w/a"
        twin.set_leader(False)
        reopened = asyncio.ensure_future(changes.__anext__())
        await twin.advance(2)  # tries at 0 and 1 s fail: no leader
        assert not reopened.done()
        twin.set_leader(True)
        await twin.advance(2)  # the try at 3 s opens it again
        assert (await reopened).events == () and resuming.resumed == 1
        revision = await twin.put(b"/w/b", b"2")
        assert (await next_change(changes)).revision == revision
        twin.set_leader(False)
        giving_up = asyncio.ensure_future(next_change(changes))
        await twin.advance(3)  # 1 + 2 s of waiting, then the last try fails
        with pytest.raises(NoLeader):
            await giving_up
        assert resuming.next_revision == revision + 1

    asyncio.run(main())
