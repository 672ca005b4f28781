"""A follower's truncation and copy, and a leader's high watermark (``cluster.replication``),
on memory logs, with the leader's answers given in this process (a link standing in for the
peer protocol: this module's unit tests). Named regressions: KIP-101 (a follower that truncated
to its high watermark lost committed records) and KIP-279 (back-to-back leader changes left
replicas divergent)."""

from __future__ import annotations

import asyncio
import zlib

import pytest

from rill import errors
from rill.protocol.iggy.messages import Message as IggyMessage, encode_messages
from rill.protocol.peer import codec
from rill.protocol.peer.codec import Message
from rill.server.cluster.partition_state import PartitionState
from rill.server.cluster.replication import Follower, LeaderReplica, answer_fetch
from rill.server.core.model import Partition
from rill.server.storage.memory_log import MemoryLogs

_logs = MemoryLogs(segment_size=4096)
_numbers = iter(range(1, 10_000))


def make_partition(record_format: str = "iggy-v1") -> Partition:
    log = _logs.open(1, 1, next(_numbers), record_format, True)
    return Partition(1, 1, 1, 0, log)


def write(partition: Partition, epoch: int, *payloads: str) -> None:
    log = partition.log
    if epoch > log.leader_epoch:
        log.leader_epoch = epoch
    for payload in payloads:  # the same id and time for the same payload at the same offset
        message = IggyMessage(payload.encode(), id=zlib.crc32(payload.encode()) + 1)
        log.append(memoryview(encode_messages([message])), 1_000 + log.next_offset)


def contents(partition: Partition) -> bytes:
    log = partition.log
    _, chunks = log.read(log.first_offset, log.next_offset - log.first_offset)
    return b"".join(bytes(chunk) for chunk in chunks)


class Caught(Exception):
    """The follower reached the leader's end."""


class LeaderLink:
    """The leader's answers, as its peer handler gives them (``node.ClusterNode.serve_peer``)."""

    def __init__(self, leader: LeaderReplica) -> None:
        self.leader = leader
        self.asked: list[tuple[int, dict]] = []

    async def request(self, kind: int, header: dict, body: bytes = b"",
                      timeout: float = 5.0) -> Message:
        self.asked.append((kind, dict(header)))
        log = self.leader.partition.log
        if kind == codec.EPOCH_END:
            found = log.epoch_end(header["epoch"])
            fields = ({"epoch": None, "end_offset": log.first_offset} if found is None
                      else {"epoch": found[0], "end_offset": found[1]})
            return Message(kind | codec.ANSWER, 1, {"status": "ok", **fields})
        assert kind == codec.FETCH
        self.leader.fetched(header["replica_id"], header["fetch_offset"])
        if header["fetch_offset"] >= log.next_offset:
            raise Caught()
        fields, records = answer_fetch(self.leader, header)
        return Message(kind | codec.ANSWER, 1, {"status": "ok", **fields}, b"".join(records))


def follow(follower_partition: Partition, leader: LeaderReplica) -> LeaderLink:
    link = LeaderLink(leader)
    follower = Follower(follower_partition, 1, leader.epoch, 0, None, 2, lambda: 7, lambda: None)

    async def run() -> None:
        await follower._truncate(link)  # type: ignore[arg-type]
        try:
            await follower._fetch_loop(link)  # type: ignore[arg-type]
        except Caught:
            pass

    asyncio.run(run())
    return link


def leading(partition: Partition, epoch: int, isr: tuple[int, ...] = (1, 2)) -> LeaderReplica:
    partition.log.leader_epoch = max(partition.log.leader_epoch, epoch)
    if partition._high_watermark is None:
        partition.high_watermark = 0  # a new leader knows of nothing committed yet
    return LeaderReplica(partition, PartitionState((1, 2), 1, epoch, isr, 2), 1, lambda p: None)


@pytest.mark.parametrize("record_format", ["iggy-v1"])
def test_a_follower_copies_the_leaders_records_byte_for_byte(record_format: str) -> None:
    leader_partition, follower_partition = make_partition(), make_partition()
    write(leader_partition, 1, *(f"m{n}" for n in range(40)))
    leader = leading(leader_partition, 1)
    follow(follower_partition, leader)
    assert contents(follower_partition) == contents(leader_partition)
    assert follower_partition.log.next_offset == 40
    assert leader_partition.high_watermark == 40  # the ISR (1, 2) holds every record


def test_kip_101_a_new_follower_keeps_what_it_shares_with_the_leader_above_its_high_watermark(
        ) -> None:
    """Before KIP-101 a follower cut its log to its high watermark on becoming a follower, and
    lost records the leader had committed meanwhile. Here it asks where its epoch ends."""
    old_leader, new_leader = make_partition(), make_partition()
    write(old_leader, 1, "a", "b", "c", "d")
    write(new_leader, 1, "a", "b", "c", "d")
    old_leader.high_watermark = 2  # what this replica knew was committed when it led
    leader = leading(new_leader, 2)
    link = follow(old_leader, leader)
    assert old_leader.log.next_offset == 4
    assert contents(old_leader) == contents(new_leader)
    assert [kind for kind, _ in link.asked][0] == codec.EPOCH_END


