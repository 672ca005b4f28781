"""Runs under iggy-py 0.4.0 (not rill's interpreter): a consumer loop over a partition with
offset holes; prints the offsets each loop read as JSON."""

import asyncio
import json
import os
import sys

from iggy_py import IggyClient, PollingStrategy

MAX_POLLS = 20  # a loop stuck in a hole would poll for ever: stop and report it


async def main(address: str, topic: str) -> None:
    client = IggyClient(address)
    await client.connect()
    await client.login_user("iggy", "iggy")

    async def loop(strategy_of, auto_commit: bool) -> dict:
        offsets, polls, offset = [], 0, 0
        while polls < MAX_POLLS:
            polls += 1
            polled = await client.poll_messages("kafka", topic, 1, strategy_of(offset), 2,
                                                auto_commit)
            if not polled:
                break
            offsets += [message.offset() for message in polled]
            offset = polled[-1].offset() + 1
        return {"offsets": offsets, "polls": polls}

    print(json.dumps({
        "by_offset": await loop(lambda offset: PollingStrategy.Offset(value=offset), False),
        "next": await loop(lambda offset: PollingStrategy.Next(), True),
    }))


asyncio.run(main(sys.argv[1], sys.argv[2]))
sys.stdout.flush()
# iggy-py's Rust runtime sometimes aborts while the interpreter tears down its background
# threads (after all work is done and reported), as in iggy_py_script.py: leave without it.
os._exit(0)
