"""Server configuration: one source of truth.

Owns: the dataclass defaults (the embedded configuration), loading a TOML file on top of them,
and environment overrides ``RILL_<SECTION>_<KEY>`` on top of that (``RILL_TCP_ADDRESS``,
``RILL_SYSTEM_PATH``, ``RILL_SYSTEM_FSYNC``, ``RILL_SYSTEM_SEGMENT_SIZE``, ...). Sizes accept
``"1 GB"``-style strings (decimal and binary units) or integers; durations accept ``"500 ms"``,
``"1 s"``, ``"1 m"``, ``"none"`` or numbers of seconds. ``config/server.toml`` documents every key.
Command-line flags (``rill serve --data-dir ...``) go last, through ``apply_flags``.
Invariant: a bad value raises ConfigError naming the key; nothing half-applies.

Where each value came from is recorded in a ``Sources`` map (dotted key -> "file PATH",
"environment RILL_...", "flag --..."; a key not in it is the default); ``effective_settings``
lists every key with its value and source, secrets masked (``rill config show``).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from rill.server.storage.descriptors import MIN_OPEN_FILES
from rill.server.storage.durability import FsyncPolicy

NEVER = float("inf")
LOG_FORMATS = ("text", "json")
TANK_MAX_FRAME_SIZE = 256 * 1024 * 1024  # TANK's broker closes a connection sending more


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key."""


_SIZE_UNITS = {
    "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_DURATION_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_size(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("a size cannot be a boolean")
    if isinstance(value, (int, float)):
        return int(value)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(value))
    if not match:
        raise ValueError(f"not a size: {value!r}")
    number, unit = match.groups()
    factor = _SIZE_UNITS.get(unit.lower() or "b")
    if factor is None:
        raise ValueError(f"unknown size unit {unit!r}")
    return int(float(number) * factor)


def parse_duration(value: Any) -> float:
    """Seconds; ``"none"``/``"never"`` mean no limit (infinity)."""
    if isinstance(value, bool):
        raise ValueError("a duration cannot be a boolean")
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip().lower()
    if text in ("none", "never", "unlimited"):
        return NEVER
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text)
    if not match:
        raise ValueError(f"not a duration: {value!r}")
    number, unit = match.groups()
    factor = _DURATION_UNITS.get(unit or "s")
    if factor is None:
        raise ValueError(f"unknown duration unit {unit!r}")
    return float(number) * factor


