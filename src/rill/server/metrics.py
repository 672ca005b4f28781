"""Server metrics in the Prometheus text format (served at ``[http.metrics] endpoint``).

Owns: the counters and histograms, and their rendering. What is measured:

* every request of every protocol while ``enabled`` (``instrument(core)`` turns it on),
  whatever the transport: a request counter by protocol (``iggy``, ``kafka``, ``tank``),
  request kind (the protocol's name of it: the Iggy command's, Kafka's API in snake_case,
  TANK's msg_id), transport and outcome (``ok`` or the error's snake_case name) and a latency
  histogram by protocol, kind and transport. The connection loop (``transports.binary``) takes
  them for TCP and QUIC, through a ``RequestSeries`` per request kind that it keeps, so that a
  request costs a dict increment and a bisect; HTTP's routes through ``record_request``;
* bytes in (SEND message regions) and bytes/messages out (POLL answers), by transport
  (``record_sent``, ``record_polled``);
* messages appended (``record_appended``, one line in the send path): counted from the
  partition log's next offset, so duplicates dropped by deduplication are not counted. A
  mark per log remembers the next offset last seen; ``instrument`` primes the marks of the
  logs loaded at start and a log first seen later was created empty. A purge resets the
  offsets, so a smaller value than the mark means "this many since the purge";
* HTTP requests by method and status (the HTTP transport's middleware);
* gauges read at scrape time: connected clients by transport, streams, topics, partitions,
  and ``rill_consumer_group_lag`` per group and partition (the figure of GET_CONSUMER_LAG);
* in a cluster only (nothing when standalone), read at scrape time from the cluster view's
  ``status()`` (``core.cluster_view``): ``rill_cluster_members`` (live),
  ``rill_cluster_under_replicated_partitions`` (its ISR smaller than its replicas, as the
  view counts them), the counters ``rill_cluster_isr_shrinks_total``,
  ``rill_cluster_isr_expands_total``, ``rill_cluster_leader_elections_total``,
  ``rill_cluster_fenced_requests_total``, ``rill_cluster_replicas_emptied_total``, and per follower of each partition this node leads
  ``rill_cluster_replica_lag_messages`` and ``rill_cluster_replica_lag_seconds`` (labels
  stream, topic, partition, follower: its node id). Lag is known on the leader only: scrape
  every node.

One registry per server: the Core owns it (``core.metrics``) and passes ``record_appended``
to the services that append; nothing is shared between two servers of one process.
Invariant: recording never raises and costs a few dict operations.
"""

from __future__ import annotations

import bisect
import weakref
from collections import defaultdict
from typing import Any

from rill.server.core.consumer_offsets import consumer_lag

LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                   0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Histogram:
    __slots__ = ("counts", "total", "count")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)  # the last one is +Inf
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS, value)] += 1
        self.total += value
        self.count += 1


class RequestSeries:
    """The requests of one (protocol, kind, transport): a count per outcome, and durations."""

    __slots__ = ("outcomes", "latency")

    def __init__(self) -> None:
        self.outcomes: dict[str, int] = {}
        self.latency = Histogram()

    def record(self, outcome: str, seconds: float) -> None:
        outcomes = self.outcomes
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        self.latency.observe(seconds)


def _labels(**labels: Any) -> str:
    def escape(text: Any) -> str:
        return str(text).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return "{" + ",".join(f'{key}="{escape(value)}"' for key, value in labels.items()) + "}"


