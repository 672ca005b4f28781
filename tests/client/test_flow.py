"""``rill.client.flow.WriteFlow``: a writer waits in ``drain`` while the transport is paused,
is let go when it resumes or when the link goes, and never waits on a link that is gone."""

from __future__ import annotations

import asyncio

from rill.client.flow import WriteFlow


class _Link(WriteFlow):
    def __init__(self) -> None:
        super().__init__()
        self.lost = False

    def gone(self) -> bool:
        return self.lost


def test_drain_waits_while_paused_and_returns_when_resumed():
    async def scenario():
        link = _Link()
        await asyncio.wait_for(link.drain(), 1)  # not paused: at once
        link.pause_writing()
        writers = [asyncio.ensure_future(link.drain()) for _ in range(2)]
        await asyncio.sleep(0.01)
        waited = not any(writer.done() for writer in writers)
        link.resume_writing()
        await asyncio.wait_for(asyncio.gather(*writers), 1)
        return waited, link.paused

    assert asyncio.run(scenario()) == (True, False)


def test_a_link_that_goes_lets_its_writers_go_and_never_makes_one_wait():
    async def scenario():
        link = _Link()
        link.pause_writing()
        writer = asyncio.ensure_future(link.drain())
        await asyncio.sleep(0.01)
        link.lost = True
        link.wake_writers()  # (what connection_lost does)
        await asyncio.wait_for(writer, 1)
        await asyncio.wait_for(link.drain(), 1)  # still paused, but gone: at once

    asyncio.run(scenario())
