"""The rules that change a partition's replicated state (``cluster.partition_state``): the
assignment of a new topic, the controller's elections and the leader's ISR changes. Named
regressions: Kafka's 2013 "ISR of one" loss (acks=all meaning one copy: refused below the
minimum ISR, ``core.messages``), and KIP-966's "last replica standing" (an ISR never empties,
and no replica outside it is elected)."""

from __future__ import annotations

from rill.server.cluster.partition_state import (
    PartitionState,
    assign,
    elect,
    expand,
    first_state,
    prefer,
    purged,
    shrink,
)


def test_assignment_spreads_leaders_round_robin_over_the_live_nodes() -> None:
    assert assign([1, 2, 3], 3, 3) == [(1, 2, 3), (2, 3, 1), (3, 1, 2)]
    assert assign([1, 2, 3], 1, 4, start=2) == [(3,), (1,), (2,), (3,)]
    state = first_state((2, 3, 1), 2)
    assert (state.leader, state.leader_epoch, state.isr) == (2, 1, (2, 3, 1))


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member_at_the_next_epoch() -> None:
    state = PartitionState((1, 2, 3), 1, 4, (1, 2, 3), 2)
    new = elect(state, live={2, 3})
    assert new is not None
    assert (new.leader, new.leader_epoch, new.isr) == (2, 5, (2, 3))
    assert elect(new, live={2, 3}) is None  # settled: nothing more to change


def test_a_replica_out_of_the_isr_is_never_elected() -> None:
    state = PartitionState((1, 2, 3), 1, 4, (1, 2), 2)  # 3 is behind
    new = elect(state, live={2, 3})
    assert new is not None and new.leader == 2
    offline = elect(PartitionState((1, 2, 3), 1, 4, (1,), 2), live={2, 3})
    assert offline is not None and offline.leader is None  # no unclean election


def test_kip_966_the_last_isr_member_stays_in_the_isr_when_it_dies() -> None:
    """The ISR shrank to node 1, then node 1 died: the partition waits for it (leader None),
    its ISR still names it, and when it comes back (a new member epoch) it leads again at a new
    epoch; nodes 2 and 3, live all along, are not elected (they may lack committed records)."""
    alone = PartitionState((1, 2, 3), 1, 7, (1,), 2)
    dead = elect(alone, live={2, 3})
    assert dead is not None
    assert (dead.leader, dead.isr, dead.leader_epoch) == (None, (1,), 8)
    back = elect(dead, live={1, 2, 3}, restarted={1})
    assert back is not None
    assert (back.leader, back.isr, back.leader_epoch) == (1, (1,), 9)


def test_a_restarted_leader_is_elected_again_at_a_new_epoch_and_restarted_followers_leave() -> None:
    """A leader that restarted may have lost an unsynced tail: leading on at the same epoch
    would let replicas diverge under one epoch. The controller elects the first live member
    that did not restart, and restarted ones leave the ISR until they catch up."""
    state = PartitionState((1, 2, 3), 1, 3, (1, 2, 3), 2)
    new = elect(state, live={1, 2, 3}, restarted={1})
    assert new is not None
    assert (new.leader, new.leader_epoch, new.isr) == (2, 4, (2, 3))
    only_restarted = elect(state, live={1, 2, 3}, restarted={1, 2, 3})
    assert only_restarted is not None and only_restarted.leader_epoch == 4
    assert only_restarted.leader == 1 and only_restarted.isr == (1,)


def test_the_leader_shrinks_and_expands_its_isr_but_never_drops_itself() -> None:
    state = PartitionState((1, 2, 3), 1, 2, (1, 2, 3), 2)
    shrunk = shrink(state, {3, 1})
    assert shrunk is not None and shrunk.isr == (1, 2)
    assert shrink(shrunk, {4}) is None
    grown = expand(shrunk, 3)
    assert grown is not None and grown.isr == (1, 2, 3)
    assert expand(grown, 3) is None and expand(grown, 9) is None


def test_leadership_goes_back_to_the_preferred_replica_once_it_is_live_and_in_sync() -> None:
    """After a failover node 2 leads what node 1 was assigned first; once node 1 is live and
    back in the ISR, an orderly election at the next epoch gives it back (the leaders spread
    as the assignment spread them). Out of the ISR, dead, or leading already: no change."""
    moved = PartitionState((1, 2, 3), 2, 5, (2, 3, 1), 2)
    back = prefer(moved, live={1, 2, 3})
    assert back is not None
    assert (back.leader, back.leader_epoch, back.isr) == (1, 6, (2, 3, 1))
    assert prefer(back, live={1, 2, 3}) is None
    assert prefer(PartitionState((1, 2, 3), 2, 5, (2, 3), 2), live={1, 2, 3}) is None
    assert prefer(moved, live={2, 3}) is None
    assert prefer(PartitionState((1, 2, 3), None, 5, (1,), 2), live={2, 3}) is None


def test_a_purge_gives_a_new_incarnation_above_every_earlier_one_at_the_next_epoch() -> None:
    """A purged partition is another one under the same ids: its incarnation rises past the
    key's creation (even when the key was never changed since: epoch == creation) and past the
    purge before it, its leader epoch rises by one, its replicas, leader and ISR stay, and
    the incarnation survives etcd's JSON (an unpurged state's is its key's creation)."""
    fresh = PartitionState((1, 2, 3), 2, 1, (2, 3, 1), 2, revision=40, created=40)
    assert fresh.incarnation == 40
    first = purged(fresh)
    assert first.incarnation == 41 and first.leader_epoch == 2
    assert (first.replicas, first.leader, first.isr) == (fresh.replicas, 2, fresh.isr)
    stored = PartitionState.from_json(first.to_json(), revision=57, created=40)
    assert stored.incarnation == 41
    second = purged(stored)
    assert second.incarnation == 58 and second.leader_epoch == 3
    assert PartitionState.from_json(fresh.to_json(), revision=40, created=40).incarnation == 40
    assert b"purged_at" not in fresh.to_json()  # (a state written before purges reads alike)
