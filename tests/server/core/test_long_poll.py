"""Long polling (WAIT_FOR_MESSAGES, rill extension 1030): a wait for messages past offsets,
over one or many partitions, ends when an append brings them (SEND or a staged commit), when
the partitions hold ``min_bytes`` together, or at its deadline, with what there is."""

from __future__ import annotations

import threading

import pytest

from rill import errors
from rill.client import Client
from server_process import RillProcess, session

PAYLOAD = b"x" * 1000


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

    def __init__(self, server: RillProcess, *args, **kwargs) -> None:
        self.result = None
        self.done = threading.Event()

        def wait() -> None:
            with session(server) as client:
                self.result = client.wait_for_messages(*args, **kwargs)
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