def parse_open_files(value: Any) -> int | str:
    """``"auto"`` or a whole number of descriptors, at least ``MIN_OPEN_FILES``."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, bool) or not str(value).strip().isdigit():
        raise ValueError(f"{value!r} is neither auto nor a number of files")
    if int(value) < MIN_OPEN_FILES:
        raise ValueError(f"{value!r} is below the smallest budget, {MIN_OPEN_FILES}")
    return int(value)


def _size(default: str) -> Any:
    return field(default=parse_size(default), metadata={"parse": parse_size})


def _duration(default: str) -> Any:
    return field(default=parse_duration(default), metadata={"parse": parse_duration})


@dataclass
class SegmentConfig:
    size: int = _size("1 GB")  # soft limit; a segment is sealed once it reaches this size
    message_expiry: float = _duration("none")  # server default for topics created with expiry 0
    validate_checksum: bool = False  # verify every stored checksum at start, not only the tail


@dataclass
class TopicConfig:
    max_size: int = _size("10 GB")  # server default for topics created with max size 0
    delete_oldest_segments: bool = False  # when a topic is ≥ 90 % full, drop its oldest segments


@dataclass
class MessageDeduplicationConfig:
    """Drop messages whose id was already seen in the partition recently (off by default)."""

    enabled: bool = False
    max_entries: int = 1000  # ids remembered per partition
    expiry: float = _duration("1 m")  # how long an id is remembered


@dataclass
class SystemConfig:
    path: str = "local_data"
    fsync: str = FsyncPolicy.INTERVAL.value  # never | interval | always
    fsync_interval: float = _duration("1 s")
    # fsyncs of one group-commit round run in up to this many threads at once (1 = serially)
    fsync_threads: int = 8
    # appends in worker threads (the C stamper releases the GIL): "auto" = batches of at least
    # append_thread_min_size while other partitions are being written, "always" = every batch of
    # at least that size, "never" = all on the event loop (docs/performance.md, section 2)
    append_threads: str = "auto"
    append_thread_min_size: int = _size("512 KiB")
    # a poll answers at most this many bytes of records (always at least one message); the
    # client polls again from the next offset
    max_poll_size: int = _size("16 MiB")
    # space kept free for the metadata store so that deletions work on a full disk (0 = none)
    metadata_reserve: int = _size("4 MiB")
    # freed memory the C heap keeps for reuse instead of handing it back to the kernel (glibc's
    # M_TOP_PAD; 0 = glibc's own 128 KiB); see config/server.toml
    heap_top_pad: int = _size("32 MiB")
    # segment files open at once over all partitions (the least recently used are closed
    # beyond it); "auto" = half the open-file limit (raised to the hard limit at start)
    max_open_files: int | str = field(default="auto", metadata={"parse": parse_open_files})
    segment: SegmentConfig = field(default_factory=SegmentConfig)
    topic: TopicConfig = field(default_factory=TopicConfig)
    message_deduplication: MessageDeduplicationConfig = field(
        default_factory=MessageDeduplicationConfig
    )


@dataclass
class PersonalAccessTokenConfig:
    max_tokens_per_user: int = 100
    cleaner_interval: float = _duration("1 m")  # how often expired tokens are deleted


@dataclass
class TransactionsConfig:
    """Staged appends (rill extension 1010-1013, docs/extensions.md)."""

    # a batch's staged data left this long after its last stage call, neither committed nor
    # aborted, is dropped (after a restart, a staged file's modification time counts)
    staged_expiry: float = _duration("1 h")
    cleaner_interval: float = _duration("1 m")  # how often expired staged data is dropped


@dataclass
class HeartbeatConfig:
    """Drop clients that sent nothing (not even PING) for 1.2 x interval (off by default)."""

    enabled: bool = False
    interval: float = _duration("5 s")


@dataclass
class LoginThrottleConfig:
    """Failed logins per (address, username), per address and per username
    (auth/throttling.py)."""

    enabled: bool = True
    max_failures: int = 10  # per (address, username) within the window, then that pair is locked
    max_failures_per_address: int = 100  # per address, any usernames (spraying), then the address
    max_failures_per_user: int = 30  # per username from any addresses within the window
    window: float = _duration("1 m")
    lock_time: float = _duration("1 m")  # doubles with each further lockout ...
    max_lock_time: float = _duration("15 m")  # ... up to this
    max_entries: int = 100_000  # addresses and usernames remembered at most


@dataclass
class RetentionConfig:
    cleaner_enabled: bool = True  # delete expired segments in the background
    interval: float = _duration("1 m")


@dataclass
class TlsConfig:
    """TLS for a listener: PEM certificate (chain) and private key paths."""

    enabled: bool = False
    certificate: str = ""
    key: str = ""


@dataclass
class ConnectionsConfig:
    """Limits of every binary-protocol connection (TCP and QUIC), and of HTTP's."""

    # open at once, TCP and QUIC together (more are closed at accept); HTTP allows as many
    # connections of its own (more get 503)
    max_connections: int = 10_000
    # of those, open at once from one client address (an IPv4 address or an IPv6 /64; loopback
    # too: behind a proxy on this host every client is the proxy's address); HTTP counts its own
    max_connections_per_address: int = 1_000
    # the largest request before a login (LOGIN_USER and PING need a few hundred bytes)
    max_request_size_unauthenticated: int = _size("4 KiB")
    unauthenticated_timeout: float = _duration("10 s")  # closed if not logged in by then
    idle_timeout: float = _duration("10 m")  # logged in, no request for this long: closed
    request_timeout: float = _duration("60 s")  # a request's bytes must all arrive within this
    # a large request (above 256 KiB) must arrive at least this fast (bytes per second, judged
    # after its first 5 s, not counting time the server held reading back); 0: no minimum
    min_request_rate: int = _size("64 KiB")
    # bytes of requests received and not yet served, over all connections together (only what
    # arrived counts; large requests wait while this is used up, small ones never do)
    request_memory: int = _size("256 MiB")


