"""The reference pipeline (examples/clickstream) end to end on a small input: click events in
rill -> windowed counts per page with a watermark -> rill (exactly once) and Parquet."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "examples" / "clickstream"
sys.path.insert(0, str(EXAMPLE))

import job  # noqa: E402
import producer  # noqa: E402


def test_the_clickstream_pipeline(spark, admin, stream, options, tmp_path) -> None:
    admin.create_topic(stream, "clicks", partitions_count=3)
    admin.create_topic(stream, "page_counts", partitions_count=2)
    sent = producer.events(1200, step_ms=50)  # 60 s of clicks
    producer.produce(admin, stream, "clicks", sent)
    queries = job.start(spark, options, str(tmp_path / "checkpoint"), str(tmp_path / "parquet"),
                        available_now=True)
    for query in queries:
        query.awaitTermination(180)
        assert query.exception() is None
    last = datetime.fromisoformat(sent[-1]["ts"].replace("Z", "+00:00"))
    # a window is final once the watermark (latest event time - 5 s) has passed its end
    expected = producer.expected_counts(sent, 10, complete_before=last - timedelta(seconds=5))
    assert len(expected) == 25 and sum(expected.values()) == 1000  # 5 windows x 5 pages

    parquet = spark.read.parquet(str(tmp_path / "parquet")).collect()
    assert {(r.window_start, r.page): r["count"] for r in parquet} == dict(expected)
    assert len(parquet) == len(expected)

    rows = spark.read.format("rill").options(**options, topic="page_counts").load().collect()
    from_rill = {}
    for row in rows:
        window = json.loads(row.value)
        start = datetime.fromisoformat(window["window_start"].replace("Z", "+00:00"))
        from_rill[start.astimezone(timezone.utc).replace(tzinfo=None), window["page"]] = \
            window["count"]
        assert row.key == window["page"].encode()
    assert from_rill == dict(expected) and len(rows) == len(expected)