class Metrics:
    def __init__(self) -> None:
        # (protocol, request kind, transport) -> its counts and durations
        self.requests: dict[tuple[str, str, str], RequestSeries] = {}
        self.bytes_in: dict[str, int] = defaultdict(int)
        self.bytes_out: dict[str, int] = defaultdict(int)
        self.messages_out: dict[str, int] = defaultdict(int)
        self.messages_appended = 0
        self.http_requests: dict[tuple[str, int], int] = defaultdict(int)
        self._marks: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._core: Any = None
        self.enabled = False  # set by ``instrument``

    # -- recording -------------------------------------------------------------------------

    def instrument(self, core: Any) -> None:
        """Measure every request from now on (after ``core.start()``, before the listeners
        start): while ``enabled`` the connection loop and HTTP's routes record each request
        (``request_series``, ``record_request``) and Iggy's what it moved (``record_sent``,
        ``record_polled``)."""
        self._core = core
        for stream in core.state.streams.values():
            for topic in stream.topics.values():
                for partition in topic.partitions.values():
                    self._marks[partition.log] = partition.log.next_offset
        self.enabled = True

    def request_series(self, protocol: str, kind: str, transport: str) -> RequestSeries:
        """The counters of the requests of ``kind``; a caller may keep it and ``record`` on it."""
        key = (protocol, kind, transport)
        series = self.requests.get(key)
        if series is None:
            series = self.requests[key] = RequestSeries()
        return series

    def record_request(self, protocol: str, kind: str, transport: str, outcome: str,
                       seconds: float) -> None:
        """One request of ``kind`` ("ok" or the error's name), and how long it took."""
        self.request_series(protocol, kind, transport).record(outcome, seconds)

    def record_sent(self, transport: str, nbytes: int) -> None:
        self.bytes_in[transport] += nbytes

    def record_polled(self, transport: str, count: int, nbytes: int) -> None:
        self.messages_out[transport] += count
        self.bytes_out[transport] += nbytes

    def record_appended(self, log: Any) -> None:
        """Called right after an append to ``log`` (no await in between)."""
        now = log.next_offset
        before = self._marks.get(log, 0)
        self._marks[log] = now
        self.messages_appended += now - before if now >= before else now

    def record_http(self, method: str, status: int) -> None:
        self.http_requests[(method, status)] += 1

    # -- rendering -------------------------------------------------------------------------

    def render(self) -> str:
        lines: list[str] = []

        def family(name: str, kind: str, help_text: str) -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")

        series = sorted(self.requests.items())
        family("rill_requests_total", "counter",
               "Requests served, by protocol, command, transport and outcome.")
        for (protocol, command, transport), one in series:
            for outcome, value in sorted(one.outcomes.items()):
                labels = _labels(protocol=protocol, command=command, transport=transport,
                                 outcome=outcome)
                lines.append(f"rill_requests_total{labels} {value}")
        family("rill_request_duration_seconds", "histogram", "Time spent serving a request.")
        for (protocol, command, transport), one in series:
            histogram = one.latency
            cumulative = 0
            for bound, count in zip((*LATENCY_BUCKETS, "+Inf"), histogram.counts):
                cumulative += count
                labels = _labels(protocol=protocol, command=command, transport=transport, le=bound)
                lines.append(f"rill_request_duration_seconds_bucket{labels} {cumulative}")
            labels = _labels(protocol=protocol, command=command, transport=transport)
            lines.append(f"rill_request_duration_seconds_sum{labels} {histogram.total:.9f}")
            lines.append(f"rill_request_duration_seconds_count{labels} {histogram.count}")
        for name, values, help_text in (
            ("rill_bytes_in_total", self.bytes_in, "Bytes of message regions received by SEND."),
            ("rill_bytes_out_total", self.bytes_out, "Bytes of messages answered by POLL."),
            ("rill_messages_out_total", self.messages_out, "Messages answered by POLL."),
        ):
            family(name, "counter", help_text)
            for transport, value in sorted(values.items()):
                lines.append(f"{name}{_labels(transport=transport)} {value}")
        family("rill_messages_in_total", "counter", "Messages appended to partitions.")
        lines.append(f"rill_messages_in_total {self.messages_appended}")
        family("rill_http_requests_total", "counter", "HTTP requests, by method and status.")
        for (method, status), value in sorted(self.http_requests.items()):
            lines.append(f"rill_http_requests_total{_labels(method=method, status=status)} {value}")
        lines.extend(self._gauges())
        return "\n".join(lines) + "\n"

    def _gauges(self) -> list[str]:
        core = self._core
        if core is None:
            return []
        connections: dict[str, int] = defaultdict(int)
        for session in list(core.sessions.values()):
            connections[session.transport] += 1
        streams = list(core.state.streams.values())
        topics = [topic for stream in streams for topic in stream.topics.values()]
        partitions = sum(len(topic.partitions) for topic in topics)
        lines = ["# HELP rill_connections Connected clients, by transport.",
                 "# TYPE rill_connections gauge"]
        lines += [f"rill_connections{_labels(transport=t)} {n}" for t, n in sorted(connections.items())]
        for name, value in (("streams", len(streams)), ("topics", len(topics)),
                            ("partitions", partitions)):
            lines += [f"# HELP rill_{name} Number of {name}.", f"# TYPE rill_{name} gauge",
                      f"rill_{name} {value}"]
        lines += ["# HELP rill_consumer_group_lag Stored messages after a consumer group's "
                  "committed offset, by partition.", "# TYPE rill_consumer_group_lag gauge"]
        for stream in streams:
            for topic in stream.topics.values():
                for row in consumer_lag(topic, core.consumer_groups.group_position_names(topic)):
                    if row.group_name:  # a consumer group
                        labels = _labels(stream=stream.name, topic=topic.name, group=row.group_name,
                                         partition=row.partition_id)
                        lines.append(f"rill_consumer_group_lag{labels} {row.lag}")
        lines.extend(cluster_lines(core.cluster))
        return lines