@dataclass
class TcpConfig:
    enabled: bool = True
    address: str = "127.0.0.1:8090"
    max_frame_size: int = _size("64 MiB")  # larger requests are refused unread; the link closes
    # large polls go from the log files to the socket (sendfile; not over TLS). Off by default:
    # on loopback it measured no faster (docs/performance.md, "Zero-copy polls")
    sendfile: bool = False
    tls: TlsConfig = field(default_factory=TlsConfig)


@dataclass
class QuicCertificateConfig:
    """A self-signed certificate is generated at first start (kept in the data directory,
    never committed) unless ``self_signed`` is false and PEM paths are given."""

    self_signed: bool = True
    certificate: str = ""
    key: str = ""


@dataclass
class QuicConfig:
    enabled: bool = True
    address: str = "127.0.0.1:8080"
    max_request_size: int = _size("10 MB")  # larger request streams are reset unanswered
    max_concurrent_bidi_streams: int = 10_000
    keep_alive_interval: float = _duration("5 s")
    max_idle_timeout: float = _duration("10 s")
    certificate: QuicCertificateConfig = field(default_factory=QuicCertificateConfig)


@dataclass
class KafkaConfig:
    """Kafka's wire protocol on its own listener (issue 13). Clients log in by SASL (PLAIN,
    SCRAM-SHA-256, SCRAM-SHA-512) as rill users, with their permissions; until then a
    connection may only negotiate versions and log in. ``anonymous_user`` (for local
    development) names a user that connections act as without logging in; the server refuses
    to start with it on a non-loopback address."""

    enabled: bool = False
    address: str = "127.0.0.1:9092"
    advertised_address: str = ""  # HOST:PORT clients are told to connect to; "" = the bound one
    stream: str = "kafka"  # the rill stream Kafka topics live in (created on first use)
    auto_create_topics: bool = True  # Metadata for an unknown topic creates it (1 partition)
    # Kafka's group.initial.rebalance.delay.ms: an empty group's first rebalance waits this long
    group_initial_rebalance_delay: float = _duration("0 ms")
    anonymous_user: str = ""  # a username connections act as before SASL; "" = none (log in)
    # Kafka's connections.max.reauth.ms (KIP-368): a SASL login lasts this long; a client that
    # knows (SaslAuthenticate v1+ is told) logs in again on the same connection before it ends,
    # and a connection whose login ended is closed at its next request. "0 ms" = a login lasts
    # as long as its connection
    session_lifetime: float = _duration("0 ms")
    # large Fetch answers go from the log files to the socket (sendfile; not over TLS). Off by
    # default: on loopback it measured no faster (docs/performance.md, "Zero-copy polls")
    sendfile: bool = False
    tls: TlsConfig = field(default_factory=TlsConfig)


@dataclass
class TankConfig:
    """TANK's wire protocol on its own listener (issue 14). TANK has no authentication: every
    TANK connection acts as the rill user named by ``user``; the default (empty) is the root
    user, allowed only while the listener is on a loopback address (the server refuses to start
    otherwise)."""

    enabled: bool = False
    address: str = "127.0.0.1:11011"
    user: str = ""  # the rill user TANK clients act as; "" = the root user (loopback only)
    # off loopback, a [tank] user holding global manage or send rights is refused unless this
    # is set: every client that reaches the address would have those rights without a password
    allow_privileged_user: bool = False
    # the rill stream TANK topics live in; "" = the Kafka stream ([kafka] stream): Kafka and
    # TANK then share one flat topic namespace
    stream: str = ""
    # a TANK connection with nothing to read, nothing to send and no long poll waiting is
    # closed after this long (TANK's own rule: 16 s; its clients reconnect on demand); it
    # replaces [connections] idle_timeout on this listener
    idle_timeout: float = _duration("16 s")
    # the largest request frame this listener reads (TANK's own broker: 256 MiB, the most
    # allowed here); a larger one is logged and its connection closed unanswered (TANK has
    # no answer for it). It is taken from [connections] request_memory while it arrives
    max_frame_size: int = _size("64 MiB")
    tls: TlsConfig = field(default_factory=TlsConfig)


