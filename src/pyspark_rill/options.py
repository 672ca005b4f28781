"""Options of the ``rill`` data source: parsing and validation, with one clear message each.

Owns: the option names (Spark lower-cases them: ``maxOffsetsPerTrigger`` arrives as
``maxoffsetspertrigger``), their defaults, and frozen, picklable option objects:
``ConnectionOptions`` (how to reach and log in), ``ReadOptions`` and ``WriteOptions``.
Invariant: every error raised here is a ``RillOptionError`` whose message names the option
(as the user spelled it in the documentation) and what was wrong.

Credentials may come from the environment (``RILL_USERNAME``/``RILL_PASSWORD`` or
``RILL_TOKEN``) so that they stay out of query plans and logs, where options are visible.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

CONNECTION_OPTIONS = ("servers", "transport", "username", "password", "token", "caFile",
                      "verifyCertificate", "reconnectAttempts", "reconnectBackoff",
                      "failoverTimeout")
# how long a query waits for a server that went away: 10 tries, waits of 1, 2, 4, 8, 8, ... s
# (about a minute), enough for a restart of the server
DEFAULT_RECONNECT_ATTEMPTS = 10
DEFAULT_RECONNECT_BACKOFF = 1.0
# how long a read of a rill cluster waits for a partition's leader (refusals, a lost leader)
# before failing: enough for an election after a node's death (seconds)
DEFAULT_FAILOVER_TIMEOUT = 60.0
HTTP_SCHEMES = ("http://", "https://")
READ_OPTIONS = (
    "stream", "topic", "topics", "startingOffsets", "endingOffsets", "startingTimestamp",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "failOnDataLoss", "headersFormat",
    "minPartitions", "fetchMaxMessages", "fetchMaxBytes", "consumerName", "implementation",
)
WRITE_OPTIONS = ("stream", "topic", "sinkMode", "producerId", "maxRequestBytes")
# options Spark itself may pass to a data source
SPARK_OPTIONS = ("path", "checkpointLocation", "queryName")
KNOWN = {name.lower(): name for name in
         CONNECTION_OPTIONS + READ_OPTIONS + WRITE_OPTIONS + SPARK_OPTIONS}

TRANSPORTS = ("tcp", "quic")
HEADER_FORMATS = ("binary", "typed")
# which implementation serves a batch read when the JVM one is on the session (README)
IMPLEMENTATIONS = ("jvm", "python")
SINK_MODES = {"atleastonce": "atLeastOnce", "exactlyonce": "exactlyOnce"}


class RillOptionError(ValueError):
    """A bad option or column; the message names it."""


def check_known(options: Mapping[str, str]) -> None:
    """Refuse options this source does not know (a typo must not be silently ignored)."""
    unknown = sorted(key for key in options if key.lower() not in KNOWN)
    if unknown:
        raise RillOptionError(
            f"unknown option {unknown[0]!r} for format 'rill'; known options: "
            + ", ".join(sorted(set(KNOWN.values()) - set(SPARK_OPTIONS)))
        )


def _get(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    value = options.get(name.lower(), options.get(name))
    return default if value is None else str(value)


def _number(options: Mapping[str, str], name: str, default: Any, convert: Callable[[str], Any],
            fits: Callable[[Any], bool], expected: str) -> Any:
    """Option ``name`` as ``convert`` reads it, or ``default`` when absent; a value that does
    not convert or does not fit is refused, naming the option and what it should be."""
    text = _get(options, name)
    if text is None:
        return default
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not fits(value):
        raise RillOptionError(f"option {name!r} must be {expected}, got {text!r}")
    return value


def _positive_int(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    return _number(options, name, default, int, lambda value: value > 0, "a positive integer")


def _count(options: Mapping[str, str], name: str, default: int) -> int:
    return _number(options, name, default, int, lambda value: value >= 0, "an integer >= 0")


def _seconds(options: Mapping[str, str], name: str, default: float) -> float:
    return _number(options, name, default, float, lambda value: 0 < value <= 3600,
                   "a number of seconds (0 < s <= 3600)")


def _boolean(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = _get(options, name)
    if text is None:
        return default
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise RillOptionError(f"option {name!r} must be true or false, got {text!r}")


def _choice(options: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    text = (_get(options, name) or default).strip()
    if text.lower() not in choices:
        raise RillOptionError(f"option {name!r} must be one of {', '.join(choices)}, got {text!r}")
    return text.lower()


def parse_servers(text: str) -> list[str]:
    """``host:port`` or a comma-separated list of them (tried in order when connecting); an
    entry ``http://host:port`` (or ``https://``) is a node's HTTP API, where the map of a rill
    cluster is read (``split_servers``)."""
    servers = [server.strip() for server in text.split(",") if server.strip()]
    for server in servers:
        address = next((server[len(scheme):] for scheme in HTTP_SCHEMES
                        if server.lower().startswith(scheme)), server).rstrip("/")
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise RillOptionError(
                f"option 'servers' must be host:port or a comma-separated list of them (a "
                f"cluster node's HTTP API as http://host:port), got {text!r}")
    if not servers:
        raise RillOptionError("option 'servers' is empty")
    if all(server.lower().startswith(HTTP_SCHEMES) for server in servers):
        raise RillOptionError(
            f"option 'servers' names only HTTP APIs ({text!r}): give at least one server's "
            "host:port (its Iggy TCP or QUIC listener) too")
    return servers


def split_servers(servers: list[str]) -> tuple[str, str]:
    """(the host:port entries, the http(s):// entries), each comma-joined."""
    http = [server for server in servers if server.lower().startswith(HTTP_SCHEMES)]
    return (",".join(server for server in servers if server not in http), ",".join(http))


@dataclass(frozen=True)
class ConnectionOptions:
    servers: str
    transport: str
    username: str | None
    password: str | None
    token: str | None
    ca_file: str | None = None  # QUIC: trust this certificate (e.g. the server's self-signed one)
    verify_certificate: bool = True  # QUIC: false accepts any certificate
    # a lost server is tried this many more times, the waits starting at reconnect_backoff
    # seconds and doubling up to 8 times it
    reconnect_attempts: int = DEFAULT_RECONNECT_ATTEMPTS
    reconnect_backoff: float = DEFAULT_RECONNECT_BACKOFF
    # the HTTP APIs of 'servers' (comma-joined; "" = none): where a cluster's map is read
    cluster_http: str = ""
    failover_timeout: float = DEFAULT_FAILOVER_TIMEOUT

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ConnectionOptions:
        servers, cluster_http = split_servers(
            parse_servers(_get(options, "servers") or "127.0.0.1:8090"))
        transport = (_get(options, "transport") or "tcp").strip().lower()
        if transport not in TRANSPORTS:
            raise RillOptionError(
                f"option 'transport' must be tcp or quic, got {transport!r} (the connector needs "
                "rill's binary extension commands, which HTTP does not serve)"
            )
        username = _get(options, "username", os.environ.get("RILL_USERNAME"))
        password = _get(options, "password", os.environ.get("RILL_PASSWORD"))
        token = _get(options, "token", os.environ.get("RILL_TOKEN"))
        if token is None and (username is None or password is None):
            raise RillOptionError(
                "credentials missing: give options 'username' and 'password', or 'token' "
                "(or the environment variables RILL_USERNAME/RILL_PASSWORD or RILL_TOKEN)"
            )
        ca_file = _get(options, "caFile")
        if ca_file is not None and not os.path.isfile(ca_file):
            raise RillOptionError(f"option 'caFile': no such file {ca_file!r}")
        verify = _boolean(options, "verifyCertificate", True)
        return cls(servers, transport, username, password, token, ca_file, verify,
                   _count(options, "reconnectAttempts", DEFAULT_RECONNECT_ATTEMPTS),
                   _seconds(options, "reconnectBackoff", DEFAULT_RECONNECT_BACKOFF),
                   cluster_http, _seconds(options, "failoverTimeout", DEFAULT_FAILOVER_TIMEOUT))


def parse_topics(options: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    stream = _get(options, "stream")
    if not stream or not stream.strip():
        raise RillOptionError("option 'stream' is required")
    topic, topics = _get(options, "topic"), _get(options, "topics")
    if topic and topics:
        raise RillOptionError("give option 'topic' or option 'topics', not both")
    names = [name.strip() for name in (topic or topics or "").split(",") if name.strip()]
    if not names:
        raise RillOptionError("option 'topic' (or 'topics', a comma-separated list) is required")
    if len(set(names)) != len(names):
        raise RillOptionError(f"option 'topics' lists a topic twice: {topics!r}")
    return stream.strip(), tuple(names)


def parse_offsets_spec(options: Mapping[str, str], name: str, default: str,
                       allowed: tuple[str, ...]) -> str | dict[str, dict[str, int]]:
    """``earliest``/``latest`` or JSON ``{"stream/topic": {"partition": offset}}`` where an
    offset is >= 0, or -2 (earliest) / -1 (latest) as with Kafka."""
    text = (_get(options, name) or default).strip()
    if text.lower() in allowed:
        return text.lower()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise RillOptionError(
            f"option {name!r} must be {' or '.join(allowed)} or JSON like "
            f"{{\"stream/topic\": {{\"1\": 42}}}}, got {text!r} ({error.msg})"
        ) from None
    if not isinstance(value, dict) or not value:
        raise RillOptionError(f"option {name!r}: the JSON must be a non-empty object, got {text!r}")
    spec: dict[str, dict[str, int]] = {}
    for key, partitions in value.items():
        if not isinstance(key, str) or key.count("/") != 1 or not isinstance(partitions, dict):
            raise RillOptionError(
                f"option {name!r}: keys are \"stream/topic\" and values objects of partition "
                f"-> offset, got {key!r}: {partitions!r}"
            )
        spec[key] = {}
        for partition, offset in partitions.items():
            if not str(partition).isdigit() or int(partition) < 1:
                raise RillOptionError(f"option {name!r}: {key!r} has a bad partition id {partition!r}")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < -2:
                raise RillOptionError(
                    f"option {name!r}: offset of {key}/{partition} must be an integer >= 0, "
                    f"-2 (earliest) or -1 (latest), got {offset!r}"
                )
            spec[key][str(int(partition))] = offset
    return spec


def parse_timestamp_us(options: Mapping[str, str], name: str) -> int | None:
    """Milliseconds since the epoch (as Kafka's option) or an ISO-8601 time (UTC if naive)."""
    text = _get(options, name)
    if text is None:
        return None
    text = text.strip()
    if text.isdigit():
        return int(text) * 1000
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise RillOptionError(
            f"option {name!r} must be milliseconds since the epoch or an ISO-8601 time, "
            f"got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1_000_000)


@dataclass(frozen=True)
class ReadOptions:
    connection: ConnectionOptions
    stream: str
    topics: tuple[str, ...]
    starting: str | dict[str, dict[str, int]]
    ending: str | dict[str, dict[str, int]]
    starting_timestamp_us: int | None
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    typed_headers: bool
    min_partitions: int | None
    fetch_max_messages: int
    fetch_max_bytes: int
    consumer_name: str | None

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> ReadOptions:
        check_known(options)
        stream, topics = parse_topics(options)
        _choice(options, "implementation", IMPLEMENTATIONS, "jvm")
        starting = parse_offsets_spec(
            options, "startingOffsets", "latest" if streaming else "earliest",
            ("earliest", "latest"))
        if streaming and _get(options, "endingOffsets") is not None:
            raise RillOptionError("option 'endingOffsets' is for batch queries only")
        ending = parse_offsets_spec(options, "endingOffsets", "latest", ("latest",))
        timestamp = parse_timestamp_us(options, "startingTimestamp")
        if timestamp is not None and _get(options, "startingOffsets") is not None:
            raise RillOptionError("give option 'startingOffsets' or 'startingTimestamp', not both")
        maximum = _positive_int(options, "maxOffsetsPerTrigger", None)
        minimum = _positive_int(options, "minOffsetsPerTrigger", None)
        if not streaming and (maximum or minimum):
            raise RillOptionError("options 'maxOffsetsPerTrigger'/'minOffsetsPerTrigger' are "
                                  "for streaming queries only")
        if maximum and minimum and minimum > maximum:
            raise RillOptionError("option 'minOffsetsPerTrigger' exceeds 'maxOffsetsPerTrigger'")
        return cls(
            ConnectionOptions.parse(options), stream, topics, starting, ending, timestamp,
            maximum, minimum, _boolean(options, "failOnDataLoss", True),
            _choice(options, "headersFormat", HEADER_FORMATS, "binary") == "typed",
            _positive_int(options, "minPartitions", None),
            _positive_int(options, "fetchMaxMessages", 32768) or 32768,
            _positive_int(options, "fetchMaxBytes", 16 << 20) or 16 << 20,
            _get(options, "consumerName"),
        )


@dataclass(frozen=True)
class WriteOptions:
    connection: ConnectionOptions
    stream: str | None  # None: every row names its stream in a 'stream' column
    topic: str | None
    exactly_once: bool
    producer_id: str | None
    max_request_bytes: int

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        check_known(options)
        mode = (_get(options, "sinkMode") or "atLeastOnce").strip()
        if mode.lower() not in SINK_MODES:
            raise RillOptionError(f"option 'sinkMode' must be atLeastOnce or exactlyOnce, got {mode!r}")
        if _get(options, "topics") is not None:
            raise RillOptionError("option 'topics' is for reading; write with 'topic' or a "
                                  "'topic' column")
        producer = _get(options, "producerId")
        if producer is not None and not 1 <= len(producer.encode("utf-8")) <= 255:
            raise RillOptionError("option 'producerId' must be 1 to 255 bytes")
        max_bytes = _positive_int(options, "maxRequestBytes", 4 << 20) or 4 << 20
        if max_bytes > 10_000_000:
            raise RillOptionError("option 'maxRequestBytes' must be at most 10000000 (the "
                                  "server's limit for one batch)")
        return cls(
            ConnectionOptions.parse(options), (_get(options, "stream") or "").strip() or None,
            (_get(options, "topic") or "").strip() or None,
            SINK_MODES[mode.lower()] == "exactlyOnce", producer, max_bytes,
        )
