"""The scenarios of ``rill bench``: ``send``, ``poll``, ``send-and-poll``, ``consumer-group-poll``,
``round-trip``.

Owns: ``run_scenario(name, options)`` -- validate the options, start a server (``RillServer``)
unless ``server_address`` names one, prepare the streams (``rill.bench.setup``), run the actors
(``rill.bench.runner``), delete the bench streams of an existing server when ``cleanup`` says
so, and return the JSON-ready ``results.scenario_report``. ``actor_specs`` turns options into
the actors of a scenario, following the layout of ``rill.bench.options``.

What the scenarios do (iggy-bench's, wire reference §10.1):

* ``send``: the producers send ``batches`` (or for ``duration``) batches to their streams.
* ``poll``: the consumers read their partitions by offset, ``count = messages_per_batch``, no
  commit; data is seeded first (untimed) when the streams do not hold enough.
* ``send-and-poll``: both at once; consumers read what the producers write.
* ``consumer-group-poll``: groups ``cg-1..G`` are (re)created, members join and poll without a
  partition id; each group reads ``members × batches × messages_per_batch`` messages.
* ``round-trip``: ``batches`` one-message round trips, a producer's SEND to a consumer tailing
  partition 1 of the first bench stream with rill's long poll (``rill.bench.round_trip``), in
  this process; its "producers" figures are the round trips (``messages_per_batch`` is 1).

Every scenario on a server whose process is known (one it starts, or ``server_pid``) reports
the server's CPU over the measured phase (``server_cpu``, ``rill.bench.cpu``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from rill.bench import options as layout
from rill.bench import setup
from rill.bench.actors import ActorSpec
from rill.bench.cpu import CpuMeter, PhaseCost
from rill.bench.options import BenchOptions, validate
from rill.bench.results import scenario_report
from rill.bench.runner import run_actors
from rill.bench.server import RillServer


def run_scenario(name: str, options: BenchOptions) -> dict[str, Any]:
    """Run one scenario; the result is ``results.scenario_report(...)`` (JSON-ready)."""
    validate(name, options)
    if options.server_address is None:
        with RillServer(fsync=options.fsync, transports=(options.transport,)) as server:
            trusting = dataclasses.replace(options, ca_file=server.certificate)
            return run_on(name, trusting, server.addresses[options.transport], server.describe(),
                          cleanup=False, server_pid=server.pid)
    return run_on(name, options, options.server_address, f"existing server {options.server_address}",
                  cleanup=options.cleanup, server_pid=options.server_pid)


def run_on(name: str, options: BenchOptions, address: str, server_label: str,
           cleanup: bool, server_pid: int | None = None) -> dict[str, Any]:
    """Run ``name`` against the server at ``address`` (options already validated); with
    ``server_pid`` the server's CPU over the measured phase is in the report (``server_cpu``)."""
    if name == "round-trip":
        options = dataclasses.replace(options, messages_per_batch=1, producers=1, consumers=1)
    seeded = _in_loop(_prepare(name, options, address))
    cost = PhaseCost(CpuMeter([server_pid]))
    try:
        if name == "round-trip":
            return _round_trip(options, address, server_label, seeded, server_pid)
        actors = run_actors(
            actor_specs(name, options, address), title=name, duration=options.duration,
            progress=options.progress, cost=cost,
        )
    finally:
        if cleanup:
            _in_loop(_cleanup(options, address))
    report_options = options.report_options()
    report_options.update(server=server_label, address=address, seeded_messages=seeded)
    return scenario_report(name, report_options, actors, target=options.target,
                           server_cpu=cost.seconds, server_pids=cost.pids)


def actor_specs(name: str, options: BenchOptions, address: str) -> list[ActorSpec]:
    """The producers then the consumers of scenario ``name``; slots number them from 0."""
    producers, consumers = layout.actors_of(name, options)
    by_duration = options.duration is not None
    common: dict[str, Any] = {
        "address": address, "transport": options.transport, "username": options.username,
        "password": options.password, "messages_per_batch": options.messages_per_batch,
        "message_size": options.message_size, "batches": None if by_duration else options.batches,
        "duration": options.duration, "warmup": options.warmup,
        "request_timeout": options.request_timeout, "client_options": options.client_options(),
    }
    partition = layout.producer_partition(options)
    specs = [
        ActorSpec(slot=index, name=f"producer-{index + 1}", kind="producer", role="producer",
                  stream_id=layout.actor_stream(options, index),
                  partitions=() if partition is None else (partition,), **common)
        for index in range(producers)
    ]
    per_reader = setup.seed_messages_per_reader(options)
    for index in range(consumers):
        slot = producers + index
        name_of = f"consumer-{index + 1}"
        if name == "consumer-group-poll":
            group_id = layout.consumer_group_of(options, index)
            members = layout.group_members(options, group_id)
            specs.append(ActorSpec(
                slot=slot, name=name_of, kind="consumer", role="group-consumer",
                stream_id=layout.group_stream(options, group_id), partitions=(), group_id=group_id,
                group_slots=tuple(producers + member for member in members),
                group_target=per_reader * len(members), **common,
            ))
        else:
            specs.append(ActorSpec(
                slot=slot, name=name_of, kind="consumer", role="consumer",
                stream_id=layout.actor_stream(options, index),
                partitions=tuple(layout.consumer_partitions(options, index, consumers)),
                consumer_id=index + 1, rewind=name == "poll" and by_duration, **common,
            ))
    return specs


def _round_trip(options: BenchOptions, address: str, server_label: str, seeded: int,
                server_pid: int | None) -> dict[str, Any]:
    from rill.bench.peers import run_async
    from rill.bench.results import Recorder
    from rill.bench.round_trip import iggy_round_trips

    recorder = Recorder("round-trip", "producer", cpu=CpuMeter([server_pid]))
    result = run_async(lambda: iggy_round_trips(
        address, options.stream_ids()[0], 1, options.batches or 0, options.message_size, recorder,
        username=options.username, password=options.password, transport=options.transport,
        client_options=options.client_options()))
    report_options = options.report_options()
    report_options.update(server=server_label, address=address, seeded_messages=seeded)
    return scenario_report("round-trip", report_options, [result], target=options.target,
                           server_pids=[server_pid] if server_pid else [])


# --- the parent's own client ---------------------------------------------------------------------


def _in_loop(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def _client(options: BenchOptions, address: str) -> Any:
    from rill.client import AsyncClient

    client = AsyncClient(address, transport=options.transport, reconnect=False,
                         timeout=options.request_timeout, max_reconnect_attempts=1,
                         **options.client_options())
    await client.connect()
    try:
        await client.login_user(options.username, options.password)
    except BaseException:
        await client.close()
        raise
    return client


async def _prepare(name: str, options: BenchOptions, address: str) -> int:
    client = await _client(options, address)
    try:
        return await setup.prepare(client, name, options)
    finally:
        await client.close()


async def _cleanup(options: BenchOptions, address: str) -> None:
    client = await _client(options, address)
    try:
        await setup.cleanup(client, options)
    finally:
        await client.close()