@dataclass
class CorsConfig:
    """Cross-origin requests from web pages of other origins: off by default (the console is
    served by the same listener, so it needs none). When enabled, the origins are named: ``*``
    would let any page a user opens log in (with a guessed or default password) and read."""

    enabled: bool = False
    allowed_methods: str = "GET,POST,PUT,DELETE"  # comma-separated
    allowed_origins: str = ""  # comma-separated, e.g. "https://dashboard.example.com"
    allowed_headers: str = "content-type,authorization"
    allow_credentials: bool = False


@dataclass
class JwtConfig:
    """HTTP access tokens. The signing secret is generated at first start and kept in the
    data directory (``secrets/jwt_secret``); none is shipped with rill."""

    algorithm: str = "HS256"
    issuer: str = "rill"
    audience: str = "rill"
    access_token_expiry: float = _duration("1 h")
    clock_skew: float = _duration("5 s")
    not_before: float = _duration("0 s")


@dataclass
class MetricsConfig:
    enabled: bool = True
    endpoint: str = "/metrics"


@dataclass
class HttpConfig:
    enabled: bool = True
    address: str = "127.0.0.1:3000"
    max_request_size: int = _size("2 MB")  # larger bodies get 413
    # bytes of messages one poll (GET .../messages) or one follow event carries at most (at least
    # one message); its JSON is written a message at a time, as the client reads it
    max_poll_size: int = _size("1 MiB")
    # bytes of messages held by replies being written, over all HTTP connections: past it, a
    # reply carries at most 64 KiB (at least one message) until others are written
    reply_memory: int = _size("64 MiB")
    cors: CorsConfig = field(default_factory=CorsConfig)
    jwt: JwtConfig = field(default_factory=JwtConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    tls: TlsConfig = field(default_factory=TlsConfig)


@dataclass
class RootConfig:
    """The root user created at first start (id 1, every permission)."""

    username: str = "iggy"
    password: str = "iggy"  # users.DEFAULT_ROOT_PASSWORD
    password_hash_cost: int = 10  # bcrypt cost for every user's password
    # a listener on an address other than loopback is refused while the root user still has
    # the default password, unless this is true
    allow_default_password: bool = False


@dataclass
class LoggingConfig:
    level: str = "info"  # debug, info, warning, error
    format: str = "text"  # text | json (one JSON object per line)


def parse_etcd_endpoints(value: Any) -> str:
    """Comma-separated ``http://HOST:PORT`` etcd client URLs ("" = standalone), kept as text
    with the spaces around commas removed (``ClusterConfig.endpoints`` splits them)."""
    if not isinstance(value, str):
        raise ValueError(f"expected comma-separated http://HOST:PORT URLs, got {value!r}")
    endpoints = [part.strip() for part in value.split(",") if part.strip()]
    for endpoint in endpoints:
        match = re.fullmatch(r"http://(\[[0-9a-fA-F:]+\]|[A-Za-z0-9._-]+):(\d{1,5})/?", endpoint)
        if not match or int(match.group(2)) > 65535:
            raise ValueError(f"{endpoint!r} is not http://HOST:PORT (etcd's client URL; "
                             f"https is not supported yet)")
    return ",".join(endpoint.rstrip("/") for endpoint in endpoints)


def parse_lease_ttl(value: Any) -> float:
    """A duration in whole seconds, at least 1: etcd leases count whole seconds."""
    seconds = parse_duration(value)
    if not 1 <= seconds < NEVER or seconds != int(seconds):
        raise ValueError(f"{value!r}: etcd leases count whole seconds: give 1 s or more")
    return seconds


@dataclass
class ClusterConfig:
    """A replicated cluster coordinated by etcd (issue 30; ``server/cluster/``). With no
    ``etcd_endpoints`` the node is standalone, exactly as without this section."""

    etcd_endpoints: str = field(default="", metadata={"parse": parse_etcd_endpoints})
    node_id: int = -1  # unique in the cluster, 0 or more; -1 = not set (standalone only)
    peer_address: str = "127.0.0.1:8093"  # the replication listener other nodes fetch from
    name: str = "rill"  # the cluster's etcd key prefix: /rill/<name>/
    default_replication_factor: int = 3  # topics created without one (Kafka's -1)
    min_insync_replicas: int = 2  # acks=all is refused while the ISR is smaller
    member_lease_ttl: float = field(default=2.0, metadata={"parse": parse_lease_ttl})
    replica_lag_max: float = _duration("10 s")  # a follower behind this long leaves the ISR
    # how often the controller moves leadership back to each partition's preferred replica
    # (the assignment's first) where it is live and in the ISR again; 0: never
    preferred_leader_check: float = _duration("30 s")
    # fetch answers go from the log files to the socket by sendfile (the kernel copies them;
    # measured about a third of the sender's CPU of reading and writing them)
    sendfile: bool = True

    @property
    def endpoints(self) -> list[str]:
        return [endpoint for endpoint in self.etcd_endpoints.split(",") if endpoint]

    @property
    def address(self) -> str:
        """The peer listener's address (the ``peer`` row of ``protocols.PROTOCOLS``)."""
        return self.peer_address

    @property
    def enabled(self) -> bool:
        return bool(self.endpoints)


@dataclass
class ServerConfig:
    system: SystemConfig = field(default_factory=SystemConfig)
    connections: ConnectionsConfig = field(default_factory=ConnectionsConfig)
    tcp: TcpConfig = field(default_factory=TcpConfig)
    quic: QuicConfig = field(default_factory=QuicConfig)
    http: HttpConfig = field(default_factory=HttpConfig)
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    tank: TankConfig = field(default_factory=TankConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    root: RootConfig = field(default_factory=RootConfig)
    personal_access_token: PersonalAccessTokenConfig = field(
        default_factory=PersonalAccessTokenConfig
    )
    heartbeat: HeartbeatConfig = field(default_factory=HeartbeatConfig)
    login_throttle: LoginThrottleConfig = field(default_factory=LoginThrottleConfig)
    transactions: TransactionsConfig = field(default_factory=TransactionsConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)

    @property
    def tank_stream(self) -> str:
        """The stream TANK topics live in (``[tank] stream``, else ``[kafka] stream``)."""
        return self.tank.stream.strip() or self.kafka.stream

    @property
    def data_path(self) -> Path:
        return Path(self.system.path)

    @property
    def fsync_policy(self) -> FsyncPolicy:
        return FsyncPolicy(self.system.fsync)


def _convert(key: str, target: dataclasses.Field, value: Any) -> Any:
    parse = target.metadata.get("parse")
    try:
        if parse is not None:
            return parse(value)
        expected = target.type if isinstance(target.type, str) else target.type.__name__
        if expected == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("true", "1", "yes", "on"):
                return True
            if text in ("false", "0", "no", "off"):
                return False
            raise ValueError(f"not a boolean: {value!r}")
        if expected == "int":
            return int(value)
        if expected == "float":
            return float(value)
        if not isinstance(value, str):
            raise ValueError(f"expected text, got {value!r}")
        return value
    except ValueError as error:
        raise ConfigError(f"{key}: {error}") from None


Sources = dict[str, str]  # dotted key -> where its value came from (absent: the default)
SECRET_KEYS = frozenset({"root.password"})  # shown masked by effective_settings
MASK = "********"


def _apply(section: Any, values: Mapping[str, Any], prefix: str, sources: Sources,
           origin: str) -> None:
    known = {f.name: f for f in dataclasses.fields(section)}
    for name, value in values.items():
        key = f"{prefix}{name}"
        target = known.get(name)
        if target is None:
            raise ConfigError(f"{key}: unknown configuration key")
        current = getattr(section, name)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{key}: expected a table")
            _apply(current, value, f"{key}.", sources, origin)
        else:
            setattr(section, name, _convert(key, target, value))
            sources[key] = origin


def _apply_environment(section: Any, environ: Mapping[str, str], prefix: str, dotted: str,
                       sources: Sources) -> None:
    for target in dataclasses.fields(section):
        env_name = f"{prefix}_{target.name.upper()}"
        current = getattr(section, target.name)
        if dataclasses.is_dataclass(current):
            _apply_environment(current, environ, env_name, f"{dotted}{target.name}.", sources)
        elif env_name in environ:
            setattr(section, target.name, _convert(env_name, target, environ[env_name]))
            sources[f"{dotted}{target.name}"] = f"environment {env_name}"


def _section_and_field(config: ServerConfig, key: str) -> tuple[Any, dataclasses.Field]:
    *path, name = key.split(".")
    section: Any = config
    for part in path:
        section = getattr(section, part)
    return section, next(f for f in dataclasses.fields(section) if f.name == name)


def apply_flags(config: ServerConfig, flags: Mapping[str, tuple[str, Any]],
                sources: Sources | None = None) -> None:
    """Command-line values over everything else: ``{dotted key: (flag name, value or None)}``;
    None = the flag was not given. Validates again."""
    for key, (flag, value) in flags.items():
        if value is None:
            continue
        section, target = _section_and_field(config, key)
        if key.endswith(".address"):
            split_address(value, flag)
        setattr(section, target.name, _convert(flag, target, value))
        if sources is not None:
            sources[key] = f"flag {flag}"
    _validate(config)


def effective_settings(config: Any, sources: Sources, prefix: str = "") -> list[tuple[str, str, str]]:
    """Every key as ``(dotted key, value as text, source)``, secrets masked, in file order."""
    rows: list[tuple[str, str, str]] = []
    for target in dataclasses.fields(config):
        key = f"{prefix}{target.name}"
        value = getattr(config, target.name)
        if dataclasses.is_dataclass(value):
            rows.extend(effective_settings(value, sources, f"{key}."))
            continue
        text = MASK if key in SECRET_KEYS else _show(value)
        rows.append((key, text, sources.get(key, "default")))
    return rows


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "none" if value == NEVER else f"{value:g} s"
    return str(value)


def _validate_cors(cors: CorsConfig) -> None:
    if not cors.enabled:
        return
    origins = [origin.strip() for origin in cors.allowed_origins.split(",") if origin.strip()]
    if not origins:
        raise ConfigError("http.cors.allowed_origins: name the origins allowed (comma-separated, "
                          "e.g. \"https://dashboard.example.com\") or leave http.cors disabled")
    if "*" in origins:
        raise ConfigError("http.cors.allowed_origins: '*' is refused: any web page a user opens "
                          "could then log in and read through the API; name the origins")


def _validate_cluster(cluster: ClusterConfig) -> None:
    split_address(cluster.peer_address, "cluster.peer_address")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", cluster.name):
        raise ConfigError(f"cluster.name: {cluster.name!r} is not a name of letters, digits, "
                          "'.', '_' and '-' (it is the cluster's etcd key prefix)")
    if cluster.default_replication_factor < 1:
        raise ConfigError("cluster.default_replication_factor: must be at least 1")
    if not 1 <= cluster.min_insync_replicas <= cluster.default_replication_factor:
        raise ConfigError(f"cluster.min_insync_replicas: must be 1 to "
                          f"cluster.default_replication_factor "
                          f"({cluster.default_replication_factor}): acks=all is refused while "
                          f"the ISR is smaller")
    if not 0 < cluster.replica_lag_max < NEVER:
        raise ConfigError("cluster.replica_lag_max: must be a positive duration")
    if cluster.enabled and cluster.node_id < 0:
        raise ConfigError("cluster.node_id: a node with cluster.etcd_endpoints needs a unique "
                          "node id, 0 or more (RILL_CLUSTER_NODE_ID)")


def _validate(config: ServerConfig) -> None:
    _validate_cluster(config.cluster)
    if config.logging.level.lower() not in ("debug", "info", "warning", "error", "critical"):
        raise ConfigError(f"logging.level: {config.logging.level!r} is not one of debug, info, "
                          "warning, error")
    if config.logging.format not in LOG_FORMATS:
        raise ConfigError(f"logging.format: {config.logging.format!r} is not one of text, json")
    try:
        FsyncPolicy(config.system.fsync)
    except ValueError:
        raise ConfigError(
            f"system.fsync: {config.system.fsync!r} is not one of never, interval, always"
        ) from None
    if config.system.append_threads not in ("auto", "always", "never"):
        raise ConfigError(
            f"system.append_threads: {config.system.append_threads!r} is not one of auto, "
            "always, never"
        )
    if config.system.fsync_threads < 1:
        raise ConfigError("system.fsync_threads: must be at least 1")
    if config.system.max_poll_size < 1024:
        raise ConfigError("system.max_poll_size: must be at least 1 KiB")
    if not 0 <= config.system.heap_top_pad < 2**31:
        raise ConfigError("system.heap_top_pad: must be from 0 to below 2 GiB")
    if config.system.segment.size <= 0:
        raise ConfigError("system.segment.size: must be positive")
    if config.tcp.max_frame_size < 8:
        raise ConfigError("tcp.max_frame_size: must be at least 8 bytes")
    throttle = config.login_throttle
    if min(throttle.max_failures, throttle.max_failures_per_address, throttle.max_failures_per_user,
           throttle.max_entries) < 1:
        raise ConfigError("login_throttle: max_failures, max_failures_per_address, "
                          "max_failures_per_user and max_entries "
                          "must be at least 1")
    if not 0 < throttle.lock_time <= throttle.max_lock_time < NEVER or not 0 < throttle.window < NEVER:
        raise ConfigError("login_throttle: window and lock_time must be positive, lock_time at "
                          "most max_lock_time")
    connections = config.connections
    if connections.max_connections < 1:
        raise ConfigError("connections.max_connections: must be at least 1")
    if connections.max_connections_per_address < 1:
        raise ConfigError("connections.max_connections_per_address: must be at least 1")
    if connections.max_request_size_unauthenticated < 512:
        raise ConfigError("connections.max_request_size_unauthenticated: must be at least 512 B")
    for key in ("unauthenticated_timeout", "idle_timeout", "request_timeout"):
        if getattr(connections, key) <= 0:
            raise ConfigError(f"connections.{key}: must be a positive duration or none")
    if config.tank.idle_timeout <= 0:
        raise ConfigError("tank.idle_timeout: must be a positive duration or none")
    if not 8 <= config.tank.max_frame_size <= TANK_MAX_FRAME_SIZE:
        raise ConfigError("tank.max_frame_size: must be 8 bytes to 256 MiB (TANK's own limit)")
    largest = max(config.tcp.max_frame_size, config.quic.max_request_size,
                  config.tank.max_frame_size if config.tank.enabled else 0)
    if connections.request_memory < largest:
        raise ConfigError(f"connections.request_memory: must hold the largest request "
                          f"({largest} bytes: tcp.max_frame_size, quic.max_request_size, "
                          f"tank.max_frame_size)")
    if config.http.max_poll_size < 1024:
        raise ConfigError("http.max_poll_size: must be at least 1 KiB")
    if config.http.reply_memory < config.http.max_poll_size:
        raise ConfigError("http.reply_memory: must hold one reply (http.max_poll_size)")
    _validate_cors(config.http.cors)
    if not 0 < config.system.fsync_interval < NEVER:
        raise ConfigError("system.fsync_interval: must be a positive duration")
    split_address(config.tcp.address, "tcp.address")
    split_address(config.quic.address, "quic.address")
    split_address(config.http.address, "http.address")
    split_address(config.kafka.address, "kafka.address")
    if config.kafka.advertised_address:
        split_address(config.kafka.advertised_address, "kafka.advertised_address")
    if not config.kafka.stream.strip():
        raise ConfigError("kafka.stream: must name a stream")
    split_address(config.tank.address, "tank.address")
    for key, tls in (("tcp.tls", config.tcp.tls), ("http.tls", config.http.tls),
                     ("kafka.tls", config.kafka.tls), ("tank.tls", config.tank.tls)):
        if tls.enabled and not (tls.certificate and tls.key):
            raise ConfigError(f"{key}: enabled TLS needs certificate and key paths")
    quic_certificate = config.quic.certificate
    if config.quic.enabled and not quic_certificate.self_signed:
        if not (quic_certificate.certificate and quic_certificate.key):
            raise ConfigError("quic.certificate: self_signed = false needs certificate and key paths")


def split_address(address: str, key: str = "address") -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{key}: {address!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def load_config(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None,
    sources: Sources | None = None,
) -> ServerConfig:
    """Defaults, then the TOML file (if given), then RILL_* environment variables; where each
    value came from goes into ``sources`` when given."""
    sources = {} if sources is None else sources
    config = ServerConfig()
    if path is not None:
        try:
            with open(path, "rb") as handle:
                data = tomllib.load(handle)
        except FileNotFoundError:
            raise ConfigError(f"configuration file {path} does not exist") from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"configuration file {path}: {error}") from None
        _apply(config, data, "", sources, f"file {path}")
    _apply_environment(config, os.environ if environ is None else environ, "RILL", "", sources)
    _validate(config)
    return config
