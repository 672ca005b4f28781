"""The in-memory model: sessions, streams, topics and partitions.

Owns: the shapes the services mutate. The metadata store is the durable truth for names and
settings; each Partition owns its log (the ``core.log`` port: segment files, or the memory
twin). Invariant: ids in the dicts match the ``id`` fields; topics' partitions are always
1..N; streams and topics are renamed only through their Registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from rill.server.core.cluster_view import Placement
from rill.server.core.registry import Registry
from rill.server.core.log import Log


@dataclass(eq=False)
class Session:
    """One connected client (TCP/QUIC connection or an HTTP request)."""

    client_id: int
    address: str
    transport: str  # the transport's neutral name: "tcp", "quic", "http"
    user_id: int = 0  # 0 = not logged in
    connected_at: int = 0  # µs
    last_heartbeat: int = 0  # µs of the last request (PING included)
    # consumer groups this client is a member of: (stream_id, topic_id, group_id)
    consumer_groups: list[tuple[int, int, int]] = field(default_factory=list)
    # set by the transport: closes the connection this session is served on (a session the
    # core drops, e.g. as heartbeat-stale, must not keep its socket open)
    close_link: Callable[[], None] | None = None
    # set by the transport: its link can send file regions (``storage.file_region``), so large
    # reads may answer with them instead of bytes
    sends_files: bool = False
    # set by the transport: the wire protocol spoken on the link ("iggy", "kafka", "tank")
    protocol: str = "iggy"
    # set by the transport: the most bytes of records one poll answers on this link (at least
    # one record); 0: [system] max_poll_size
    poll_limit: int = 0

    @property
    def is_authenticated(self) -> bool:
        return self.user_id != 0


LEADER = "leader"  # a partition's role: it takes appends (every standalone partition)
FOLLOWER = "follower"  # it copies a leader's log (``Log.append_replicated``)
ROLES = (LEADER, FOLLOWER)


@dataclass(eq=False)
class Partition:
    """One partition: its log, consumer positions and replica state.

    Replica state (set by a replication layer; a standalone server leaves it as it is):
    ``role`` (LEADER or FOLLOWER), ``leader_epoch`` (the log's: what its appends stamp, 0
    standalone) and ``high_watermark`` (the offset below which records are committed: the log
    end while none was set, as on a standalone server; once set, never past the log end)."""

    stream_id: int
    topic_id: int
    id: int
    created_at: int
    log: Log
    role: str = LEADER
    # consumer positions: consumer name -> the next offset it reads
    positions: dict[str, int] = field(default_factory=dict)
    # what a consumer stored with its position (Kafka's commit metadata), when it stored any
    position_notes: dict[str, str] = field(default_factory=dict)
    # the leader epoch a consumer stored with its position (Kafka's), when it stored one
    position_epochs: dict[str, int] = field(default_factory=dict)
    # set by a replication layer (``high_watermark``); None: the log end (standalone)
    _high_watermark: int | None = field(default=None, repr=False)
    # its replicas and leader in a cluster (``core.cluster_view``); None: standalone
    placement: Placement | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown partition role {self.role!r}")

    @property
    def leader_epoch(self) -> int:
        """The log's leader epoch (``Log.leader_epoch``: kept there, not twice)."""
        return self.log.leader_epoch

    @leader_epoch.setter
    def leader_epoch(self, epoch: int) -> None:
        self.log.leader_epoch = epoch

    @property
    def high_watermark(self) -> int:
        """The first offset not yet committed: the log end unless a replication layer set it
        (then at most the log end, which a truncation may have moved below it)."""
        end = self.log.next_offset
        return end if self._high_watermark is None else min(self._high_watermark, end)

    @property
    def high_watermark_known(self) -> bool:
        """Whether a replication layer set the high watermark (else it is the log end)."""
        return self._high_watermark is not None

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"high watermark {offset} is negative")
        self._high_watermark = offset

    def purge(self) -> None:
        """Empty the partition: its log starts again at offset 0, its consumer positions are
        gone, and a high watermark a replication layer set goes back to 0 (the records
        appended next are not committed until it moves)."""
        self.log.purge()
        self.positions.clear()
        self.position_notes.clear()
        self.position_epochs.clear()
        if self._high_watermark is not None:
            self._high_watermark = 0


@dataclass(eq=False)
class Topic:
    stream_id: int
    id: int
    name: str
    created_at: int
    compression_algorithm: int
    message_expiry: int  # resolved µs, or u64::MAX = never
    max_topic_size: int  # resolved bytes, or u64::MAX = unlimited
    replication_factor: int
    record_format: str  # how its partitions store records (storage.formats.iggy_v1)
    partitions: dict[int, Partition] = field(default_factory=dict)
    # the bytes that may still be stored before the topic is full (``room_left``), counted
    # down by each append's growth; None: to be summed from the logs again
    room: int | None = field(default=None, repr=False)

    @property
    def size_bytes(self) -> int:
        return sum(p.log.size_bytes for p in self.partitions.values())

    def room_left(self, needed: int = 1) -> int:
        """The bytes below ``max_topic_size`` (<= 0: full), exact whenever it is less than
        ``needed``. The stored size is summed over every partition's segments only then (or
        once the room was forgotten: ``room = None``); otherwise the room counted before,
        less what the appends since added (``MessageService.append``), answers at once --
        not a sum over a thousand partitions per append. Bytes that leave the topic
        (retention, a purge, a truncation) make the counted room smaller than the real one,
        never larger, so it is counted again early, never late; whatever else grows a log
        (a transaction's commit, in a cluster the replication) forgets it."""
        room = self.room
        if room is None or room < needed:
            room = self.room = self.max_topic_size - self.size_bytes
        return room

    @property
    def messages_count(self) -> int:
        return sum(p.log.messages_count for p in self.partitions.values())


@dataclass(eq=False)
class Stream:
    id: int
    name: str
    created_at: int
    topics: Registry = field(default_factory=Registry)  # id -> Topic, also by name

    @property
    def size_bytes(self) -> int:
        return sum(t.size_bytes for t in self.topics.values())

    @property
    def messages_count(self) -> int:
        return sum(t.messages_count for t in self.topics.values())
