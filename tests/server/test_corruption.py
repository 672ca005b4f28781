"""Corrupt bytes on disk are never served (issue 10, items 3 and 14), against a real server.

Messages are written over several small segments; the server is stopped; one byte of a
segment file is flipped (a payload, an offset field or a length field of a record in a sealed
segment's .log, an entry of its .index, a record in the active segment); the server starts
again. The corrupt record must never reach a client, over any transport or read command
(poll by offset, first, timestamp and next; the columnar read), an error line must name it,
and every other record must come back intact -- after this restart and after the next one,
with the default ``validate_checksum = false`` and with ``true``. A flipped index byte must
cost nothing: the index is rebuilt from the log and every record is served.
"""

from __future__ import annotations

import itertools
import struct
import time
import zlib
from pathlib import Path

import pytest

from rill import errors
from rill.client import Client, PollingStrategy
from rill.protocol.iggy.messages import iter_polled_messages
from server_process import RillProcess

MESSAGES = 120
PAYLOAD = b"payload-%04d-" + b"x" * 20  # 58-byte records: about 34 per 2 KB segment
TRANSPORTS = ("tcp", "quic", "http")
PARTITION = ("streams", "1", "topics", "1", "partitions", "1")
ENTRY = struct.Struct("<IIQ")  # index entry: relative offset, position, timestamp
CONSUMERS = itertools.count(10)
PAYLOAD_LENGTH_AT = 41  # in a record without headers: offset 8, state 1, timestamp 8, id 16,
#                         checksum 4, headers_length 4, then payload_length


def start_server(data_dir: Path, validate: bool) -> RillProcess:
    env = {"RILL_SYSTEM_SEGMENT_SIZE": "2 KB",
           "RILL_SYSTEM_SEGMENT_VALIDATE_CHECKSUM": "true" if validate else "false"}
    return RillProcess(data_dir, env=env).start()


def address(server: RillProcess, transport: str) -> str:
    host, port = {"tcp": server.tcp_address, "quic": server.quic_address,
                  "http": server.http_address}[transport]
    return f"{host}:{port}"


