"""The live progress display of a run: one rich bar per kind of actor, on stderr.

Owns: ``BenchProgress``. The parent process calls ``update({"producer": messages, ...})`` with
the sums of the actors' shared counters a few times a second; in batches mode each bar runs to
the expected total, in duration mode to the run's duration (the bar shows elapsed time and the
messages so far). Nothing is shown when ``enabled`` is false or stderr is not a terminal, so
tests, pipes and ``--no-progress`` stay quiet.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class BenchProgress:
    """``with BenchProgress(title, totals, duration, enabled) as progress: progress.update(...)``"""

    def __init__(self, title: str, totals: dict[str, int | None], duration: float | None,
                 enabled: bool = True, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.title = title
        self.totals = totals
        self.duration = duration
        self._progress: Progress | None = None
        self._tasks: dict[str, Any] = {}
        self._started = 0.0

    def __enter__(self) -> BenchProgress:
        if not self.enabled:
            return self
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn() if self.duration is None else TextColumn("{task.fields[elapsed]}"),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
            refresh_per_second=8,
        )
        self._progress.__enter__()
        for kind, total in self.totals.items():
            bar_total = self.duration if self.duration is not None else total
            self._tasks[kind] = self._progress.add_task(
                f"{self.title} {kind}s", total=bar_total, rate="", elapsed="",
            )
        return self

    def start_measuring(self) -> None:
        """The actors are past warm-up: from now on bars advance."""
        self._started = time.perf_counter()

    def update(self, messages: dict[str, int]) -> None:
        progress = self._progress
        if progress is None:
            return
        elapsed = time.perf_counter() - self._started if self._started else 0.0
        for kind, task in self._tasks.items():
            count = messages.get(kind, 0)
            rate = f"{count / elapsed:,.0f} msg/s" if elapsed > 0 and count else ""
            if self.duration is not None:
                progress.update(task, completed=min(elapsed, self.duration), rate=rate,
                                elapsed=f"{count:,} msgs")
            else:
                progress.update(task, completed=count, rate=rate)

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.__exit__(kind, value, traceback)
            self._progress = None
