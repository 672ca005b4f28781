"""Spark connector throughput, side by side with Parquet in the same run.

Starts a rill server (fsync interval) in a temporary directory and a local Spark
(``--master``, default local[2]), sends ``--rows`` messages of ``--size`` bytes to a topic of
2 partitions, then measures, ``--runs`` times each:

* read:  rill topic -> DataFrame -> Spark's ``noop`` sink, and the same rows from Parquet;
  by the Python data source and, when its jar is built (``pyspark_rill/java/build.sh``), by
  the JVM implementation too (the session is built with ``pyspark_rill.configure``);
* write: a cached DataFrame of the same rows -> a rill topic with ``sinkMode=exactlyOnce``
  (by each implementation), and -> Parquet (each write path is warmed up first, as the
  reads are: one untimed write of the rows);
* with ``--kafka``, also a Kafka-format topic of the same rows, written by confluent-kafka
  through rill's Kafka listener, read by each implementation -> ``noop`` (the ratio to the
  Iggy-format read says what the Kafka format costs);
* with ``--ceiling``, also the Python data source ceiling: a data source that yields
  ready-made Arrow batches of rill's read schema (same rows, same batch size, 2 partitions,
  no I/O, no conversion) -> ``noop``, i.e. what Spark itself spends taking Arrow batches in
  from a Python data source; rill's read can approach it, not beat it.

Prints rows/s per run, the medians and the rill/Parquet ratios. Both sides pay the same
Spark job overhead; the wall time of each job is measured from the driver. On a shared
machine wall times swing with the load, so the CPU time each job took is printed too: of
Spark's JVM (driver and executors, ``local`` mode, with its Python workers) and of the rill
server, in CPU-seconds
per million rows (medians), which the load does not change much.

    python benchmarks/spark_read_write.py [--rows 1000000] [--size 100] [--runs 5] [--ceiling]
                                          [--kafka] [--jobs read,write]
                                          [--implementations python,jvm]

``--jobs write`` measures the writes only (and Parquet's), ``--implementations jvm`` the JVM
implementation only: the figures of one job are comparable with a full run's (each job runs
alone, one after the other, either way).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future

import psutil

import pyspark_rill
import pyspark_rill.session
from rill.client import Client, Message, Partitioning
from rill.protocol.iggy.messages import encode_messages

CEILING_BATCH_ROWS = 32768  # the connector's default fetchMaxMessages


def ceiling_source():
    """The ceiling data source (defined here, so cloudpickle ships it to the workers)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class CeilingReader(DataSourceReader):
        def __init__(self, rows: int, size: int) -> None:
            self.rows, self.size = rows, size

        def partitions(self):
            return [InputPartition(0), InputPartition(1)]

        def read(self, partition):
            import pyarrow as pa
            from pyspark_rill.schema import arrow_schema

            count = CEILING_BATCH_ROWS
            columns = [
                pa.repeat(pa.scalar("bench"), count), pa.repeat(pa.scalar("source"), count),
                pa.repeat(pa.scalar(1, pa.int32()), count), pa.array(range(count), pa.int64()),
                pa.Array.from_buffers(pa.binary(16), count, [None, pa.py_buffer(
                    bytes(16 * count))]).cast(pa.binary()),
                pa.array(range(count), pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                pa.nulls(count, pa.binary()),
                pa.Array.from_buffers(pa.binary(self.size), count, [None, pa.py_buffer(
                    b"x" * (self.size * count))]).cast(pa.binary()),
                pa.nulls(count, pa.map_(pa.string(), pa.binary())),
            ]
            batch = pa.RecordBatch.from_arrays(columns, schema=arrow_schema(False))
            left = self.rows // 2 + (self.rows % 2 if partition.value == 0 else 0)
            while left > 0:
                yield batch if left >= count else batch.slice(0, left)
                left -= count

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rill_ceiling"

        def schema(self) -> str:
            from pyspark_rill.schema import read_ddl

            return read_ddl(False)

        def reader(self, schema):
            return CeilingReader(int(self.options["rows"]), int(self.options["size"]))

    return CeilingSource


def start_server(data_dir: str, kafka: bool) -> tuple[subprocess.Popen[str], str, str | None]:
    """The server, its TCP address and (with ``kafka``) its Kafka listener's address."""
    env = dict(os.environ, RILL_SYSTEM_FSYNC="interval", RILL_LOGGING_LEVEL="warning")
    if kafka:
        env.update(RILL_KAFKA_ENABLED="true", RILL_KAFKA_ADDRESS="127.0.0.1:0",
                   RILL_KAFKA_ANONYMOUS_USER="iggy")
    process = subprocess.Popen(
        [sys.executable, "-m", "rill", "serve", "--data-dir", data_dir, "--tcp-address",
         "127.0.0.1:0", "--quic-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0"],
        stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    tcp = kafka_address = None
    for line in process.stdout:
        if line.startswith("rill listening on tcp "):
            tcp = line.split()[-1]
        elif line.startswith("rill listening on kafka "):
            kafka_address = line.split()[-1]
        if tcp and (kafka_address or not kafka):
            return process, tcp, kafka_address
    raise RuntimeError("server did not start")


def fill_kafka(address: str, rows: int, size: int) -> None:
    """The same rows in a Kafka-format topic ``kafka-source`` (stream ``kafka``), written by
    confluent-kafka: the stored RecordBatch v2 bytes are the client's."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": address})
    for future in admin.create_topics([NewTopic("kafka-source", num_partitions=2,
                                                replication_factor=1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": address, "linger.ms": 20, "acks": "1",
                         "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000})
    for index in range(rows):
        while True:
            try:
                producer.produce("kafka-source", f"{index:0{size}d}".encode()[:size],
                                 partition=index % 2)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def fill(client: Client, rows: int, size: int) -> None:
    """``rows`` distinct messages of ``size`` bytes, half in each partition."""
    client.create_stream("bench")
    client.create_topic("bench", "source", partitions_count=2)
    batch = 10_000
    pending: list[Future] = []
    for start in range(0, rows, batch):
        count = min(batch, rows - start)
        region = encode_messages(
            Message(f"{start + i:0{size}d}".encode()[:size]) for i in range(count))
        pending.append(client.submit(client.async_client.send_messages_raw(
            "bench", "source", Partitioning.partition_id(start // batch % 2 + 1), region)))
        if len(pending) > 8:
            pending.pop(0).result()
    for future in pending:
        future.result()


CPU: dict[str, list[float]] = {}  # job name -> CPU-seconds of (Spark's JVM + the server) per run
PROCESSES: dict[str, psutil.Process] = {}  # "spark", "server"


def cpu_seconds(name: str) -> float:
    """CPU-seconds of a process and of its descendants (Spark's Python workers are the JVM's),
    the exited ones included once reaped."""
    total = 0.0
    root = PROCESSES[name]
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def timed(action, name: str = "") -> float:
    """Wall seconds of ``action``; its CPU-seconds (JVM, server) are kept under ``name``."""
    before = {key: cpu_seconds(key) for key in PROCESSES}
    started = time.perf_counter()
    action()
    wall = time.perf_counter() - started
    if name:
        CPU.setdefault(name, []).append(tuple(cpu_seconds(key) - before[key] for key in PROCESSES))
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--kafka", action="store_true",
                        help="also read a Kafka-format topic written by confluent-kafka")
    parser.add_argument("--ceiling", action="store_true",
                        help="also measure the Python data source ceiling (see above)")
    parser.add_argument("--jobs", default="read,write",
                        help="which jobs to time: read, write or both (comma-separated)")
    parser.add_argument("--implementations", default="python,jvm",
                        help="which implementations to time: python, jvm or both")
    args = parser.parse_args()
    args.jobs = {job.strip() for job in args.jobs.split(",")}
    args.implementations = [name.strip() for name in args.implementations.split(",")]
    from pyspark.sql import SparkSession

    with tempfile.TemporaryDirectory(prefix="rill-spark-bench-") as work:
        server, address, kafka_address = start_server(os.path.join(work, "data"), args.kafka)
        try:
            with Client(address) as client:
                client.login_user("iggy", "iggy")
                started = time.perf_counter()
                fill(client, args.rows, args.size)
                print(f"sent {args.rows} messages of {args.size} B in "
                      f"{time.perf_counter() - started:.1f} s")
                if kafka_address:
                    started = time.perf_counter()
                    fill_kafka(kafka_address, args.rows, args.size)
                    print(f"sent them to a Kafka-format topic in "
                          f"{time.perf_counter() - started:.1f} s")
                builder = (SparkSession.builder.master(args.master).appName("rill-spark-bench")
                           .config("spark.ui.enabled", "false")
                           .config("spark.sql.shuffle.partitions", "2"))
                spark = pyspark_rill.configure(builder, loopback=True).getOrCreate()
                spark.sparkContext.setLogLevel("ERROR")
                PROCESSES["spark"] = next(child for child in psutil.Process().children(recursive=True)
                                          if child.name() == "java")
                PROCESSES["server"] = psutil.Process(server.pid)
                options = {"servers": address, "username": "iggy", "password": "iggy",
                           "stream": "bench"}
                results = run(spark, client, options, work, args)
                spark.stop()
        finally:
            server.terminate()
            server.wait(30)
    report(results, args.rows)


def run(spark, client: Client, options: dict, work: str, args) -> dict[str, list[float]]:
    implementations = [name for name in ("python", "jvm") if name in args.implementations
                       and (name == "python" or pyspark_rill.session.jvm_jar())]
    reads, writes = "read" in args.jobs, "write" in args.jobs
    sources = {name: spark.read.format("rill").options(**options, topic="source",
                                                        implementation=name)
               for name in implementations}
    kafka = {name: spark.read.format("rill").options(**{**options, "stream": "kafka"},
                                                      topic="kafka-source", implementation=name)
             for name in implementations} if args.kafka else {}
    parquet_path = os.path.join(work, "rows.parquet")
    for source in sources.values():  # warm-up too
        source.load().select("value").write.mode("overwrite").parquet(parquet_path)
    for source in kafka.values():
        assert source.load().count() == args.rows
    frame = spark.read.parquet(parquet_path).cache()
    assert frame.count() == args.rows
    if writes:  # warm-up of each write path too (the Parquet one was warmed above)
        for name in implementations:
            client.create_topic("bench", "warm-up", partitions_count=2)
            write_rill(frame, options, "warm-up", name)
            client.delete_topic("bench", "warm-up")
    results: dict[str, list[float]] = {name: [] for name in (
        *((*(f"read rill {name} -> noop" for name in implementations),
           *(f"read kafka-format {name} -> noop" for name in kafka), "read parquet -> noop")
          if reads else ()),
        *((*(f"write -> rill {name} exactlyOnce" for name in implementations),
           "write -> parquet") if writes else ()))}
    if args.ceiling:
        spark.dataSource.register(ceiling_source())
        ceiling = spark.read.format("rill_ceiling").options(rows=args.rows, size=args.size)
        ceiling.load().write.format("noop").mode("overwrite").save()  # warm-up
        results["read ceiling -> noop"] = []
    for number in range(args.runs):
        for name, source in (sources if reads else {}).items():
            results[f"read rill {name} -> noop"].append(timed(
                lambda: source.load().write.format("noop").mode("overwrite").save(),
                f"read rill {name} -> noop"))
        for name, source in (kafka if reads else {}).items():
            results[f"read kafka-format {name} -> noop"].append(timed(
                lambda: source.load().write.format("noop").mode("overwrite").save(),
                f"read kafka-format {name} -> noop"))
        if args.ceiling and reads:
            results["read ceiling -> noop"].append(timed(
                lambda: ceiling.load().write.format("noop").mode("overwrite").save()))
        if reads:
            results["read parquet -> noop"].append(timed(
                lambda: spark.read.parquet(parquet_path).write.format("noop").mode("overwrite")
                .save(), "read parquet -> noop"))
        for name in implementations if writes else ():
            topic = f"sink-{name}-{number}"
            client.create_topic("bench", topic, partitions_count=2)
            results[f"write -> rill {name} exactlyOnce"].append(timed(
                lambda: write_rill(frame, options, topic, name),
                f"write -> rill {name} exactlyOnce"))
            assert client.get_topic("bench", topic).topic.messages_count == args.rows
            client.delete_topic("bench", topic)
        if writes:
            results["write -> parquet"].append(timed(
                lambda: frame.write.mode("overwrite").parquet(os.path.join(work, "out.parquet")),
                "write -> parquet"))
        print(f"run {number + 1}: " + ", ".join(
            f"{name} {args.rows / seconds[-1] / 1e6:.2f}M rows/s"
            for name, seconds in results.items()), flush=True)
    return results


def write_rill(frame, options: dict, topic: str, implementation: str) -> None:
    frame.write.format("rill").options(**options, topic=topic, sinkMode="exactlyOnce",
                                       implementation=implementation).mode("append").save()


def report(results: dict[str, list[float]], rows: int) -> None:
    median = {name: rows / statistics.median(seconds) for name, seconds in results.items()}
    print("\nmedian rows/s:")
    for name, rate in median.items():
        print(f"  {name:28s} {rate / 1e6:6.2f}M rows/s")
    for name in ("python", "jvm"):
        if f"read rill {name} -> noop" in median and "read parquet -> noop" in median:
            print(f"  read  rill {name:6s}/parquet ratio "
                  f"{median[f'read rill {name} -> noop'] / median['read parquet -> noop']:.2f}")
        if f"write -> rill {name} exactlyOnce" in median:
            print(f"  write rill {name:6s}/parquet ratio "
                  f"{median[f'write -> rill {name} exactlyOnce'] / median['write -> parquet']:.2f}")
        if f"read kafka-format {name} -> noop" in median:
            print(f"  read  kafka-format/iggy-format {name:6s} ratio "
                  f"{median[f'read kafka-format {name} -> noop'] / median[f'read rill {name} -> noop']:.2f}")
    print("\nmedian CPU-seconds per million rows (Spark's JVM + the rill server):")
    for name, samples in CPU.items():
        jvm = statistics.median(sample[0] for sample in samples) * 1e6 / rows
        server = statistics.median(sample[1] for sample in samples) * 1e6 / rows
        print(f"  {name:34s} {jvm:5.2f} + {server:5.2f} = {jvm + server:5.2f}")
    if "read ceiling -> noop" in median and "read rill python -> noop" in median:
        print(f"  read  rill/ceiling ratio     "
              f"{median['read rill python -> noop'] / median['read ceiling -> noop']:.2f}")


if __name__ == "__main__":
    main()
