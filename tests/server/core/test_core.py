"""The Core's lifecycle as others see it: readiness from start to stop."""

from __future__ import annotations

import asyncio

from rill import errors
from rill.server.config import ServerConfig
from rill.server.core.core import Core
from in_process_core import twin_core


def test_ready_only_between_start_and_stop_and_while_writes_succeed(tmp_path) -> None:
    async def main() -> list[str | None]:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        core = twin_core(config)
        seen = [core.unready_because()]
        await core.start()
        seen.append(core.unready_because())
        core.messages.write_failures.failed(errors.CannotSaveMessagesToSegment())
        seen.append(core.unready_because())
        core.messages.write_failures.recovered()
        seen.append(core.unready_because())
        await core.stop()
        seen.append(core.unready_because())
        return seen

    seen = asyncio.run(main())
    assert seen[0] == seen[4] == "not running (starting or stopping)"
    assert seen[1] is None and seen[3] is None
    assert seen[2] == "writing messages fails (1 failed attempt(s) since the last success)"


def test_two_servers_in_one_process_keep_their_own_settings_and_metrics(tmp_path) -> None:
    """Nothing a server configures or counts lives in a module global that another Core in
    the same process would overwrite or share (the append-thread rule, the metrics)."""
    from rill.protocol.iggy.messages import encode_messages
    from rill.server.core.broker import PartitionRef
    from rill.server.core.types import TopicSpec

    async def main() -> None:
        cores = []
        for name, mode in (("a", "never"), ("b", "always")):
            config = ServerConfig()
            config.system.path = str(tmp_path / name)
            config.system.append_threads = mode
            config.root.password_hash_cost = 4
            core = twin_core(config, files=True)  # (the append-thread rule is the file log's)
            await core.start()
            cores.append(core)
        try:
            for core in cores:
                session = core.broker.connect("127.0.0.1:1", "tcp")
                await core.broker.authenticate(session, "iggy", "iggy")
                await core.broker.create_namespace(session, "s")
                await core.broker.create_topic(session, "s", TopicSpec("t", partitions_count=1))
                core.metrics.instrument(core)
            session = cores[0].sessions[next(iter(cores[0].sessions))]
            await cores[0].broker.append(session, PartitionRef("s", "t", 1),
                                         encode_messages([b"x"]))
            logs = [core.state.streams[1].topics[1].partitions[1].log for core in cores]
            assert [log.settings.append_threads for log in logs] == ["never", "always"]
            assert [core.metrics.messages_appended for core in cores] == [1, 0]
        finally:
            for core in cores:
                await core.stop()

    asyncio.run(main())


async def _started_cores(tmp_path, names: tuple[str, ...], **system) -> list[Core]:
    """Cores in one process, each on its own data directory with one topic ``s``/``t``."""
    from rill.server.core.types import TopicSpec

    cores = []
    for name in names:
        config = ServerConfig()
        config.system.path = str(tmp_path / name)
        config.root.password_hash_cost = 4
        for key, value in system.items():
            setattr(config.system, key, value)
        core = twin_core(config, files=True)  # (file I/O counts, append threads)
        await core.start()
        cores.append(core)
        session = core.broker.connect("127.0.0.1:1", "tcp")
        await core.broker.authenticate(session, "iggy", "iggy")
        await core.broker.create_namespace(session, "s")
        await core.broker.create_topic(session, "s", TopicSpec("t", partitions_count=1))
    return cores


def _session(core: Core):
    return core.sessions[next(iter(core.sessions))]


def test_two_servers_in_one_process_count_their_own_read_and_written_bytes(tmp_path) -> None:
    """GET_STATS ``read_bytes``/``written_bytes`` are the bytes of this server's storage only:
    another Core of the process appending and reading moves neither figure."""
    from rill.protocol.iggy.messages import encode_messages
    from rill.server.core.broker import PartitionRef

    ref = PartitionRef("s", "t", 1)

    def io(core: Core) -> tuple[int, int]:
        stats = core.system.get_stats(_session(core))
        return stats.read_bytes, stats.written_bytes

    async def main() -> None:
        busy, idle = await _started_cores(tmp_path, ("busy", "idle"))
        try:
            before = io(idle)
            assert before == (0, 0)  # nothing appended or read there yet
            await busy.broker.append(_session(busy), ref, encode_messages([b"x" * 1000] * 50))
            busy.broker.read(_session(busy), ref, 0, 50, 1 << 20)
            read_bytes, written_bytes = io(busy)
            assert written_bytes >= 50 * 1000
            assert read_bytes >= 50 * 1000
            assert io(idle) == before  # the busy server's bytes are not the idle one's

            await idle.broker.append(_session(idle), ref, encode_messages([b"y" * 10]))
            assert io(idle)[1] > 0
            assert io(busy) == (read_bytes, written_bytes)
        finally:
            for core in (busy, idle):
                await core.stop()

    asyncio.run(main())


def _append_threads_used(monkeypatch) -> list[str]:
    """The names of the threads that stamp and write appended regions, one per append (the C
    stamper on, so that append workers are used)."""
    import threading

    from rill.server.storage import partition_log as partition_log_module

    threads: list[str] = []
    original = partition_log_module._stamp_and_write
    monkeypatch.setattr(partition_log_module, "_stamp_and_write", lambda *args: threads.append(
        threading.current_thread().name) or original(*args))
    monkeypatch.setattr(partition_log_module, "ACCELERATED", True)
    return threads


