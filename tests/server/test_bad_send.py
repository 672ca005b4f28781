"""A pathological SEND never stalls the server (issue 10, item 4), against a real server.

The frame of the issue: about 59 MB of messages with millions of headers (or of messages) and
a malformed tail. Its rejection must cost no more than an acceptance and run off the event
loop: while it is sent and rejected on one connection, another connection PINGs without a
pause, and every PING is answered within a generous bound (1 s, the bound the issue allows; a
stalled loop took 16.5 s). The SEND gets its error status and nothing is written.
"""

from __future__ import annotations

import struct
import threading
import time

import pytest

from rill import errors
from rill.client import Client
from rill.protocol.iggy.commands.messages import SendMessages
from rill.protocol.iggy.primitives import Identifier, Partitioning

PING_BOUND = 1.0  # seconds; generous, as the issue allows
_U32 = struct.Struct("<I")


def many_headers() -> bytes:
    """One message whose header map has 3.5 million entries, the last one broken."""
    entries = b"".join(_U32.pack(7) + b"h%06d" % n + b"\x01" + _U32.pack(1) + b"v"
                       for n in range(3_500_000))
    entries += _U32.pack(7) + b"broken"  # a key that overruns the map
    return bytes(16) + _U32.pack(len(entries)) + entries + _U32.pack(1) + b"p"


def many_messages() -> bytes:
    """2.3 million one-byte messages (about 59 MB), then a malformed tail."""
    message = b"\x01" * 16 + _U32.pack(0) + _U32.pack(1) + b"m"
    return message * 2_350_000 + bytes(16) + _U32.pack(0) + _U32.pack(9) + b"short"


@pytest.mark.parametrize("build,error", [(many_headers, errors.TooBigHeadersPayload),
                                         (many_messages, errors.InvalidCommand)],
                         ids=["3.5M headers", "2.3M messages"])
def test_a_huge_malformed_send_does_not_stall_other_connections(
        rill_server, build, error) -> None:
    region = build()
    assert len(region) > 55_000_000
    with Client(rill_server.address) as admin:
        admin.login_user("iggy", "iggy")
        admin.create_stream("s", stream_id=1)
        admin.create_topic(1, "t", partitions_count=1)
        admin.send_messages(1, 1, [b"before"], partitioning=1)
    latencies: list[float] = []
    stop = threading.Event()

    def ping_continuously() -> None:
        with Client(rill_server.address) as pinger:
            while not stop.is_set():
                started = time.monotonic()
                pinger.ping()
                latencies.append(time.monotonic() - started)

    pinger = threading.Thread(target=ping_continuously)
    pinger.start()
    try:
        while not latencies:  # the pinger is connected and answered
            time.sleep(0.01)
        with Client(rill_server.address, timeout=120) as sender:
            sender.login_user("iggy", "iggy")
            command = SendMessages(Identifier.of(1), Identifier.of(1),
                                   Partitioning.partition_id(1), region)
            pings_before = len(latencies)
            with pytest.raises(error):
                sender.execute(command)
            pings_during_send = len(latencies) - pings_before
    finally:
        stop.set()
        pinger.join()
    assert pings_during_send > 1
    assert max(latencies) < PING_BOUND, f"a PING waited {max(latencies):.2f} s"
    with Client(rill_server.address) as admin:  # nothing was written
        admin.login_user("iggy", "iggy")
        partition = admin.get_topic(1, 1).partitions[0]
        assert (partition.messages_count, partition.current_offset) == (1, 0)
        admin.send_messages(1, 1, [b"after"], partitioning=1)
        assert admin.get_topic(1, 1).partitions[0].current_offset == 1
    assert not [line for line in rill_server.output if "Traceback" in line or "ERROR" in line]
