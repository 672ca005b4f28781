"""Values every protocol, the core and the SDK share: topic compression, user status, snapshot
kinds, the expiry and size sentinels (wire reference §2.5), staged-append outcomes.

Owns their numbers (Iggy's wire gives them, and the catalog stores them); the Iggy-only wire
values (identifiers, consumers, partitioning, polling) are ``rill.protocol.iggy.primitives``.
"""

from __future__ import annotations

from enum import IntEnum


class CompressionAlgorithm(IntEnum):
    NONE = 1
    GZIP = 2


class UserStatus(IntEnum):
    ACTIVE = 1
    INACTIVE = 2


class SnapshotCompression(IntEnum):
    STORED = 1
    DEFLATED = 2
    BZIP2 = 3
    ZSTD = 4
    LZMA = 5
    XZ = 6


class SnapshotType(IntEnum):
    FILESYSTEM_OVERVIEW = 1
    PROCESS_LIST = 2
    RESOURCE_USAGE = 3
    TEST = 4
    SERVER_LOGS = 5


# Expiry / max-size sentinels (wire §2.5)
EXPIRY_SERVER_DEFAULT = 0
EXPIRY_NEVER = 0xFFFF_FFFF_FFFF_FFFF
MAX_TOPIC_SIZE_SERVER_DEFAULT = 0
MAX_TOPIC_SIZE_UNLIMITED = 0xFFFF_FFFF_FFFF_FFFF


# staged appends (rill extension, docs/extensions.md): what a stage and a commit did
class StageOutcome(IntEnum):
    STAGED = 0
    ALREADY_COMMITTED = 1  # the batch was committed before: the messages were dropped
    ABORTED = 2  # this run of the batch was aborted: the messages were dropped


class CommitOutcome(IntEnum):
    COMMITTED = 0
    ALREADY_COMMITTED = 1  # a replay of a committed batch: nothing was appended