# counters of ``ClusterView.status()["counters"]`` -> (metric, help)
CLUSTER_COUNTERS = (
    ("isr_shrinks", "rill_cluster_isr_shrinks_total", "ISR shrinks this node made."),
    ("isr_expands", "rill_cluster_isr_expands_total", "ISR expansions this node made."),
    ("leader_elections", "rill_cluster_leader_elections_total",
     "Partition leader elections this node took part in."),
    ("fenced_requests", "rill_cluster_fenced_requests_total",
     "Requests refused for a stale epoch (member, controller, leader or partition)."),
    ("replicas_emptied", "rill_cluster_replicas_emptied_total",
     "Replicas this node emptied for a partition's new incarnation (a purge)."),
)


def cluster_lines(cluster: Any) -> list[str]:
    """The cluster's gauges and counters (none for a standalone server: ``cluster`` None)."""
    if cluster is None:
        return []
    status = cluster.status()
    counters = status.get("counters") or {}
    lines = ["# HELP rill_cluster_members Live members of the cluster.",
             "# TYPE rill_cluster_members gauge",
             f"rill_cluster_members {len(status.get('members') or [])}",
             "# HELP rill_cluster_under_replicated_partitions Partitions whose ISR is smaller "
             "than their replicas.",
             "# TYPE rill_cluster_under_replicated_partitions gauge",
             f"rill_cluster_under_replicated_partitions "
             f"{counters.get('under_replicated_partitions', 0)}"]
    for key, name, help_text in CLUSTER_COUNTERS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter",
                  f"{name} {counters.get(key, 0)}"]
    lag_messages, lag_seconds = [], []
    for row in status.get("partitions") or []:
        for follower in row.get("followers") or []:
            labels = _labels(stream=row["stream"], topic=row["topic"],
                             partition=row["partition_id"], follower=follower["node_id"])
            lag_messages.append(f"rill_cluster_replica_lag_messages{labels} "
                                f"{follower['lag_messages']}")
            lag_seconds.append(f"rill_cluster_replica_lag_seconds{labels} "
                               f"{float(follower['lag_seconds']):.3f}")
    lines += ["# HELP rill_cluster_replica_lag_messages Messages a follower lacks of a "
              "partition this node leads.", "# TYPE rill_cluster_replica_lag_messages gauge",
              *lag_messages,
              "# HELP rill_cluster_replica_lag_seconds How far behind a follower is, in "
              "seconds, on a partition this node leads.",
              "# TYPE rill_cluster_replica_lag_seconds gauge", *lag_seconds]
    return lines
