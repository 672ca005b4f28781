"""The live members of Kafka groups as the console's Consumers view lists them:
``group_apis.assigned_partitions`` reads the "consumer" protocol type's assignment bytes."""

from __future__ import annotations

import struct

from rill.server.protocols.kafka.group_apis import assigned_partitions


def assignment(version: int, topics: dict[str, list[int]], user_data: bytes = b"") -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for name, partitions in topics.items():
        raw = name.encode()
        out += struct.pack(">h", len(raw)) + raw + struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return out + struct.pack(">i", len(user_data)) + user_data


def test_the_topics_and_partitions_of_an_assignment_of_any_version():
    for version in range(4):
        encoded = assignment(version, {"orders": [0, 2], "payments": []}, b"sticky")
        assert assigned_partitions(encoded) == {"orders": [0, 2], "payments": []}


def test_bytes_of_another_shape_assign_nothing():
    good = assignment(0, {"orders": [0, 1, 2]})
    assert assigned_partitions(b"") == {}
    for cut in range(1, len(good) - 4):  # every truncation inside the topics
        assert assigned_partitions(good[:cut]) in ({}, {"orders": [0, 1, 2]}), cut
    assert assigned_partitions(good[:-4]) == {"orders": [0, 1, 2]}  # the user data is not read
    assert assigned_partitions(struct.pack(">hih", 0, 1, 2) + b"\xff\xfe") == {}
