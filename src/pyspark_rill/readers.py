"""Batch and micro-batch readers of the ``rill`` source.

Where things run (PySpark 4.3): ``partitions()`` of the batch reader and every method of the
stream reader but ``read()`` run on the driver (the stream reader in one long-lived process
per query, so state on ``self`` lasts the run); ``read()`` runs in executor Python workers on
a pickled copy, so it only uses the options and the partition it is given.

Correctness lives in Spark's checkpoint: offsets are the ``offsets.canonical`` JSON, a range
is planned from concrete offsets (never "latest" at read time), and reads go by offset with
POLL_MESSAGES_COLUMNAR. When rill is a cluster (``leaders``), every partition is read from its
leader, and a failover is ridden out by asking the new leader from the same offset. ``commit`` may store a consumer offset (option ``consumerName``) so
that lag shows up in rill's tools, nothing more.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from rill import errors
from rill.client import Consumer

from pyspark_rill import offsets as offs
from pyspark_rill.arrow_read import RangeSpec, RillDataLossError, read_range
from pyspark_rill.connection import RillConnectionError, connect, link_lost, with_client
from pyspark_rill.leaders import REFUSED, RETRIED, cluster_of, not_a_cluster_read
from pyspark_rill.options import ReadOptions

log = logging.getLogger(__name__)


def plan_ranges(start: offs.Offsets, end: offs.Offsets, min_partitions: int | None
                ) -> list[RangeSpec]:
    """One range per partition with new data; split further when ``minPartitions`` asks for
    more tasks than there are partitions (big ranges get more pieces)."""
    ranges = []
    for key, parts in end.items():
        stream, topic = offs.split_key(key)
        for partition, stop in parts.items():
            begin = start.get(key, {}).get(partition)
            fresh = begin is None  # appeared after the query started: from its oldest message
            first = 0 if fresh else begin
            if stop > first:
                ranges.append(RangeSpec(stream, topic, int(partition), first, stop, fresh))
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.end - r.start for r in ranges)
    split = []
    for piece in ranges:
        size = piece.end - piece.start
        pieces = max(1, min(size, round(min_partitions * size / total)))
        bounds = [piece.start + size * i // pieces for i in range(pieces + 1)]
        split += [RangeSpec(piece.stream, piece.topic, piece.partition, bounds[i], bounds[i + 1],
                            piece.from_earliest and i == 0) for i in range(pieces)]
    return split


def discover(options: ReadOptions) -> offs.Discovered:
    """The partitions of the query's topics and their bounds (in a cluster, each partition's
    from its leader)."""
    connection = options.connection
    cluster = cluster_of(connection)
    if cluster is None:
        try:
            return with_client(connection, lambda client: offs.discover(
                client, options.stream, options.topics))
        except REFUSED as error:
            raise not_a_cluster_read(connection, error) from None

    def bounds_of(stream: str, topic: str, partition: int) -> offs.Bounds:
        reply = cluster.on_leader(stream, topic, partition, lambda client: (
            client.poll_messages_columnar(stream, topic, partition, 0, 0)))
        return offs.Bounds(reply.first_offset, reply.next_offset)

    return cluster.on_any(lambda client: offs.discover(
        client, options.stream, options.topics, bounds_of))


def at_timestamp(options: ReadOptions, found: offs.Discovered) -> offs.Offsets:
    cluster = cluster_of(options.connection)
    if cluster is None:
        return with_client(options.connection, lambda client: offs.at_timestamp(
            client, found, options.starting_timestamp_us))
    return cluster.on_any(lambda client: offs.at_timestamp(
        client, found, options.starting_timestamp_us))


def _read(options: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The partition's range; after a lost link, the rest of it (from the offset after the
    last row handed to Spark), so a server restart neither fails the task nor repeats a row."""
    spec: RangeSpec | None = partition.value
    if spec is None:  # Spark plans one empty partition when partitions() returned none
        return
    cluster = cluster_of(options.connection)
    if cluster is not None:
        yield from _read_from_leaders(cluster, options, spec)
        return
    started, lost = time.monotonic(), 0
    while True:
        try:
            for batch in read_range(connect(options.connection), spec, options.typed_headers,
                                    options.fetch_max_messages, options.fetch_max_bytes,
                                    options.fail_on_data_loss):
                yield batch
                lost = 0
                if batch.num_rows:
                    spec = replace(spec, start=batch.column("offset")[-1].as_py() + 1,
                                   from_earliest=False)
            return
        except (errors.Disconnected, errors.CannotEstablishConnection) as error:
            lost += 1
            link_lost(options.connection, error, lost, started)
        except REFUSED as error:
            raise not_a_cluster_read(options.connection, error) from None