def test_kip_279_back_to_back_leader_changes_leave_no_divergent_replicas() -> None:
    """The leader of epoch 1 wrote a..e; this replica got a..c, led epoch 2 briefly (x, y at
    offsets 3-4, never committed) and died; the old leader leads again at epoch 3. Asked where
    epoch 2 ends, the leader answers with its own epoch 1, which ends at 5: cutting at 5 would
    keep x, y beside the leader's d, e. KIP-279: the follower cuts at its own end of the epoch
    the leader named (3), then copies d, e and epoch 3."""
    follower, new_leader = make_partition(), make_partition()
    write(follower, 1, "a", "b", "c")
    write(new_leader, 1, "a", "b", "c", "d", "e")
    write(follower, 2, "x", "y")  # never committed: only this replica has them
    write(new_leader, 3, "p", "q")
    leader = leading(new_leader, 3)
    follow(follower, leader)
    assert contents(follower) == contents(new_leader)
    assert follower.log.epoch_end(1) == (1, 5)
    assert follower.log.epoch_end(2) == (1, 5)  # epoch 2 is gone


def test_a_truncation_below_the_known_high_watermark_is_refused() -> None:
    """Invariant 4: what a replica knew was committed is never cut, even when a leader that
    lacks it says so (an unclean election); the follower stops rather than lose it."""
    follower, new_leader = make_partition(), make_partition()
    write(follower, 1, "a", "b", "c", "d")
    write(new_leader, 1, "a")
    write(new_leader, 2, "z")
    follower.high_watermark = 4
    leader = leading(new_leader, 2)
    with pytest.raises(Exception):
        follow(follower, leader)
    assert follower.log.next_offset == 4


def test_the_high_watermark_is_the_smallest_end_of_the_isr() -> None:
    partition = make_partition()
    write(partition, 1, "a", "b", "c", "d", "e")
    leader = leading(partition, 1, isr=(1, 2, 3))
    leader.state = PartitionState((1, 2, 3), 1, 1, (1, 2, 3), 2)
    leader.fetched(2, 5)
    assert partition.high_watermark == 0  # node 3 has fetched nothing yet
    leader.fetched(3, 3)
    assert partition.high_watermark == 3
    leader.update(PartitionState((1, 2, 3), 1, 1, (1, 2), 2))  # 3 left the ISR
    assert partition.high_watermark == 5


def test_an_acks_all_wait_ends_when_the_isr_holds_the_records_or_unknown_when_the_leader_steps_down(
        ) -> None:
    partition = make_partition()
    write(partition, 1, "a", "b")
    leader = leading(partition, 1)

    async def scenario() -> None:
        waiting = asyncio.ensure_future(leader.replicated(1, 5.0))
        await asyncio.sleep(0)
        assert not waiting.done()
        leader.fetched(2, 2)
        await asyncio.wait_for(waiting, 1.0)
        write(partition, 1, "c")
        second = asyncio.ensure_future(leader.replicated(2, 5.0))
        await asyncio.sleep(0)
        leader.step_down(3)
        # an unknown outcome, not a refusal: "not the leader" would have the Iggy proxy, an
        # HTTP redirect or a TANK client send the write again to node 3, which may hold it
        with pytest.raises(errors.LeaderSteppedDown, match="stopped leading partition 1 "
                           r"\(its leader is now 3\).*may still be committed"):
            await second
        with pytest.raises(errors.ReplicationTimedOut):
            await leader.replicated(5, 0.05)

    asyncio.run(scenario())


def test_a_leader_answers_a_large_fetch_with_file_regions_of_its_log(tmp_path) -> None:
    """A fetch answer's large verified ranges are regions of the log files (the peer listener
    sends them by sendfile), holding exactly the records a read returns."""
    from rill.server.storage.durability import Durability, FsyncPolicy
    from rill.server.storage.file_region import FileRegion
    from rill.server.storage.partition_log import LogSettings, PartitionLog

    log = PartitionLog.open(tmp_path / "leader", LogSettings(segment_size=1 << 20),
                            Durability(FsyncPolicy.NEVER), clean_shutdown=True)
    partition = Partition(1, 1, 1, 0, log)
    for number in range(4):
        log.append(memoryview(encode_messages([IggyMessage(bytes([number]) * 1000, id=n + 1)
                                               for n in range(100)])), 1_000 + number)
    leader = leading(partition, 0)
    header = {"fetch_offset": 0, "max_bytes": 1 << 20}
    fields, parts = answer_fetch(leader, header, regions=True)
    try:
        assert fields["count"] == 400
        assert any(type(part) is FileRegion for part in parts)
        sent = b"".join(part.read() if type(part) is FileRegion else bytes(part) for part in parts)
        assert sent == contents(partition)
        assert all(type(part) is not FileRegion for part in answer_fetch(leader, header)[1])
    finally:
        for part in parts:
            if type(part) is FileRegion:
                part.close()
        log.close()
