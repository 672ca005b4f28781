"""Long polling (WAIT_FOR_MESSAGES, rill extension 1030): a wait for messages past offsets,
over one or many partitions, ends when an append brings them (SEND or a staged commit), when
the partitions hold ``min_bytes`` together, or at its deadline, with what there is. Over a real
server first; then the wait itself in process (core.long_poll): what a woken, cancelled or
timed-out wait leaves behind, and how often it looks at the partitions."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rill import errors
from rill.client import Client, PollingStrategy
from rill.protocol.iggy.messages import encode_messages
from rill.server.core import long_poll
from rill.server.core.broker import PartitionRef, TopicRef
from in_process_core import run_with_broker
from server_process import RillProcess, session

PAYLOAD = b"x" * 1000
P1 = PartitionRef("ns", "t", 1)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = RillProcess(tmp_path_factory.mktemp("long-poll") / "data").start()
    yield server
    server.kill()


@pytest.fixture
def topic(root, request):
    name = request.node.name[:40]
    root.create_stream(name)
    root.create_topic(name, "t", partitions_count=2)
    return name


class Waiting:
    """A wait on its own connection, in a thread: ``done`` once the server answered."""

    def __init__(self, server: RillProcess, *args, method: str = "wait_for_messages",
                 **kwargs) -> None:
        self.result = None
        self.done = threading.Event()

        def wait() -> None:
            with session(server) as client:
                self.result = getattr(client, method)(*args, **kwargs)
            self.done.set()

        self.thread = threading.Thread(target=wait, daemon=True)
        self.thread.start()

    def answered(self) -> list:
        assert self.done.wait(20), "the wait did not end"
        return self.result


def _until_waiting(root: Client) -> None:
    """The wait is registered once its connection shows up among the server's clients."""
    for _ in range(200):
        if len(root.get_clients()) >= 2:
            return
        threading.Event().wait(0.01)


def test_an_append_ends_the_wait_with_the_new_end(server, root, topic):
    waiting = Waiting(server, topic, "t", {1: 0, 2: 0}, 30_000)
    _until_waiting(root)
    assert not waiting.done.wait(0.3)  # nothing there yet: it waits
    root.send_messages(topic, "t", [PAYLOAD], partitioning=2)
    ends = waiting.answered()
    assert [(end.partition_id, end.next_offset) for end in ends] == [(1, 0), (2, 1)]
    assert ends[1].bytes_after > len(PAYLOAD) and ends[0].bytes_after == 0


def test_min_bytes_counts_every_partition_together(server, root, topic):
    waiting = Waiting(server, topic, "t", {1: 0, 2: 0}, 30_000, min_bytes=1800)
    _until_waiting(root)
    root.send_messages(topic, "t", [PAYLOAD], partitioning=1)
    assert not waiting.done.wait(0.3)  # 1,000 bytes of payload are not enough
    root.send_messages(topic, "t", [PAYLOAD], partitioning=2)
    ends = waiting.answered()
    assert sum(end.bytes_after for end in ends) >= 1800
    assert [end.next_offset for end in ends] == [1, 1]


def test_the_deadline_answers_with_what_there_is(server, root, topic):
    root.send_messages(topic, "t", [PAYLOAD] * 3, partitioning=1)
    ends = root.wait_for_messages(topic, "t", {1: 3, 2: 0}, 200)  # past the end: nothing new
    assert [(end.next_offset, end.bytes_after) for end in ends] == [(3, 0), (0, 0)]
    short = root.wait_for_messages(topic, "t", {1: 1}, 200, min_bytes=10**9)
    assert short[0].next_offset == 3 and 2 * len(PAYLOAD) < short[0].bytes_after < 3 * len(PAYLOAD)


def test_messages_already_there_answer_at_once(server, root, topic):
    root.send_messages(topic, "t", [PAYLOAD], partitioning=2)
    ends = root.wait_for_messages(topic, "t", {2: 0}, 30_000)  # would hang the test otherwise
    assert ends[0].next_offset == 1


def test_a_staged_commit_ends_the_wait(server, root, topic):
    waiting = Waiting(server, topic, "t", {1: 0}, 30_000)
    _until_waiting(root)
    root.stage_messages("producer", 0, 0, 1, topic, "t", [b"a", b"b"], partitioning=1)
    assert not waiting.done.wait(0.3)  # staged messages are invisible
    root.commit_staged_messages("producer", 0, [(0, 1, 2)])
    assert waiting.answered()[0].next_offset == 2


def test_unknown_partitions_and_strangers_are_refused(server, root, topic):
    with pytest.raises(errors.PartitionNotFound):
        root.wait_for_messages(topic, "t", {9: 0}, 100)
    with Client(server.address) as stranger, pytest.raises(errors.Unauthenticated):
        stranger.wait_for_messages(topic, "t", {1: 0}, 100)


