"""Value formatting and the JSON conversion (in process)."""

from __future__ import annotations

from rill.cli.output import format_duration, format_size, message_id, sentinel, to_json
from rill.protocol.permissions import GlobalPermissions, Permissions
from rill.protocol.primitives import UserStatus

U64_MAX = 2**64 - 1


def test_sizes_and_durations():
    assert [format_size(n) for n in (0, 999, 1000, 1_500_000, 10**10, U64_MAX)] == \
        ["0 B", "999 B", "1 KB", "1.50 MB", "10 GB", "unlimited"]
    assert format_duration(5_400_000_000) == "1h 30m"
    assert format_duration(1_500_000) == "1s 500ms"
    assert format_duration(160_888_076) == "2m 40s"  # an uptime: no µs after the seconds
    assert format_duration(1_500_123) == "1s 500ms" and format_duration(250) == "250us"
    assert format_duration(60_000_001) == "1m" and format_duration(999) == "999us"
    assert (format_duration(0), format_duration(U64_MAX)) == ("server default", "never")


def test_json_conversion():
    assert sentinel(U64_MAX) is None and sentinel(7) == 7
    value = to_json({"status": UserStatus.ACTIVE, "raw": b"\x01\x02", "items": (1, 2),
                     "permissions": Permissions(GlobalPermissions(read_streams=True))})
    assert value["status"] == "active" and value["raw"] == "0102" and value["items"] == [1, 2]
    assert value["permissions"]["global_permissions"]["read_streams"] is True
    assert value["permissions"]["streams"] is None


def test_message_ids_are_uuids_in_wire_order():
    wire = bytes(range(16))
    assert message_id(int.from_bytes(wire, "little")) == "00010203-0405-0607-0809-0a0b0c0d0e0f"
