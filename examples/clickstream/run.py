"""The reference pipeline in one command: rill server, click producer, streaming job, results.

    python examples/clickstream/run.py                 # starts its own rill server
    python examples/clickstream/run.py --servers HOST:PORT   # or uses yours (user iggy/iggy)

It starts a throw-away rill server (unless ``--servers`` is given), creates stream
``analytics`` with topics ``clicks`` and ``page_counts``, sends ``--events`` click events,
runs the job of ``job.py`` on a local Spark with Trigger.AvailableNow (so it stops when the
input is consumed), and prints the per-page window counts from both sinks.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).parent))

import job  # noqa: E402
import producer  # noqa: E402
from rill import errors  # noqa: E402
from rill.client import Client  # noqa: E402


@contextmanager
def local_server(data_dir: Path) -> Iterator[str]:
    """A rill server on a free port (QUIC and HTTP on free ports too) until the block ends."""
    command = [sys.executable, "-m", "rill", "serve", "--data-dir", str(data_dir),
               "--tcp-address", "127.0.0.1:0", "--quic-address", "127.0.0.1:0",
               "--http-address", "127.0.0.1:0"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in server.stdout:
            if line.startswith("rill listening on tcp "):
                yield line.split()[-1]
                break
        else:
            raise RuntimeError("rill did not start")
    finally:
        server.terminate()
        server.wait(30)


def prepare(servers: str, stream: str, events: int) -> list[dict]:
    with Client(servers) as client:
        client.login_user("iggy", "iggy")
        for make in (lambda: client.create_stream(stream),
                     lambda: client.create_topic(stream, "clicks", partitions_count=3),
                     lambda: client.create_topic(stream, "page_counts", partitions_count=3)):
            try:
                make()
            except (errors.StreamNameAlreadyExists, errors.TopicNameAlreadyExists):
                pass
        sent = producer.events(events)
        producer.produce(client, stream, "clicks", sent)
    return sent


def run(servers: str, work: Path, events: int) -> None:
    from pyspark.sql import SparkSession

    prepare(servers, "analytics", events)
    spark = (SparkSession.builder.master("local[2]").appName("rill-clickstream")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    options = {"servers": servers, "username": "iggy", "password": "iggy", "stream": "analytics"}
    for query in job.start(spark, options, str(work / "checkpoint"), str(work / "parquet"),
                           available_now=True):
        query.awaitTermination()
    parquet = spark.read.parquet(str(work / "parquet")).orderBy("window_start", "page")
    print(f"{parquet.count()} finished windows in Parquet ({work / 'parquet'}); the first:")
    parquet.show(10, truncate=False)
    rows = spark.read.format("rill").options(**options, topic="page_counts").load().collect()
    print(f"{len(rows)} windows in rill analytics/page_counts, e.g. "
          f"{json.loads(rows[0].value) if rows else None}")
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", help="an existing rill server (default: start one)")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--work-dir", type=Path, help="checkpoints and Parquet output")
    args = parser.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="rill-clickstream-"))
    if args.servers:
        run(args.servers, work, args.events)
        return
    with local_server(work / "rill-data") as servers:
        run(servers, work, args.events)


if __name__ == "__main__":
    main()
