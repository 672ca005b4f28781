"""A follower's append of a leader's stored records (``append_replicated``) against the
leader's own append of the same messages, per MB, in the same run (a file log, fsync never).

    .venv/bin/python benchmarks/replica_append.py --runs 5
    .venv/bin/python benchmarks/replica_append.py --message-size 100 --messages 10000

The leader's append stamps SEND-layout messages into records (C) and writes them with their
index entries; the follower's checks the stored records in one scan (offsets, timestamps,
checksums; C) and writes them with the entries the scan built. Prints the medians and the
follower ÷ leader ratio.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rill.protocol.iggy.messages import encode_messages
from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.partition_log import LogSettings, PartitionLog

BATCHES = 20


def one_run(directory: Path, messages: int, size: int) -> tuple[float, float, int]:
    """Seconds per batch of the leader's appends and of the follower's, and the batch's bytes."""
    settings, durability = LogSettings(segment_size=1 << 30), Durability(FsyncPolicy.NEVER)
    leader = PartitionLog.open(directory / "leader", settings, durability, clean_shutdown=True)
    follower = PartitionLog.open(directory / "follower", settings, durability, clean_shutdown=True)
    batch = encode_messages([b"x" * size] * messages)
    began = time.perf_counter()
    for number in range(BATCHES):
        leader.append(memoryview(batch), 1_000 + number)
    leading = (time.perf_counter() - began) / BATCHES
    shipped = []
    for number in range(BATCHES):
        _, chunks = leader.read(number * messages, messages)
        shipped.append(b"".join(chunks))
    began = time.perf_counter()
    for number, records in enumerate(shipped):
        follower.append_replicated(records, number * messages)
    following = (time.perf_counter() - began) / BATCHES
    assert follower.next_offset == leader.next_offset
    leader.close()
    follower.close()
    return leading, following, len(shipped[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--messages", type=int, default=1000, help="messages per batch")
    parser.add_argument("--message-size", type=int, default=1000, help="payload bytes")
    options = parser.parse_args()
    leading, following = [], []
    for run in range(options.runs):
        with tempfile.TemporaryDirectory(prefix="rill-replica-append-") as directory:
            lead, follow, size = one_run(Path(directory), options.messages, options.message_size)
        megabytes = size / 1e6
        leading.append(lead * 1000 / megabytes)
        following.append(follow * 1000 / megabytes)
    lead, follow = statistics.median(leading), statistics.median(following)
    print(f"{options.messages} x {options.message_size} B per batch, median of {options.runs} runs:")
    print(f"  leader append   {lead:6.2f} ms per MB")
    print(f"  follower append {follow:6.2f} ms per MB  ({follow / lead:.2f} x the leader's)")


if __name__ == "__main__":
    main()
