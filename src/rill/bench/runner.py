"""Runs the actors of one scenario, each in its own OS process, and collects their results.

Owns: ``run_actors``: starts one "spawn" process per ``ActorSpec`` (so several actors use
several cores, each with its own uvloop), shares with them the live counters and the start
barrier (``rill.bench.actors.Shared``), shows the progress display while they run, tells
consumers when every producer is done, and returns their ``ActorResult`` values. The parent
takes part in the barrier (from a helper thread) so it knows when measuring begins; with a
``cost`` (``rill.bench.cpu.PhaseCost``) the server's CPU is sampled by the barrier's action
(in the last party to arrive, before any is released: ``cpu.SampleInto``) and again once every
actor has reported, so the phase's cost leaves out connecting, logging in and warming up.

Failure handling: the first actor that fails stops the run -- the others are told to stop, the
barrier is broken so no one waits forever, and the failure is raised here: the ``rill.errors``
class the server answered when it was one (so the CLI prints and exits as for any command),
else ``BenchError``. Processes still alive at the end are terminated.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from typing import Any

from rill import errors
from rill.bench.actors import ActorSpec, Shared, actor_main
from rill.bench.cpu import PhaseCost, SampleInto
from rill.bench.progress import BenchProgress
from rill.bench.results import ActorResult

POLL_INTERVAL = 0.1  # seconds between progress refreshes / result checks
SILENT_DEATH_GRACE = 3.0  # a process gone this long without a message has crashed
JOIN_TIMEOUT = 10.0


class BenchError(RuntimeError):
    """A run that could not complete; the message says which actor and why."""


def run_actors(specs: list[ActorSpec], *, title: str = "", duration: float | None = None,
               progress: bool = True, cost: PhaseCost | None = None) -> list[ActorResult]:
    """Run every actor to its end; their results in ``specs`` order (``cost``: see the module
    doc)."""
    if not specs:
        return []
    context = multiprocessing.get_context("spawn")
    started_cpu = context.Value("d", -1.0, lock=False)
    metered = cost is not None and cost.meter is not None
    shared = Shared(
        counters=context.Array("q", len(specs), lock=False),
        barrier=context.Barrier(len(specs) + 1,
                                action=SampleInto(cost.meter, started_cpu) if metered else None),
        producers_done=context.Event(),
        stop=context.Event(),
        results=context.Queue(),
    )
    producer_slots = {spec.slot for spec in specs if spec.kind == "producer"}
    if not producer_slots:
        shared.producers_done.set()
    processes = {
        spec.slot: context.Process(target=actor_main, args=(spec, shared), name=f"rill-bench-{spec.name}",
                                   daemon=True)
        for spec in specs
    }
    measuring = threading.Event()

    def wait_for_start() -> None:
        try:
            shared.barrier.wait()
            if metered:
                cost.begin(started_cpu.value)
            measuring.set()
        except threading.BrokenBarrierError:
            pass

    totals: dict[str, int | None] = {}
    for spec in specs:
        per_actor = None if spec.batches is None else spec.batches * spec.messages_per_batch
        if spec.role == "group-consumer":
            per_actor = None if spec.batches is None else spec.group_target // max(len(spec.group_slots), 1)
        previous = totals.get(spec.kind, 0)
        totals[spec.kind] = None if previous is None or per_actor is None else previous + per_actor
    results: dict[int, ActorResult] = {}
    failures: list[tuple[str, int, int, str]] = []
    gone_since: dict[int, float] = {}
    try:
        for process in processes.values():
            process.start()
        threading.Thread(target=wait_for_start, name="rill-bench-start", daemon=True).start()
        with BenchProgress(title, totals, duration, enabled=progress) as display:
            shown_start = False
            while len(results) + len(failures) < len(specs):
                try:
                    message = shared.results.get(timeout=POLL_INTERVAL)
                except queue.Empty:
                    message = None
                if message is not None:
                    _handle(message, results, failures, shared, producer_slots)
                else:
                    _check_alive(processes, results, failures, gone_since, shared)
                if measuring.is_set():
                    if not shown_start:
                        display.start_measuring()
                        shown_start = True
                    display.update(_sums(specs, shared.counters))
            display.update(_sums(specs, shared.counters))
        if metered and not failures:
            measuring.wait(JOIN_TIMEOUT)  # the barrier's thread has sampled the start
            cost.end()
    except BaseException:
        shared.stop.set()
        shared.barrier.abort()
        raise
    finally:
        _reap(processes.values(), shared.results)
    if failures:
        raise _failure(failures)
    return [results[spec.slot] for spec in specs]


def _handle(message: tuple[Any, ...], results: dict[int, ActorResult], failures: list[tuple[str, int, int, str]],
            shared: Shared, producer_slots: set[int]) -> None:
    kind, slot = message[0], message[1]
    if kind == "result":
        results[slot] = ActorResult.from_dict(message[2])
        if producer_slots <= results.keys():
            shared.producers_done.set()
        return
    failures.append((kind, slot, message[2], message[3]))
    shared.stop.set()
    shared.barrier.abort()


def _check_alive(processes: dict[int, Any], results: dict[int, ActorResult],
                 failures: list[tuple[str, int, int, str]], gone_since: dict[int, float], shared: Shared) -> None:
    """Notice an actor process that died without a word (killed, out of memory...)."""
    reported = set(results) | {failure[1] for failure in failures}
    now = time.monotonic()
    for slot, process in processes.items():
        if slot in reported or process.exitcode is None:
            continue
        since = gone_since.setdefault(slot, now)
        if now - since >= SILENT_DEATH_GRACE:
            failures.append(("error", slot, 0, f"{process.name.removeprefix('rill-bench-')}: "
                                               f"its process exited with code {process.exitcode}"))
            shared.stop.set()
            shared.barrier.abort()


def _sums(specs: list[ActorSpec], counters: Any) -> dict[str, int]:
    sums: dict[str, int] = {}
    for spec in specs:
        sums[spec.kind] = sums.get(spec.kind, 0) + counters[spec.slot]
    return sums


def _failure(failures: list[tuple[str, int, int, str]]) -> Exception:
    """The root cause: the first real failure, not the actors stopped because of it."""
    primary = next((failure for failure in failures if failure[0] == "error"), failures[0])
    _, _, code, text = primary
    if code:
        return errors.from_status(code, reason=text)
    return BenchError(text)


def _reap(processes: Any, results_queue: Any) -> None:
    """Wait for the processes to end (draining the queue, which they cannot exit with unsent
    items in), then terminate whatever is still alive."""
    started = [process for process in processes if process.pid is not None]
    deadline = time.monotonic() + JOIN_TIMEOUT
    while time.monotonic() < deadline and any(process.exitcode is None for process in started):
        try:
            results_queue.get(timeout=0.05)
        except queue.Empty:
            pass
    for process in started:
        if process.exitcode is None:
            process.terminate()
            process.join(5)
            if process.exitcode is None:
                process.kill()
                process.join(5)
        else:
            process.join()
