"""The registry of streams (and of a stream's topics): lookups by name (also through the live
view by name), the lowest free id, and creation in time that does not grow with the number of
streams."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from rill.server.config import ServerConfig
from in_process_core import twin_core
from rill.server.core.model import Session
from rill.server.core.registry import Registry


@dataclass
class Named:
    name: str


def test_lookups_by_name_follow_adds_renames_and_deletes():
    registry = Registry()
    registry[1] = Named("a")
    registry[2] = Named("b")
    assert registry.named("a") is registry[1] and registry.named("c") is None
    registry.rename(1, "c")
    assert registry.named("a") is None and registry.named("c").name == "c"
    del registry[2]
    assert registry.named("b") is None and list(registry) == [1]
    registry[1] = Named("d")  # replaced
    assert registry.named("c") is None and registry.named("d") is registry[1]


def test_the_view_by_name_is_live_and_copies_nothing():
    registry = Registry()
    registry[2] = Named("b")
    registry[1] = Named("a")
    view = registry.by_name()
    assert list(view) == ["a", "b"] and len(view) == 2  # in id order
    assert view["a"] is registry[1] and view.get("b") is registry[2]
    assert "c" not in view and view.get("c") is None and view.get(None) is None
    registry[3] = Named("c")  # what happens after the view was made shows through it
    registry.rename(1, "z")
    del registry[2]
    assert dict(view) == {"z": registry[1], "c": registry[3]}
    assert "a" not in view and "b" not in view
    try:
        view["b"]
    except KeyError:
        pass
    else:
        raise AssertionError("a deleted name still resolves")


def test_the_lowest_free_id_reuses_freed_ids_and_skips_taken_ones():
    registry = Registry()
    for expected in (1, 2, 3):
        assert registry.lowest_free_id() == expected
        registry[expected] = Named(str(expected))
    registry[5] = Named("explicit")
    assert registry.lowest_free_id() == 4
    registry[4] = Named("4")
    assert registry.lowest_free_id() == 6
    del registry[2]
    del registry[1]
    assert registry.lowest_free_id() == 1
    registry[1] = Named("again")
    assert registry.lowest_free_id() == 2
    registry[2] = Named("again 2")
    assert registry.lowest_free_id() == 6
    del registry[5]
    assert registry.lowest_free_id() == 5


def test_stream_creation_does_not_slow_down_as_streams_accumulate(tmp_path):
    """30,000 streams through the core: the last thousands cost about what the first did.
    (Scanning every stream's name and id per creation made this ~20x slower at 30,000; the
    bound is a generous ratio of CPU times measured in the same run.)"""
    total, sample = 30_000, 3_000

    async def main() -> float:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        config.system.fsync = "never"
        config.root.password_hash_cost = 4
        core = twin_core(config)
        await core.start()
        root = Session(1, "127.0.0.1:1", "tcp", user_id=1)
        create = core.streams.create_stream
        try:
            costs = []
            for number in range(total):
                if number % sample == 0:
                    started = time.process_time()
                await create(root, f"stream-{number}")
                if number % sample == sample - 1:
                    costs.append(time.process_time() - started)
            assert core.state.streams.named("stream-29999").id == total
            return max(costs[-2:]) / min(costs[:2])
        finally:
            await core.stop()

    assert asyncio.run(main()) < 3.0
