"""The workload of the fault runs: Kafka (and Iggy and TANK) producers of unique values and
consumers in a group with commits, each recording what it did into one history for
``logcheck``; then the final drain of every partition from its leader and the dump of every
replica's log.

``History`` writes the JSON lines of ``logcheck``'s schema (its docstring). A producer's
value is ``"<process>-<n>"``, unique in the run; ``key`` is the Kafka partition. A send
is ``ok`` with its offset once the client reports it acknowledged, ``info`` on any error:
after a client's own retries an error never proves that no attempt was written (a timeout,
a lost link, NOT_ENOUGH_REPLICAS_AFTER_APPEND), so none counts as ``fail`` -- but for TANK's
refusals before writing (0xfc, 0xfd, 0x04): a TANK produce is one attempt. A consumer's
session starts at each assignment (``assign`` ok); each poll is recorded in the order the
client handed the records out, and the next offset of each partition it read is committed
after it (``commit`` ok; ``fail`` when the group refused it: CommitFailedError).

Clients log in by SASL PLAIN as the root user (anonymous Kafka is loopback-only).

``Workload`` runs them all (threads: the clients block) against a ``harness.LocalCluster``
or any bootstrap list; ``final_read`` and ``dump_replicas`` collect the rest for ``logcheck``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

USER, PASSWORD = "iggy", "iggy"
BATCH_WAIT = 75.0  # seconds a producer waits for a batch's answers (its sends then count info)
# seconds a client waits for one answer (every client the same: kafka-python's
# request_timeout_ms, librdkafka's request.timeout.ms and socket.timeout.ms, the Iggy and TANK
# producers' own): after it, a request to a leader that was cut off is given up
REQUEST_WAIT = 10.0


class History:
    """A thread-safe JSON-lines recorder (``logcheck``'s schema); ``time`` is monotonic
    seconds since the history began, the clock the nemesis also reads (``now()``)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file = open(self.path, "w")  # noqa: SIM115 -- open for the run, closed by close()
        self._lock = threading.Lock()
        self.start = time.monotonic()
        self.acks: list[tuple[float, int, float]] = []  # acknowledged sends: (time, partition, invoked)
        self._invoked: dict[Any, float] = {}  # value -> when its send was invoked

    def now(self) -> float:
        return time.monotonic() - self.start

    def record(self, process: Any, kind: str, f: str, **fields: Any) -> None:
        op = {"process": process, "type": kind, "f": f, **fields, "time": round(self.now(), 6)}
        line = json.dumps(op) + "\n"
        with self._lock:
            if f == "send" and kind == "invoke":
                self._invoked[fields["value"]] = op["time"]
            elif f == "send" and kind == "ok":
                self.acks.append((op["time"], fields["key"], self._invoked.pop(fields["value"], 0.0)))
            if not self._file.closed:
                self._file.write(line)

    def note(self, text: str) -> None:
        """A comment line (a nemesis event), skipped by the checker."""
        with self._lock:
            if not self._file.closed:
                self._file.write(f"# {self.now():.6f} {text}\n")

    def first_ack_after(self, moment: float, partitions: Iterable[int]) -> float | None:
        """The time of the first acknowledged send to one of ``partitions`` invoked after
        ``moment`` (an answer the old leader sent just before a fault can reach the client
        after it: only a send begun after the fault proves a leader acknowledges)."""
        wanted = set(partitions)
        with self._lock:
            return next((at for at, key, invoked in self.acks if invoked > moment and key in wanted),
                        None)

    def close(self) -> None:
        with self._lock:
            self._file.close()


def kafka_python_config(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap_servers": bootstrap.split(","), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": USER, "sasl_plain_password": PASSWORD,
            "request_timeout_ms": int(REQUEST_WAIT * 1000), "reconnect_backoff_ms": 50,
            "reconnect_backoff_max_ms": 500, "retry_backoff_ms": 100, "metadata_max_age_ms": 5_000}


def confluent_config(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": USER, "sasl.password": PASSWORD,
            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500, "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 5_000,
            # (librdkafka's defaults wait 30 s for a produce answer and 60 s on a silent
            # socket: a leader cut off would hold it that long)
            "socket.timeout.ms": int(REQUEST_WAIT * 1000)}


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(**kafka_python_config(bootstrap))
    try:
        admin.create_topics([NewTopic(topic, partitions, replication)])
    finally:
        admin.close()


def leaders(bootstrap: str, topic: str) -> tuple[dict[int, int], int]:
    """Each partition's leader node id, and the controller's, as Metadata tells them."""
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient(confluent_config(bootstrap)).list_topics(topic, timeout=10)
    return ({partition: found.leader for partition, found in metadata.topics[topic].partitions.items()},
            metadata.controller_id)


class Client(threading.Thread):
    """One client of the workload in a thread of its own until ``stop`` is set."""

    def __init__(self, process: str, bootstrap: str, topic: str, partitions: int, history: History,
                 stop: threading.Event) -> None:
        super().__init__(name=f"workload-{process}", daemon=True)
        self.process, self.bootstrap, self.topic, self.partitions = process, bootstrap, topic, partitions
        self.history, self.stop = history, stop
        self.error: BaseException | None = None  # what ended it early (a bug of the workload)
        self.trace = ""

    def run(self) -> None:
        try:
            self.work()
        except BaseException as error:  # noqa: BLE001 -- kept for the test to report
            self.error = error
            self.trace = traceback.format_exc()


class KafkaPythonProducer(Client):
    """kafka-python, ``acks=all``, idempotent unless told otherwise; ``batch`` sends in flight
    at most (then it waits for them)."""

    def __init__(self, *args: Any, idempotent: bool = True, batch: int = 20, **options: Any) -> None:
        super().__init__(*args, **options)
        self.idempotent, self.batch = idempotent, batch

    def work(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(**kafka_python_config(self.bootstrap), acks="all",
                                 enable_idempotence=self.idempotent, linger_ms=2,
                                 delivery_timeout_ms=60_000, max_block_ms=30_000)
        number = 0
        try:
            while not self.stop.is_set():
                futures = []
                for _ in range(self.batch):
                    value, partition = f"{self.process}-{number}", number % self.partitions
                    number += 1
                    self.history.record(self.process, "invoke", "send", key=partition, value=value)
                    futures.append((value, partition, producer.send(
                        self.topic, value=value.encode(), partition=partition)))
                failed, deadline = 0, time.monotonic() + BATCH_WAIT
                for value, partition, future in futures:
                    try:
                        metadata = future.get(timeout=max(0.1, deadline - time.monotonic()))
                    except Exception as error:  # noqa: BLE001 -- any error: outcome unknown
                        failed += 1
                        self.history.record(self.process, "info", "send", key=partition, value=value,
                                            error=repr(error)[:200])
                    else:
                        self.history.record(self.process, "ok", "send", key=metadata.partition,
                                            value=value, offset=metadata.offset)
                if failed == len(futures):
                    self.stop.wait(0.2)  # refused at once (e.g. InitProducerId): no busy loop
        finally:
            # sends still unanswered at the stop stay "invoke" only: outcome unknown. The close
            # outlasts delivery_timeout_ms (each record is answered or expired by then): a
            # close whose flush timed out raises before stopping the producer's I/O thread,
            # which would go on in this process (logging into later tests) for ever.
            producer.close(timeout=75)


class ConfluentProducer(Client):
    """confluent-kafka (librdkafka), ``acks=all``, idempotent unless told otherwise."""

    def __init__(self, *args: Any, idempotent: bool = True, batch: int = 20, **options: Any) -> None:
        super().__init__(*args, **options)
        self.idempotent, self.batch = idempotent, batch

    def work(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({**confluent_config(self.bootstrap), "acks": "all",
                             "enable.idempotence": self.idempotent, "linger.ms": 2,
                             "message.timeout.ms": 60_000,
                             "request.timeout.ms": int(REQUEST_WAIT * 1000)})
        number = 0

        def delivered(error: Any, message: Any) -> None:
            value = partition = None
            try:
                value, partition = message.value().decode(), message.partition()
                if error is None:
                    self.history.record(self.process, "ok", "send", key=partition, value=value,
                                        offset=message.offset())
                else:
                    self.history.record(self.process, "info", "send", key=partition, value=value,
                                        error=str(error)[:200])
            except Exception as problem:  # noqa: BLE001 -- seen under faults: the binding left
                # an exception set (SystemError at the next C call); the outcome is unknown
                if value is None:
                    value, partition = message.value().decode(), message.partition()
                self.history.record(self.process, "info", "send", key=partition, value=value,
                                    error=f"delivery callback: {problem!r}"[:200])

        while not self.stop.is_set():
            for _ in range(self.batch):
                value, partition = f"{self.process}-{number}", number % self.partitions
                number += 1
                self.history.record(self.process, "invoke", "send", key=partition, value=value)
                producer.produce(self.topic, value=value.encode(), partition=partition,
                                 on_delivery=delivered)
            producer.flush(BATCH_WAIT)
        producer.flush(30)


class IggyProducer(Client):
    """rill's own SDK over Iggy's TCP protocol to any node (a node that does not lead the
    partition proxies the SEND to its leader; a SEND on a replicated topic is acknowledged
    once the ISR holds it): each SEND is ``batch`` values to one partition of the Kafka
    topic's stream, all ``ok`` together or all ``info`` (no offsets: a SEND answers none).
    On any error it goes on through the next node."""

    def __init__(self, *args: Any, nodes: list[str], stream: str = "kafka", batch: int = 20,
                 **options: Any) -> None:
        super().__init__(*args, **options)
        self.nodes, self.stream, self.batch = nodes, stream, batch

    def work(self) -> None:
        from rill.client import Client as RillClient

        number, turn = 0, 0
        client: Any = None
        while not self.stop.is_set():
            if client is None:
                address = self.nodes[turn % len(self.nodes)]
                turn += 1
                try:
                    client = RillClient(address, reconnect=False, timeout=REQUEST_WAIT)
                    client.connect()
                    client.login_user(USER, PASSWORD)
                except Exception:  # noqa: BLE001 -- that node is down: the next one
                    if client is not None:
                        client.close()
                    client = None
                    time.sleep(0.2)
                    continue
            partition = number // self.batch % self.partitions
            values = [f"{self.process}-{number + n}" for n in range(self.batch)]
            number += self.batch
            for value in values:
                self.history.record(self.process, "invoke", "send", key=partition, value=value)
            try:
                client.send_messages(self.stream, self.topic, [value.encode() for value in values],
                                     partitioning=partition + 1)
            except Exception as error:  # noqa: BLE001 -- whether it landed is unknown
                for value in values:
                    self.history.record(self.process, "info", "send", key=partition, value=value,
                                        error=repr(error)[:200])
                client.close()
                client = None
                continue
            for value in values:
                self.history.record(self.process, "ok", "send", key=partition, value=value)
        if client is not None:
            client.close()


class TankProducer(Client):
    """rill's TANK client (``nodes``: each node's TANK listener), one connection per node: each
    produce is one bundle of ``batch`` values to one partition, sent to the node that last
    acknowledged that partition, acknowledged once the ISR holds it. OK: ``ok`` (no offsets:
    TANK answers none). A refusal before anything was written -- 0xfc (another node leads),
    0xfd (no leader), 0x04 (the ISR below its minimum) -- is ``fail``: the checker then proves
    that none of them landed. 0x03 (not copied in time), 0x02, a lost link or no answer:
    ``info``. After any of these the partition's next produce goes to the next node."""

    REFUSED = frozenset({0x04, 0xFC, 0xFD})

    def __init__(self, *args: Any, nodes: list[str], batch: int = 20, **options: Any) -> None:
        super().__init__(*args, **options)
        self.nodes, self.batch = nodes, batch

    def work(self) -> None:
        import asyncio

        asyncio.run(self._work())

    async def _work(self) -> None:
        import asyncio

        from rill.client.tank import Batch, TankClient

        clients: dict[int, Any] = {}  # node index -> its connection
        target = dict.fromkeys(range(self.partitions), 0)  # partition -> node index to send to
        number = 0
        while not self.stop.is_set():
            partition = number // self.batch % self.partitions
            node = target[partition]
            if node not in clients:
                host, port = self.nodes[node].rsplit(":", 1)
                client = TankClient(host, int(port), client_id=self.process)
                try:
                    await asyncio.wait_for(client.connect(), 5)
                except (OSError, asyncio.TimeoutError):  # that node is down: the next one
                    await client.close()
                    target[partition] = (node + 1) % len(self.nodes)
                    await asyncio.sleep(0.1)
                    continue
                clients[node] = client
            values = [f"{self.process}-{number + n}" for n in range(self.batch)]
            number += self.batch
            for value in values:
                self.history.record(self.process, "invoke", "send", key=partition, value=value)
            code = None
            try:
                batch = Batch(self.topic, partition, [value.encode() for value in values])
                [(_, _, code)] = await asyncio.wait_for(
                    clients[node].produce_batches([batch]), REQUEST_WAIT)
            except Exception as error:  # noqa: BLE001 -- whether it landed is unknown
                kind, reason = "info", repr(error)[:200]
                await clients.pop(node).close()
            else:
                kind = "ok" if code == 0 else "fail" if code in self.REFUSED else "info"
                reason = f"TANK produce error 0x{code:02x}"
            for value in values:
                fields = {} if kind == "ok" else {"error": reason}
                self.history.record(self.process, kind, "send", key=partition, value=value,
                                    **fields)
            if kind != "ok":
                target[partition] = (node + 1) % len(self.nodes)
                if code != 0xFC:
                    await asyncio.sleep(0.1)  # no leader yet, the ISR short, a link lost
        for client in clients.values():
            await client.close()


class GroupConsumer(Client):
    """kafka-python in group ``group``, manual commits after each poll."""

    def __init__(self, *args: Any, group: str = "workload", **options: Any) -> None:
        super().__init__(*args, **options)
        self.group = group

    def work(self) -> None:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.errors import CommitFailedError
        from kafka.structs import OffsetAndMetadata

        history, process = self.history, self.process

        class Sessions(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                pass

            def on_partitions_assigned(self, assigned: Any) -> None:
                history.record(process, "ok", "assign", value=sorted(tp.partition for tp in assigned))

        consumer = KafkaConsumer(**kafka_python_config(self.bootstrap), group_id=self.group,
                                 enable_auto_commit=False, auto_offset_reset="earliest",
                                 session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
        consumer.subscribe([self.topic], listener=Sessions())
        try:
            while not self.stop.is_set():
                try:
                    batches = consumer.poll(timeout_ms=500)
                except Exception as error:  # noqa: BLE001 -- a fault: the client goes on
                    history.record(process, "info", "poll", error=repr(error)[:200])
                    continue
                if not batches:
                    continue
                records = [[message.partition, message.offset, message.value.decode()]
                           for messages in batches.values() for message in messages]
                history.record(process, "ok", "poll", value=records)
                offsets = {partition: messages[-1].offset + 1 for partition, messages in
                           ((tp.partition, messages) for tp, messages in batches.items())}
                history.record(process, "invoke", "commit", group=self.group, value=offsets)
                try:
                    consumer.commit({TopicPartition(self.topic, partition): OffsetAndMetadata(offset, "", -1)
                                     for partition, offset in offsets.items()})
                except CommitFailedError as error:
                    history.record(process, "fail", "commit", group=self.group, value=offsets,
                                   error=repr(error)[:200])
                except Exception as error:  # noqa: BLE001 -- unknown
                    history.record(process, "info", "commit", group=self.group, value=offsets,
                                   error=repr(error)[:200])
                else:
                    history.record(process, "ok", "commit", group=self.group, value=offsets)
        finally:
            consumer.close()


def final_read(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0
               ) -> dict[str, list[list[Any]]]:
    """Every partition read from its start to its end (the leader's high watermark)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(**kafka_python_config(bootstrap), enable_auto_commit=False,
                             group_id=None)
    try:
        assigned = [TopicPartition(topic, partition) for partition in range(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        ends = consumer.end_offsets(assigned)
        found: dict[str, list[list[Any]]] = {str(tp.partition): [] for tp in assigned}
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in assigned):
            if time.monotonic() > deadline:
                raise TimeoutError(f"final read of {topic} short of {ends}")
            for tp, messages in consumer.poll(timeout_ms=1000).items():
                found[str(tp.partition)].extend([m.offset, m.value.decode()] for m in messages)
        return found
    finally:
        consumer.close()


def dump_replicas(data_dirs: dict[str, Path], topic: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Every replica's log of ``topic``, read from each (stopped) node's data directory:
    ``{node: {partition: {"hw": int, "records": [[offset, value], ...]}}}`` (``logcheck``'s
    shape). The Kafka partition is the rill partition id less one. A replica without a stored
    high watermark (a standalone node) counts its whole log as committed."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for node, data_dir in data_dirs.items():
        found[node] = {}
        for topic_dir in Path(data_dir).glob("streams/*/topics/*"):
            manifest = json.loads((topic_dir / "topic.json").read_text())
            if manifest.get("name") != topic:
                continue
            for partition_dir in sorted((topic_dir / "partitions").iterdir()):
                if partition_dir.name.isdigit():
                    found[node][str(int(partition_dir.name) - 1)] = dump_partition(
                        partition_dir, manifest.get("record_format"))
    return found


def dump_partition(partition_dir: Path, record_format: str | None) -> dict[str, Any]:
    """One partition log's records and high watermark, read from a copy (opening a log may
    recover it: the node's own directory stays as it was)."""
    from kafka.record import MemoryRecords

    from rill.server.storage.checkpoints import read_high_watermark
    from rill.server.storage.durability import Durability
    from rill.server.storage.formats import kafka_v2
    from rill.server.storage.partition_log import LogSettings, PartitionLog

    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "partition"
        shutil.copytree(partition_dir, copy)
        settings = LogSettings(record_format=record_format or kafka_v2.NAME)
        log = PartitionLog.open(copy, settings, Durability("never"), clean_shutdown=False)
        try:
            records: list[list[Any]] = []
            offset, end = log.first_offset, log.next_offset
            while offset < end:
                if settings.record_format == kafka_v2.NAME:  # stored as Kafka batches
                    _count, chunks = log.read(offset, 1000)
                    data = b"".join(bytes(chunk) for chunk in chunks)
                else:
                    data = bytes(log.read_as(kafka_v2.NAME, offset, 1000).records)
                batches, after = MemoryRecords(data), offset
                while batches.has_next():
                    batch = batches.next_batch()
                    for record in batch:
                        if record.offset >= offset and record.value is not None:
                            records.append([record.offset, record.value.decode()])
                    after = max(after, batch.base_offset + batch.last_offset_delta + 1)
                if after == offset:
                    break
                offset = after
            stored = read_high_watermark(copy)
            return {"hw": end if stored is None else stored, "records": records}
        finally:
            log.close(sync=False)


class Workload:
    """Producers (kafka-python and confluent-kafka, acks=all, idempotent; with ``iggy_nodes``
    one more over Iggy's protocol, with ``tank_nodes`` one over TANK's) and group consumers on
    one topic, all recording into one ``History``; ``stop()`` ends and joins them."""

    def __init__(self, bootstrap: str, topic: str, history: History, partitions: int = 3,
                 producers: int = 3, consumers: int = 2, idempotent: bool = True,
                 iggy_nodes: list[str] | None = None, tank_nodes: list[str] | None = None) -> None:
        self.bootstrap, self.topic, self.history, self.partitions = bootstrap, topic, history, partitions
        self.stopping = threading.Event()
        common = (bootstrap, topic, partitions, history, self.stopping)
        kinds = (KafkaPythonProducer, ConfluentProducer)
        self.clients: list[Client] = [
            kinds[index % 2](f"p{index}", *common, idempotent=idempotent) for index in range(producers)]
        if iggy_nodes:  # one more producer, over Iggy's protocol
            self.clients.append(IggyProducer(f"p{len(self.clients)}", *common, nodes=iggy_nodes))
        if tank_nodes:  # and one over TANK's
            self.clients.append(TankProducer(f"p{len(self.clients)}", *common, nodes=tank_nodes))
        self.clients += [GroupConsumer(f"c{index}", *common) for index in range(consumers)]

    def start(self) -> Workload:
        for client in self.clients:
            client.start()
        return self

    def stop(self, timeout: float = BATCH_WAIT + 45) -> list[str]:
        """Stop and join every client; what went wrong with them (stuck, or ended by an
        exception: a bug of the workload, not of the server)."""
        self.stopping.set()
        for client in self.clients:
            client.join(timeout)
        return ([f"{client.name}: stuck" for client in self.clients if client.is_alive()]
                + [f"{client.name}: {client.error!r}\n{client.trace}" for client in self.clients
                   if client.error])