def test_a_waiting_poll_is_one_request_answered_with_the_message(server, root, topic):
    """POLL_MESSAGES_WAITING (1031) over TCP: the poll waits for its message and answers with
    it (the strategies and deadlines: tests/server/protocols/iggy/test_polling.py)."""
    root.send_messages(topic, "t", [b"before"], partitioning=1)
    waiting = Waiting(server, topic, "t", 7, 1, PollingStrategy.offset(1), 10, False, 30_000,
                      method="poll_messages_waiting")
    _until_waiting(root)
    assert not waiting.done.wait(0.3)  # offset 1 is not there yet: it waits
    root.send_messages(topic, "t", [PAYLOAD, b"after"], partitioning=1)
    polled = waiting.answered()
    assert [(m.offset, m.payload) for m in polled.messages] == [(1, PAYLOAD), (2, b"after")]
    with pytest.raises(errors.PartitionNotFound):
        root.poll_messages_waiting(topic, "t", 7, 9, PollingStrategy.next(), 10, False, 100)
    with Client(server.address) as stranger, pytest.raises(errors.Unauthenticated):
        stranger.poll_messages_waiting(topic, "t", 7, 1, PollingStrategy.next(), 10, False, 100)


# -- the wait itself, in process (core.long_poll: AppendSignals and LongPollService) -------------


class _Deadlines:
    """The timers the waits ask the event loop for (``loop.call_at``), to see each one go."""

    def __init__(self, monkeypatch) -> None:
        self.handles: list[asyncio.TimerHandle] = []
        loop = asyncio.get_running_loop()
        call_at = loop.call_at

        def recorded(when, callback, *args, **kwargs):
            handle = call_at(when, callback, *args, **kwargs)
            self.handles.append(handle)
            return handle

        monkeypatch.setattr(loop, "call_at", recorded)


def _waiting(core) -> dict:
    return core.appends._waiting


def test_a_woken_wait_leaves_no_waiter_and_no_timer_behind(tmp_path, monkeypatch):
    async def scenario(core, broker, session) -> None:
        deadlines = _Deadlines(monkeypatch)
        waiting = asyncio.ensure_future(
            broker.wait(session, TopicRef("ns", "t"), [(1, 0), (2, 0)], 1, 3600))
        while not _waiting(core):  # registered under both partitions' logs
            await asyncio.sleep(0)
        assert len(_waiting(core)) == 2 and len(deadlines.handles) == 1
        await broker.append(session, PartitionRef("ns", "t", 2), encode_messages([b"wake"]))
        ends = await waiting
        assert [(end.partition_id, end.next_offset) for end in ends] == [(1, 0), (2, 1)]
        assert ends[0].bytes_after == 0 and ends[1].bytes_after > len(b"wake")
        assert _waiting(core) == {}  # nor under the partition that did not wake it
        assert deadlines.handles[0].cancelled()  # an hour-long timer is not left in the loop

    run_with_broker(tmp_path, scenario)


def test_a_cancelled_wait_leaves_no_waiter_and_no_timer_behind(tmp_path, monkeypatch):
    async def scenario(core, broker, session) -> None:
        deadlines = _Deadlines(monkeypatch)
        waiting = asyncio.ensure_future(broker.wait_any(session, "ns", {"t": [(1, 0)]}, 1, 3600))
        while not _waiting(core):
            await asyncio.sleep(0)
        waiting.cancel()  # the link went away
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert _waiting(core) == {} and deadlines.handles[0].cancelled()
        await broker.append(session, P1, encode_messages([b"late"]))  # wakes nobody

    run_with_broker(tmp_path, scenario)


def test_the_deadline_ends_a_wait_not_before_it_and_with_what_there_is(tmp_path):
    async def scenario(core, broker, session) -> None:
        loop = asyncio.get_running_loop()
        await broker.append(session, P1, encode_messages([b"x" * 100]))
        began = loop.time()
        ends = await broker.wait(session, TopicRef("ns", "t"), [(1, 0), (2, 0)], 10**6, 0.05)
        assert loop.time() - began >= 0.05  # max_wait_ms is honoured: never cut short
        assert ends[0].next_offset == 1 and ends[0].bytes_after > 100 and ends[1].bytes_after == 0
        assert _waiting(core) == {}

    run_with_broker(tmp_path, scenario)


def test_a_wait_looks_at_the_partitions_once_before_and_once_per_wake(tmp_path, monkeypatch):
    """The answer's bytes are those of the wait's last look (no second pass over the logs)."""
    looks: list[int] = []
    counted = long_poll.committed_bytes

    def committed_bytes(partition, offset):
        looks.append(offset)
        return counted(partition, offset)

    monkeypatch.setattr(long_poll, "committed_bytes", committed_bytes)

    async def scenario(core, broker, session) -> None:
        waiting = asyncio.ensure_future(
            broker.wait_any(session, "ns", {"t": [(1, 0), (2, 0)]}, 1, 3600))
        while not _waiting(core):
            await asyncio.sleep(0)
        assert len(looks) == 2
        await broker.append(session, P1, encode_messages([b"x" * 100]))
        assert await waiting > 100
        assert len(looks) == 4  # one look at both partitions after the wake, nothing more
        ready = await broker.wait(session, TopicRef("ns", "t"), [(1, 0)], 1, 3600)
        assert ready[0].bytes_after > 100 and len(looks) == 5  # already there: one look

    run_with_broker(tmp_path, scenario)
