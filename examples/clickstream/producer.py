"""Click-event producer of the reference pipeline: writes JSON click events into rill.

Each event is ``{"user": "u17", "page": "/pricing", "ts": "2024-05-01T12:00:03.250Z"}``, sent
with the page as the messages key (so one page's events stay in order in one partition).
Event times advance ``step_ms`` per event from ``start`` and are deterministic for a seed, so
tests can compute the expected window counts with ``expected_counts``.

usage: python producer.py [--servers HOST:PORT] [--events N] [--stream S] [--topic T]
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from datetime import datetime, timedelta, timezone

from rill.client import Client, Message, Partitioning

PAGES = ("/", "/pricing", "/docs", "/blog", "/signup")
START = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def events(count: int, step_ms: int = 50, seed: int = 7, start: datetime = START) -> list[dict]:
    generator = random.Random(seed)
    return [
        {"user": f"u{generator.randrange(100)}", "page": generator.choice(PAGES),
         "ts": (start + timedelta(milliseconds=i * step_ms)).isoformat(timespec="milliseconds")
         .replace("+00:00", "Z")}
        for i in range(count)
    ]


def expected_counts(sent: list[dict], window_seconds: int, complete_before: datetime
                    ) -> Counter:
    """(window start, page) -> clicks, for windows that end at or before ``complete_before``."""
    counts: Counter = Counter()
    for event in sent:
        moment = datetime.fromisoformat(event["ts"].replace("Z", "+00:00"))
        start = moment - timedelta(seconds=moment.timestamp() % window_seconds)
        if start + timedelta(seconds=window_seconds) <= complete_before:
            counts[start.replace(tzinfo=None), event["page"]] += 1
    return counts


def produce(client: Client, stream: str, topic: str, sent: list[dict], batch: int = 500) -> None:
    by_page: dict[str, list[Message]] = {}
    for event in sent:
        by_page.setdefault(event["page"], []).append(Message(json.dumps(event).encode()))
    for page, messages in by_page.items():
        for start in range(0, len(messages), batch):
            client.send_messages(stream, topic, messages[start:start + batch],
                                 partitioning=Partitioning.messages_key(page.encode()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="127.0.0.1:8090")
    parser.add_argument("--username", default="iggy")
    parser.add_argument("--password", default="iggy")
    parser.add_argument("--stream", default="analytics")
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    with Client(args.servers) as client:
        client.login_user(args.username, args.password)
        produce(client, args.stream, args.topic, events(args.events))
    print(f"sent {args.events} click events to {args.stream}/{args.topic}")


if __name__ == "__main__":
    main()