def write_messages(server: RillProcess) -> dict[int, tuple[bytes, int]]:
    """One message per SEND (so each has its own timestamp); offset -> (payload, timestamp)."""
    with Client(server.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("integrity", stream_id=1)
        client.create_topic(1, "t", partitions_count=1)
        for number in range(MESSAGES):
            client.send_messages(1, 1, [PAYLOAD % number], partitioning=1)
        polled = client.poll_messages(1, 1, partition_id=1, strategy=PollingStrategy.offset(0),
                                      count=MESSAGES).messages
    assert [m.offset for m in polled] == list(range(MESSAGES))
    return {m.offset: (m.payload, m.timestamp) for m in polled}


def segments(data_dir: Path) -> list[int]:
    return sorted(int(path.stem) for path in data_dir.joinpath(*PARTITION).glob("*.log"))


def segment_file(data_dir: Path, start: int, suffix: str) -> Path:
    return data_dir.joinpath(*PARTITION, f"{start:020d}{suffix}")


def record_position(data_dir: Path, start: int, offset: int) -> int:
    index = segment_file(data_dir, start, ".index").read_bytes()
    return ENTRY.unpack_from(index, (offset - start) * ENTRY.size)[1]


def flip(path: Path, position: int, mask: int = 0x10) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= mask
    path.write_bytes(bytes(data))


def check_everything_but(server: RillProcess, written: dict[int, tuple[bytes, int]],
                         bad: int | None) -> None:
    """Every read command over every transport serves exactly the good records, intact."""
    good = [offset for offset in written if offset != bad]
    before = [offset for offset in good if bad is None or offset < bad]
    after = [offset for offset in good if bad is not None and offset > bad]
    for transport in TRANSPORTS:
        with Client(address(server, transport), transport=transport,
                    ca_file=server.certificate) as client:
            client.login_user("iggy", "iggy")

            def poll(strategy, count=1000, **options):  # type: ignore[no-untyped-def]
                return client.poll_messages(1, 1, partition_id=1, strategy=strategy,
                                            count=count, **options).messages

            def intact(messages) -> list[int]:  # type: ignore[no-untyped-def]
                for message in messages:
                    payload, timestamp = written[message.offset]
                    assert (message.payload, message.timestamp) == (payload, timestamp)
                    assert message.checksum == zlib.crc32(message.payload)
                return [message.offset for message in messages]

            assert intact(poll(PollingStrategy.offset(0))) == before
            assert intact(poll(PollingStrategy.first())) == before
            if bad is None:
                continue
            with pytest.raises(errors.CannotReadMessage):
                poll(PollingStrategy.offset(bad))
            with pytest.raises(errors.CannotReadMessage):
                poll(PollingStrategy.timestamp(written[bad][1]))
            assert intact(poll(PollingStrategy.offset(bad + 1))) == after
            assert intact(poll(PollingStrategy.timestamp(written[bad][1] + 1))) == after
            if transport != "http":  # no consumer offsets for polls over HTTP (wire §8.4)
                consumer = next(CONSUMERS)  # a fresh consumer: nothing stored yet
                assert intact(poll(PollingStrategy.next(), consumer=consumer,
                                   auto_commit=True)) == before
                with pytest.raises(errors.CannotReadMessage):
                    poll(PollingStrategy.next(), consumer=consumer, auto_commit=True)
                client.store_consumer_offset(1, 1, bad, consumer=consumer, partition_id=1)
                assert intact(poll(PollingStrategy.next(), consumer=consumer)) == after
    with Client(server.address) as client:  # the columnar read (rill extension 1000)
        client.login_user("iggy", "iggy")
        offset, served = 0, []
        while offset < MESSAGES:
            if offset == bad:
                with pytest.raises(errors.CannotReadMessage):
                    client.poll_messages_columnar(1, 1, 1, offset, 1000)
                offset += 1
                continue
            found = client.poll_messages_columnar(1, 1, 1, offset, 1000)
            assert found.base_offset == offset and found.count > 0
            messages = list(iter_polled_messages(bytes(found.records), found.count))
            served += messages
            boundaries = struct.unpack(f"<{found.count + 1}I", bytes(found.boundaries))
            sizes = [45 + len(m.payload) for m in messages]
            assert [b - boundaries[0] for b in boundaries[1:]] == [
                sum(sizes[: n + 1]) for n in range(found.count)]
            assert struct.unpack(f"<{found.count}Q", bytes(found.timestamps)) == tuple(
                m.timestamp for m in messages)
            offset += found.count
        assert intact_columnar(served, written) == good


def intact_columnar(messages, written) -> list[int]:  # type: ignore[no-untyped-def]
    for message in messages:
        assert (message.payload, message.timestamp) == written[message.offset]
        assert message.checksum == zlib.crc32(message.payload)
    return [message.offset for message in messages]


def logged(server: RillProcess, *words: str) -> list[str]:
    return [line for line in server.output if all(word in line for word in words)]


@pytest.mark.parametrize("validate", [False, True], ids=["default", "validate_checksum"])
@pytest.mark.parametrize("damage", ["payload", "offset field", "length field"])
def test_a_corrupt_record_in_a_sealed_segment_is_never_served(
        tmp_path: Path, damage: str, validate: bool) -> None:
    data_dir = tmp_path / "data"
    server = start_server(data_dir, validate)
    written = write_messages(server)
    assert server.stop() == 0
    starts = segments(data_dir)
    assert len(starts) >= 4  # three sealed segments and the active one at least
    sealed = starts[1]
    bad = sealed + 5
    log = segment_file(data_dir, sealed, ".log")
    position = record_position(data_dir, sealed, bad)
    flip(log, position + {"payload": 50, "offset field": 0, "length field": PAYLOAD_LENGTH_AT}[
        damage])
    index_before = segment_file(data_dir, sealed, ".index").read_bytes()

    for restart in range(2):  # nothing is remembered: found again after each start
        server = start_server(data_dir, validate)
        if validate:  # verified at start, before any read
            assert logged(server, log.name, f"offset {bad}", "corrupt, refused")
        check_everything_but(server, written, bad)
        lines = logged(server, log.name, f"offset {bad}", "corrupt, refused")
        assert len(lines) == 1, lines  # logged once, not on every read
        assert server.stop() == 0
        assert segment_file(data_dir, sealed, ".index").read_bytes() == index_before
    assert log.stat().st_size > 0


@pytest.mark.parametrize("validate", [False, True], ids=["default", "validate_checksum"])
@pytest.mark.parametrize("entry", ["middle", "last"])
@pytest.mark.parametrize("field", [4, 8, 0], ids=["position", "timestamp", "relative offset"])
def test_a_corrupt_index_entry_is_rebuilt_and_everything_served(
        tmp_path: Path, entry: str, field: int, validate: bool) -> None:
    data_dir = tmp_path / "data"
    server = start_server(data_dir, validate)
    written = write_messages(server)
    assert server.stop() == 0
    sealed = segments(data_dir)[1]
    index = segment_file(data_dir, sealed, ".index")
    original = index.read_bytes()
    number = 7 if entry == "middle" else len(original) // ENTRY.size - 1
    flip(index, number * ENTRY.size + field, 0x02)
    server = start_server(data_dir, validate)
    check_everything_but(server, written, None)
    assert index.read_bytes() == original  # rebuilt from the log and written back
    assert logged(server, index.name[:20], "rebuilt")
    assert not logged(server, "corrupt, refused")
    assert server.stop() == 0


def test_corruption_in_the_unverified_part_of_the_active_segment(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = start_server(data_dir, False)
    written = write_messages(server)
    assert server.stop() == 0
    active = segments(data_dir)[-1]
    bad = active + 1
    assert bad < MESSAGES
    log = segment_file(data_dir, active, ".log")
    flip(log, record_position(data_dir, active, bad) + 50)
    server = start_server(data_dir, False)  # a clean stop: recovery checks the ends only
    check_everything_but(server, written, bad)
    assert logged(server, log.name, f"offset {bad}", "corrupt, refused")
    with Client(server.address) as client:  # the segment keeps taking messages
        client.login_user("iggy", "iggy")
        client.send_messages(1, 1, [b"after"], partitioning=1)
        assert client.poll_messages(1, 1, partition_id=1,
                                    strategy=PollingStrategy.offset(MESSAGES)).messages[
            0].payload == b"after"
    assert server.stop() == 0


def test_after_an_unclean_stop_the_background_verifier_finds_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = start_server(data_dir, False)
    written = write_messages(server)
    server.kill()
    sealed = segments(data_dir)[2]
    bad = sealed + 3
    log = segment_file(data_dir, sealed, ".log")
    flip(log, record_position(data_dir, sealed, bad) + 50)
    server = start_server(data_dir, False)
    deadline = time.monotonic() + 30  # nothing reads: the background verifier must find it
    while not logged(server, log.name, f"offset {bad}", "corrupt, refused"):
        assert time.monotonic() < deadline, "".join(server.output)
        time.sleep(0.05)
    check_everything_but(server, written, bad)
    assert len(logged(server, log.name, f"offset {bad}", "corrupt, refused")) == 1
    server.kill()
