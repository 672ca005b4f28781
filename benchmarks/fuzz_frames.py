"""Mutated frames against a real server: no crash, no hang, no unclean reply, memory bounded.

Starts a rill server (TCP only, fsync never) in a temporary directory, or uses
``--server-address``. Builds valid request frames of every command of the codec (and SEND
regions of many shapes), mutates them with a seeded generator (bit flips, bytes replaced by
interesting values, insertions, deletions, truncation, splices of two frames, wrong length
prefixes) and sends each on a connection, logged in as root or not (a fresh connection after
every close). Every frame must get a clean outcome:

* a well-formed reply (u32 status, u32 length, exactly that many bytes), or
* where the protocol closes (length < 4: status 3; too large: 4029; before login: small
  limit), that status and then a clean close.

HANG (no reply within ``--timeout`` while the connection stays open), UNCLEAN (a malformed
reply, a close without the documented status) and CRASH (the server process gone) are counted
and the frames saved for ``--replay``. Every ``--check-every`` frames a fresh connection must
answer PING and the server's RSS is sampled. Frames that would change the root user's password,
permissions or status, or delete users, are skipped (they would lock the fuzzer out, not find a
bug); streams made by mutated frames are deleted now and then to keep the data bounded.

    python benchmarks/fuzz_frames.py [--frames 100000] [--seed 1] [--replay FILE]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import socket
import struct
import sys
import time
from pathlib import Path

import psutil

from rill.bench.server import RillServer
from rill.client import Client
from rill.protocol.iggy.commands.groups import (
    CreateConsumerGroup, DeleteConsumerGroup, GetConsumerGroup, GetConsumerGroups,
    JoinConsumerGroup, LeaveConsumerGroup,
)
from rill.protocol.iggy.commands.messages import FlushUnsavedBuffer, PollMessages, SendMessages
from rill.protocol.iggy.commands.offsets import GetConsumerOffset, StoreConsumerOffset
from rill.protocol.iggy.commands.partitions import CreatePartitions, DeletePartitions
from rill.protocol.iggy.commands.streams import (
    CreateStream, DeleteStream, GetStream, GetStreams, PurgeStream, UpdateStream,
)
from rill.protocol.iggy.commands.system import GetClient, GetClients, GetMe, GetStats, Ping
from rill.protocol.iggy.commands.tokens import (
    CreatePersonalAccessToken, DeletePersonalAccessToken, GetPersonalAccessTokens,
    LoginWithPersonalAccessToken,
)
from rill.protocol.iggy.commands.topics import (
    CreateTopic, DeleteTopic, GetTopic, GetTopics, PurgeTopic, UpdateTopic,
)
from rill.protocol.iggy.commands.users import CreateUser, GetUser, GetUsers, LoginUser
from rill.protocol.iggy.headers import HeaderKind, HeaderValue
from rill.protocol.iggy.messages import Message
from rill.protocol.primitives import CompressionAlgorithm, UserStatus
from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning, PollingStrategy

# commands a mutated frame must not become: they would lock the fuzzer out of its own server
SKIPPED_CODES = {33, 34, 35, 36, 37, 44}  # delete/update user, permissions, password, logout, PAT delete
CLOSING = {3, 4029}  # statuses after which the server may close (malformed length, too large)
INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0xFE]
INTERESTING_U32 = [0, 1, 3, 4, 7, 8, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 4096,
                   64 * 2**20, 60 * 2**20]
LOGIN = LoginUser("iggy", "iggy").to_frame()


def samples() -> list[bytes]:
    """Valid frames of every command (and SEND regions of several shapes)."""
    s1, t1 = Identifier(1), Identifier(1)
    headers = {"k": HeaderValue(HeaderKind.STRING, b"v"), "n": HeaderValue(HeaderKind.UINT64, bytes(8))}
    regions = [
        [Message(b"x")], [Message(b"y" * 1000, id=7)], [Message(b"h", headers=headers)] * 3,
        [Message(bytes(range(256)))] * 20,
    ]
    commands = [
        Ping(), GetStats(), GetMe(), GetClient(1), GetClients(), GetUsers(), GetUser(Identifier(1)),
        CreateUser("fuzzer", "fuzz-pass", UserStatus.ACTIVE, None), GetStreams(), GetStream(s1),
        CreateStream(1, "fuzz"), UpdateStream(s1, "fuzz"), PurgeStream(s1), GetTopics(s1),
        GetTopic(s1, t1), CreateTopic(s1, 1, 2, CompressionAlgorithm.NONE, 0, 0, 0, "t"),
        UpdateTopic(s1, t1, CompressionAlgorithm.NONE, 0, 0, 0, "t"), PurgeTopic(s1, t1),
        CreatePartitions(s1, t1, 1), DeletePartitions(s1, t1, 1),
        PollMessages(Consumer.regular(1), s1, t1, 1, PollingStrategy.offset(0), 10, False),
        PollMessages(Consumer.regular(1), s1, t1, 1, PollingStrategy.next(), 2**32 - 1, True),
        StoreConsumerOffset(Consumer.regular(1), s1, t1, 1, 0), GetConsumerOffset(Consumer.regular(1), s1, t1, 1),
        FlushUnsavedBuffer(s1, t1, 1, True), CreateConsumerGroup(s1, t1, 1, "g"),
        GetConsumerGroup(s1, t1, Identifier(1)), GetConsumerGroups(s1, t1),
        JoinConsumerGroup(s1, t1, Identifier(1)), LeaveConsumerGroup(s1, t1, Identifier(1)),
        DeleteConsumerGroup(s1, t1, Identifier(1)), CreatePersonalAccessToken("fuzz-token", 0),
        GetPersonalAccessTokens(), DeletePersonalAccessToken("fuzz-token"),
        LoginWithPersonalAccessToken("x" * 50), DeleteTopic(s1, t1), DeleteStream(s1),
    ]
    frames = [command.to_frame() for command in commands]
    frames += [SendMessages.of(1, 1, Partitioning.partition_id(1), region).to_frame() for region in regions]
    frames += [SendMessages.of(1, 1, Partitioning.messages_key(b"key"), regions[1]).to_frame()]
    return frames


def mutate(rng: random.Random, frames: list[bytes]) -> bytes:
    frame = bytearray(rng.choice(frames))
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
        kind = rng.randrange(9)
        position = rng.randrange(len(frame)) if frame else 0
        if kind == 0 and frame:  # flip a bit
            frame[position] ^= 1 << rng.randrange(8)
        elif kind == 1 and frame:  # an interesting byte
            frame[position] = rng.choice(INTERESTING)
        elif kind == 2 and len(frame) >= 4:  # an interesting u32 anywhere (lengths, counts)
            at = rng.randrange(len(frame) - 3)
            frame[at:at + 4] = struct.pack("<I", rng.choice(INTERESTING_U32))
        elif kind == 3:  # insert random bytes
            frame[position:position] = os.urandom(rng.randrange(1, 16))
        elif kind == 4 and frame:  # delete bytes
            del frame[position:position + rng.randrange(1, 16)]
        elif kind == 5:  # truncate
            del frame[rng.randrange(len(frame) + 1):]
        elif kind == 6:  # splice another frame's tail
            other = rng.choice(frames)
            frame[position:] = other[rng.randrange(len(other)):]
        elif kind == 7 and len(frame) >= 8:  # another command code, same payload
            frame[4:8] = struct.pack("<I", rng.choice(list(range(1, 45)) + [100, 101, 200, 300, 302]))
        elif kind == 8 and len(frame) >= 4:  # a length prefix that lies
            frame[0:4] = struct.pack("<I", max(0, len(frame) - 4 + rng.choice((-9, -1, 1, 9, 1000))))
    if rng.random() < 0.7 and len(frame) >= 8:  # most frames keep a truthful length prefix
        frame[0:4] = struct.pack("<I", len(frame) - 4)
    return bytes(frame)


class Link:
    def __init__(self, address: tuple[str, int], login: bool, timeout: float) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        if login:
            self.sock.sendall(LOGIN)
            self.reply()

    def reply(self) -> tuple[int, bytes]:
        head = self.exactly(8)
        status, length = struct.unpack("<II", head)
        return status, self.exactly(length)

    def exactly(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(min(size - len(data), 1 << 20))
            if not chunk:
                raise EOFError
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()


def one_frame(link: Link, frame: bytes) -> tuple[str, int | None]:
    """Send ``frame``; the outcome class and the status (or None)."""
    try:
        link.sock.sendall(frame)
    except OSError:
        return "closed before the reply", None
    announced = struct.unpack_from("<I", frame)[0] if len(frame) >= 4 else None
    complete = announced is not None and announced >= 4 and len(frame) - 4 >= announced
    if not complete:
        # The server waits for the rest of an incomplete frame (or answers early: too large,
        # too large before login). Ending the connection's writing half makes it decide now:
        # an early answer, or a clean close at end of stream; anything else is a hang.
        try:
            link.sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server already answered and closed
            pass
    try:
        status, _ = link.reply()
    except socket.timeout:
        return "HANG", None
    except (EOFError, ConnectionResetError):
        return ("UNCLEAN", None) if complete else ("incomplete frame, closed", None)
    except struct.error:
        return "UNCLEAN", None
    return "reply", status


def run(address: tuple[str, int], process: psutil.Process | None, frames_count: int, seed: int,
        timeout: float, check_every: int, saved: Path) -> int:
    rng = random.Random(seed)
    frames = samples()
    outcomes: collections.Counter[str] = collections.Counter()
    statuses: collections.Counter[int] = collections.Counter()
    bad: list[tuple[str, bytes]] = []
    rss = [process.memory_info().rss] if process else []
    link: Link | None = None
    started = time.monotonic()
    sent = 0
    while sent < frames_count:
        frame = mutate(rng, frames)
        if len(frame) >= 8 and struct.unpack_from("<I", frame, 4)[0] in SKIPPED_CODES:
            continue
        if link is None:
            link = Link(address, login=rng.random() < 0.8, timeout=timeout)
        outcome, status = one_frame(link, frame)
        sent += 1
        outcomes[outcome] += 1
        if status is not None:
            statuses[status] += 1
        if outcome in ("HANG", "UNCLEAN"):
            bad.append((outcome, frame))
        # Bytes beyond the announced length start another frame on the server's side: the
        # stream is out of step with this fuzzer's idea of it, so start a fresh connection.
        exact = len(frame) >= 4 and struct.unpack_from("<I", frame)[0] == len(frame) - 4
        if outcome != "reply" or status in CLOSING or not exact or rng.random() < 0.01:
            link.close()
            link = None
        if sent % check_every == 0:
            if process is not None and not process.is_running():
                outcomes["CRASH"] += 1
                break
            probe = Link(address, login=False, timeout=10)
            probe.sock.sendall(struct.pack("<II", 4, 1))
            assert probe.reply() == (0, b""), "PING failed"
            probe.close()
            if process is not None:
                rss.append(process.memory_info().rss)
            if sent % (check_every * 10) == 0:
                with Client(f"{address[0]}:{address[1]}") as admin:  # keep the data bounded
                    admin.login_user("iggy", "iggy")
                    for stream in admin.get_streams():
                        admin.delete_stream(stream.id)
                print(f"  {sent} frames, {sent / (time.monotonic() - started):.0f}/s, "
                      f"RSS {rss[-1] / 2**20:.0f} MiB" if rss else f"  {sent} frames", flush=True)
    elapsed = time.monotonic() - started
    if link is not None:
        link.close()
    if bad:
        with open(saved, "wb") as file:
            for outcome, frame in bad:
                file.write(struct.pack("<I", len(frame)) + frame)
    print(f"\nframes sent: {sent} in {elapsed:.0f} s ({sent / elapsed:.0f}/s), seed {seed}")
    for outcome, count in sorted(outcomes.items()):
        print(f"  {outcome:<24} {count}")
    print("  statuses: " + ", ".join(f"{code}: {count}" for code, count in statuses.most_common(12)))
    if rss:
        print(f"  server RSS: {rss[0] / 2**20:.0f} MiB at start, {max(rss) / 2**20:.0f} MiB at most, "
              f"{rss[-1] / 2**20:.0f} MiB at the end")
    failures = outcomes["HANG"] + outcomes["UNCLEAN"] + outcomes["CRASH"]
    print(f"crashes {outcomes['CRASH']}, hangs {outcomes['HANG']}, unclean {outcomes['UNCLEAN']}"
          + (f" (frames saved to {saved})" if bad else ""))
    return 1 if failures else 0


def replay(address: tuple[str, int], path: Path, timeout: float) -> None:
    data = path.read_bytes()
    while data:
        (size,) = struct.unpack_from("<I", data)
        frame, data = data[4:4 + size], data[4 + size:]
        link = Link(address, login=True, timeout=timeout)
        print(frame.hex()[:120], one_frame(link, frame))
        link.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds a reply may take")
    parser.add_argument("--check-every", type=int, default=1000)
    parser.add_argument("--server-address", help="HOST:PORT of a running server")
    parser.add_argument("--replay", type=Path, help="send the frames saved by an earlier run")
    parser.add_argument("--save", type=Path, default=Path("fuzz-failures.bin"))
    arguments = parser.parse_args()
    env = {"RILL_LOGIN_THROTTLE_ENABLED": "false",  # the fuzzer logs in thousands of times
           "RILL_ROOT_PASSWORD_HASH_COST": "4"}
    if arguments.server_address:
        host, port = arguments.server_address.rsplit(":", 1)
        address, process, server = (host, int(port)), None, None
    else:
        server = RillServer(fsync="never", env=env).start()
        host, port = server.addresses["tcp"].rsplit(":", 1)
        address, process = (host, int(port)), psutil.Process(server.process.pid)
    try:
        if arguments.replay:
            replay(address, arguments.replay, arguments.timeout)
            code = 0
        else:
            code = run(address, process, arguments.frames, arguments.seed, arguments.timeout,
                       arguments.check_every, arguments.save)
    finally:
        if server is not None:
            server.stop()
    sys.exit(code)


if __name__ == "__main__":
    main()