def _read_from_leaders(cluster, options: ReadOptions, spec: RangeSpec
                       ) -> Iterator[pa.RecordBatch]:
    """``_read`` on a cluster: from the partition's leader; after a refusal or a lost leader,
    the rest of the range from the leader the map names next (``leaders.Attempts``)."""
    attempts = cluster.attempts(f"{spec.stream}/{spec.topic} partition {spec.partition}")
    while True:
        try:
            attempts.address, client = cluster.leader(spec.stream, spec.topic, spec.partition)
            for batch in read_range(client, spec, options.typed_headers,
                                    options.fetch_max_messages, options.fetch_max_bytes,
                                    options.fail_on_data_loss):
                yield batch
                attempts.progressed()
                if batch.num_rows:
                    spec = replace(spec, start=batch.column("offset")[-1].as_py() + 1,
                                   from_earliest=False)
            return
        except RETRIED as error:
            attempts.failed(error)


class RillBatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        found = discover(options)
        if options.starting_timestamp_us is not None:
            start = at_timestamp(options, found)
        else:
            start = offs.resolve(options.starting, found, "startingOffsets", offs.EARLIEST)
        end = offs.clamp_ending(
            offs.resolve(options.ending, found, "endingOffsets", offs.LATEST), found)
        return [InputPartition(spec) for spec in plan_ranges(start, end, options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class RillStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._latest: offs.Offsets | None = None  # last seen, for reportLatestOffset
        self._target: offs.Offsets | None = None  # Trigger.AvailableNow: never read past it

    def _discover(self) -> offs.Discovered:
        return discover(self.options)

    def initialOffset(self) -> dict:
        options = self.options
        found = self._discover()
        if options.starting_timestamp_us is not None:
            return at_timestamp(options, found)
        return offs.resolve(options.starting, found, "startingOffsets", offs.EARLIEST)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = offs.latest(self._discover())

    def reportLatestOffset(self) -> dict | None:
        return self._latest

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        found = self._discover()
        self._latest = offs.latest(found)
        for key, parts in start.items():
            for partition in parts:
                if partition not in found.get(key, {}) and self.options.fail_on_data_loss:
                    raise RillDataLossError(
                        f"{key} partition {partition} was deleted while the query read it; set "
                        "option failOnDataLoss=false to go on without it")
        begin: dict[tuple[str, str], int] = {}
        end: dict[tuple[str, str], int] = {}
        for key, parts in found.items():
            for partition, bounds in parts.items():
                cap = bounds.next
                if self._target is not None:
                    cap = min(cap, self._target.get(key, {}).get(partition, 0))
                previous = start.get(key, {}).get(partition)
                first = bounds.first if previous is None else previous
                begin[key, partition] = first
                end[key, partition] = max(cap, first)
        self._admit(begin, end, limit)
        result: offs.Offsets = {}
        for (key, partition), stop in end.items():
            if stop > begin[key, partition] or partition in start.get(key, {}):
                result.setdefault(key, {})[partition] = stop
        return offs.canonical(result)

    def _admit(self, begin: dict, end: dict, limit: ReadLimit) -> None:
        """Admission control: cut ``end`` to ``maxOffsetsPerTrigger`` rows, split across
        partitions in proportion to their backlog; hold it at ``begin`` below
        ``minOffsetsPerTrigger`` (not under Trigger.AvailableNow, which must finish)."""
        if isinstance(limit, ReadAllAvailable):
            return
        backlog = {name: end[name] - begin[name] for name in end}
        total = sum(backlog.values())
        minimum = limit.min_rows if isinstance(limit, ReadMinRows) else (
            self.options.min_offsets_per_trigger)
        if minimum and self._target is None and total < minimum:
            end.update(begin)
            return
        maximum = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if maximum is None or total <= maximum:
            return
        shares = {name: maximum * lag // total for name, lag in backlog.items()}
        spare = maximum - sum(shares.values())
        by_remainder = sorted(backlog, key=lambda name: (-(maximum * backlog[name] % total), name))
        for name in by_remainder[:spare]:
            shares[name] += 1
        for name, share in shares.items():
            end[name] = begin[name] + share

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return [InputPartition(spec)
                for spec in plan_ranges(start, end, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict) -> None:
        name = self.options.consumer_name
        if not name:
            return
        for key, parts in end.items():
            stream, topic = offs.split_key(key)
            for partition, stop in parts.items():
                if stop <= 0:
                    continue
                try:
                    connect(self.options.connection).store_consumer_offset(
                        stream, topic, stop - 1, consumer=Consumer.regular(name),
                        partition_id=int(partition))
                except (errors.RillError, RillConnectionError) as error:  # monitoring only:
                    # never fail the query
                    log.warning("cannot store consumer offset %s for %s/%s: %s",
                                stop - 1, key, partition, error)
