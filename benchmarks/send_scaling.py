"""Send throughput of 1..N producer processes, each to its own partition (or stream).

Every producer is a separate OS process that sends one pre-encoded SEND frame (1,000 messages
of 1 KB by default) over a plain blocking socket and waits for each answer, so the client side
costs a ``sendall`` and a ``recv`` per batch and the server is what is measured. Per run the
producers share ``--total-batches`` between them (the work stays the same whatever N), start
together at a barrier, and the aggregate MB/s is payload bytes over (last finish - first
start). The server's CPU time over the same span (``/proc``, all its threads) is reported as
"cores": 1.0 means one core busy the whole time; with appends in worker threads it can exceed
1 even though one event loop serves every connection.

``--compare VARIANT ...`` starts one server per variant (environments in ``VARIANTS``) and
interleaves their runs, so a baseline and a change are measured side by side. After each run
the streams are deleted, so the disk does not fill up.

    python benchmarks/send_scaling.py --producers 1 2 4 8 --runs 3 [--fsync interval]
    python benchmarks/send_scaling.py --producers 8 --fsync always --compare default
    python benchmarks/send_scaling.py --producers 1 4 --compare inline-appends threaded-appends
    python benchmarks/send_scaling.py --producers 8 --servers 2   # would two processes pay off?
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass

from rill.client import AsyncClient
from rill.protocol.iggy.commands.messages import SendMessages
from rill.protocol.iggy.commands.users import LoginUser
from rill.protocol.iggy.framing import RESPONSE_HEADER, encode_request
from rill.protocol.iggy.messages import Message, encode_messages
from rill.protocol.iggy.primitives import Identifier, Partitioning

import send_poll  # this folder's send_poll.py: the server start-up and the variants

# variant name -> environment overrides of its server: send_poll.py's, plus the fsync ones
VARIANTS: dict[str, dict[str, str]] = {
    **send_poll.VARIANTS,
    "fsync-interval": {"RILL_SYSTEM_FSYNC": "interval"},
    "fsync-always": {"RILL_SYSTEM_FSYNC": "always"},
    # fsync always, one fsync at a time, every file in each round (the first group commit)
    "fsync-always-serial": {"RILL_SYSTEM_FSYNC": "always", "RILL_SYSTEM_FSYNC_THREADS": "1"},
}
start_server = send_poll.start_server

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, thread: int | None = None) -> float:
    """User + system CPU time of a process (all its threads), or of one of its threads."""
    path = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    with open(path) as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _receive_exactly(sock: socket.socket, buffer: bytearray) -> None:
    view = memoryview(buffer)
    while view:
        received = sock.recv_into(view)
        if not received:
            raise ConnectionError("server closed the connection")
        view = view[received:]


def _read_response(sock: socket.socket) -> int:
    header = bytearray(8)
    _receive_exactly(sock, header)
    status, length = RESPONSE_HEADER.unpack(header)
    if length:
        _receive_exactly(sock, bytearray(length))
    return status


def producer(address: str, stream_id: int, topic_id: int, partition_id: int, batches: int,
             batch_size: int, message_size: int, barrier, results) -> None:  # type: ignore[no-untyped-def]
    """One producer process: log in, wait at the barrier, send ``batches`` frames one by one."""
    payload = bytes((97 + i % 26) for i in range(message_size))
    region = encode_messages([Message(payload, id=i + 1) for i in range(batch_size)])
    command = SendMessages(Identifier.of(stream_id), Identifier.of(topic_id),
                           Partitioning.partition_id(partition_id), region)
    frame = encode_request(SendMessages.CODE, command.encode())
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(encode_request(LoginUser.CODE, LoginUser("iggy", "iggy").encode()))
        if _read_response(sock):
            raise RuntimeError("login failed")
        barrier.wait()
        started = time.monotonic()
        cpu_before = time.process_time()
        for _ in range(batches):
            sock.sendall(frame)
            status = _read_response(sock)
            if status:
                raise RuntimeError(f"send failed with status {status}")
        results.put((started, time.monotonic(), time.process_time() - cpu_before))


@dataclass
class RunResult:
    megabytes_per_second: float
    server_cores: float
    client_cores: float
    loop_cores: float  # the server's main thread, which runs the event loop

    @property
    def loop_cpu_per_gigabyte(self) -> float:
        """Event loop CPU seconds per GB: 1 / this is the ceiling of one event loop, in GB/s,
        when every other thread has a core of its own."""
        return 1000 * self.loop_cores / self.megabytes_per_second

    @property
    def server_cpu_per_gigabyte(self) -> float:
        """Server CPU seconds per GB sent: the cost, steadier than MB/s on a busy machine."""
        return 1000 * self.server_cores / self.megabytes_per_second


async def _create(address: str, streams: list[int], partitions: int) -> None:
    async with AsyncClient(address) as client:
        await client.login_user("iggy", "iggy")
        for stream_id in streams:
            await client.create_stream(f"scaling{stream_id}", stream_id=stream_id)
            await client.create_topic(stream_id, "t", partitions_count=partitions)


async def _delete(address: str, streams: list[int]) -> None:
    async with AsyncClient(address) as client:
        await client.login_user("iggy", "iggy")
        for stream_id in streams:
            await client.delete_stream(stream_id)


def one_run(servers: list[tuple[subprocess.Popen[str], str]], run_number: int, producers: int,
            args: argparse.Namespace) -> RunResult:
    """One run: producer ``n`` goes to server ``n % len(servers)`` (one server unless
    ``--servers``), each to a partition (or stream) of its own."""
    base = 1000 * run_number + 10 * producers
    assigned = [[n for n in range(producers) if n % len(servers) == s] for s in range(len(servers))]
    targets: list[tuple[str, int, int, int]] = []  # address, stream, topic, partition
    created: list[tuple[str, list[int]]] = []
    for (_, address), numbers in zip(servers, assigned):
        if not numbers:
            continue
        if args.layout == "partitions":  # one stream, one topic, a partition per producer
            streams = [base]
            targets += [(address, base, 1, index + 1) for index in range(len(numbers))]
            asyncio.run(_create(address, streams, len(numbers)))
        else:  # a stream per producer
            streams = [base + number for number in numbers]
            targets += [(address, stream, 1, 1) for stream in streams]
            asyncio.run(_create(address, streams, 1))
        created.append((address, streams))
    batches = max(1, args.total_batches // producers)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(producers + 1)
    results = context.Queue()
    processes = [
        context.Process(target=producer, args=(address, stream, topic, partition, batches,
                                               args.batch_size, args.message_size, barrier,
                                               results))
        for address, stream, topic, partition in targets
    ]
    for process in processes:
        process.start()
    barrier.wait()
    pids = [server.pid for server, _ in servers]
    server_cpu = sum(cpu_seconds(pid) for pid in pids)
    loop_cpu = sum(cpu_seconds(pid, pid) for pid in pids)
    finished = [results.get(timeout=600) for _ in processes]
    server_cpu = sum(cpu_seconds(pid) for pid in pids) - server_cpu
    loop_cpu = sum(cpu_seconds(pid, pid) for pid in pids) - loop_cpu
    for process in processes:
        process.join()
        if process.exitcode:
            raise RuntimeError(f"a producer failed ({process.exitcode})")
    for address, streams in created:
        asyncio.run(_delete(address, streams))
    wall = max(end for _, end, _ in finished) - min(start for start, _, _ in finished)
    megabytes = producers * batches * args.batch_size * args.message_size / 1e6
    return RunResult(megabytes / wall, server_cpu / wall,
                     sum(cpu for _, _, cpu in finished) / wall, loop_cpu / wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--producers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--total-batches", type=int, default=400,
                        help="batches per run, shared by the producers")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--message-size", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fsync", default="interval", choices=["never", "interval", "always"])
    parser.add_argument("--layout", default="partitions", choices=["partitions", "streams"])
    parser.add_argument("--servers", type=int, default=1,
                        help="independent servers per variant (own data directories), producers"
                             " spread over them: the upper bound of a multi-process server")
    parser.add_argument("--compare", nargs="+", choices=sorted(VARIANTS), default=["default"],
                        metavar="VARIANT", help=f"one or more of {', '.join(VARIANTS)}")
    args = parser.parse_args()
    results: dict[tuple[str, int], list[RunResult]] = {}
    servers: dict[str, list[tuple[subprocess.Popen[str], str]]] = {}
    with tempfile.TemporaryDirectory(prefix="rill-scaling-") as data_root:
        try:
            for name in args.compare:
                servers[name] = [
                    start_server(os.path.join(data_root, f"{name}-{number}"), args.fsync,
                                 VARIANTS[name])
                    for number in range(args.servers)
                ]
            for run in range(1, args.runs + 1):
                for producers in args.producers:
                    for name in args.compare:
                        result = one_run(servers[name], run, producers, args)
                        results.setdefault((name, producers), []).append(result)
                        print(f"run {run} {name:>16} {producers} producers: "
                              f"{result.megabytes_per_second:8.1f} MB/s, server "
                              f"{result.server_cores:4.2f} cores "
                              f"({result.server_cpu_per_gigabyte:5.2f} CPU s/GB, loop "
                              f"{result.loop_cpu_per_gigabyte:5.2f}), producers "
                              f"{result.client_cores:4.2f} cores", flush=True)
        finally:
            for group in servers.values():
                for process, _ in group:
                    process.terminate()
                    process.wait(30)
    print(f"median of {args.runs} runs ({args.total_batches} batches of {args.batch_size} x "
          f"{args.message_size} B per run, fsync {args.fsync}, a {args.layout[:-1]} per producer"
          f", {args.servers} server{'s' if args.servers > 1 else ''} per variant):")
    for name in args.compare:
        for producers in args.producers:
            found = results[(name, producers)]
            print(f"  {name:>16} {producers} producers: "
                  f"{statistics.median(r.megabytes_per_second for r in found):8.1f} MB/s, server "
                  f"{statistics.median(r.server_cores for r in found):4.2f} cores "
                  f"({statistics.median(r.server_cpu_per_gigabyte for r in found):5.2f} CPU s/GB"
                  f", loop {statistics.median(r.loop_cpu_per_gigabyte for r in found):5.2f})"
                  f", producers {statistics.median(r.client_cores for r in found):4.2f} cores")


if __name__ == "__main__":
    main()