def test_stopping_one_server_leaves_the_other_s_append_threads_working(
    tmp_path, monkeypatch
) -> None:
    """Each Core has its own append worker threads, shut down by its own stop only."""
    from rill.protocol.iggy.messages import encode_messages
    from rill.server.core.broker import PartitionRef

    threads = _append_threads_used(monkeypatch)
    ref = PartitionRef("s", "t", 1)
    large = encode_messages([b"z" * 1000] * 8)  # over append_thread_min_size: a worker's

    async def main() -> None:
        first, second = await _started_cores(
            tmp_path, ("first", "second"), append_threads="always", append_thread_min_size=4096)
        try:
            for core in (first, second):
                assert await core.broker.append(_session(core), ref, large) is not None
            executors = [core.state.durability.append_executor() for core in (first, second)]
            assert executors[0] is not executors[1]
            await first.stop()
            assert executors[0]._shutdown and not executors[1]._shutdown
            for _ in range(3):
                await second.broker.append(_session(second), ref, large)
            assert len(threads) == 5 and all(n.startswith("rill-append") for n in threads)
            log = second.state.streams[1].topics[1].partitions[1].log
            assert log.next_offset == 4 * 8
        finally:
            await second.stop()

    asyncio.run(main())


def test_a_deduplicated_send_is_written_by_an_append_worker_and_its_ids_remembered(
    tmp_path, monkeypatch
) -> None:
    """With deduplication on, a SEND's admission rule runs on the event loop and its large
    region is then written off it, by an append worker, as any SEND's (it used to be written
    inline, holding every other client up); the ids it stored are remembered, so the same ids
    sent again store nothing, and new ones after them are stored."""
    from rill.protocol.iggy.messages import Message, encode_messages
    from rill.server.core.broker import PartitionRef
    from rill.server.protocols.iggy.deduplication import MessageDeduplicator

    threads = _append_threads_used(monkeypatch)
    ref = PartitionRef("s", "t", 1)
    admit = MessageDeduplicator(1000, float("inf")).admit

    def region(ids: range) -> bytes:  # over append_thread_min_size: a worker's
        return encode_messages([Message(b"z" * 1000, id=n) for n in ids])

    async def main() -> None:
        (core,) = await _started_cores(tmp_path, ("one",), append_threads="always",
                                       append_thread_min_size=4096)
        try:
            session = _session(core)
            first = await core.broker.append(session, ref, region(range(1, 9)), admit=admit)
            again = await core.broker.append(session, ref, region(range(1, 9)), admit=admit)
            more = await core.broker.append(session, ref, region(range(5, 17)), admit=admit)
            assert (first.first_offset, first.last_offset) == (0, 7)
            assert again.last_offset < again.first_offset == 8  # every id seen: nothing stored
            assert (more.first_offset, more.last_offset) == (8, 15)  # ids 9..16 only
            assert len(threads) == 2 and all(n.startswith("rill-append") for n in threads)
            assert core.state.streams[1].topics[1].partitions[1].log.next_offset == 16
        finally:
            await core.stop()

    asyncio.run(main())


def test_a_core_on_memory_logs_keeps_them_across_a_restart_and_makes_no_segment_file(
        tmp_path) -> None:
    """``Core(config, logs=MemoryLogs(...))`` (what ``twin_core`` gives): the records outlive a
    restart on the same logs, a deleted topic's go with it, and no segment file is written."""
    from rill.protocol.iggy.messages import encode_messages
    from rill.server.core.broker import PartitionRef, TopicRef
    from rill.server.core.types import TopicSpec
    from rill.server.storage.memory_log import MemoryLog

    config = ServerConfig()
    config.system.path = str(tmp_path / "data")
    config.root.password_hash_cost = 4
    ref = PartitionRef("s", "t", 1)

    async def run(scenario) -> None:
        core = twin_core(config)
        await core.start()
        try:
            session = core.broker.connect("127.0.0.1:1", "tcp")
            await core.broker.authenticate(session, "iggy", "iggy")
            await scenario(core, session)
        finally:
            await core.stop()

    async def first(core: Core, session) -> None:
        await core.broker.create_namespace(session, "s")
        await core.broker.create_topic(session, "s", TopicSpec("t", partitions_count=1))
        await core.broker.append(session, ref, encode_messages([b"kept", b"too"]))

    async def second(core: Core, session) -> None:
        log = core.state.streams[1].topics[1].partitions[1].log
        assert isinstance(log, MemoryLog)
        assert core.broker.read(session, ref, 0, 10, 1 << 20).count == 2
        await core.broker.delete_topic(session, TopicRef("s", "t"))
        await core.broker.create_topic(session, "s", TopicSpec("t", partitions_count=1))
        assert core.broker.read(session, ref, 0, 10, 1 << 20).count == 0

    async def main() -> None:
        await run(first)
        await run(second)

    asyncio.run(main())
    assert not list((tmp_path / "data").rglob("*.log"))
