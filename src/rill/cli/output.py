"""What the CLI prints: rich tables by default, JSON with ``--json``, nothing extra with ``--quiet``.

Owns: ``Output`` (the one object every verb prints through), the value formatters shared by
the resource modules (times, sizes, durations, sentinels) and the JSON conversion of protocol
records.

Conventions (the same for every verb):

* stdout carries the answer only: a table or key/value record, or with ``--json`` one JSON
  document (``--follow`` polls print one JSON object per line). Errors, prompts and progress
  bars go to stderr, so ``rill --json ... | jq`` always works.
* Verbs that change something print one confirmation line; ``--quiet`` suppresses it (and
  progress bars) but never the data a verb was asked for. With ``--json`` they print
  ``{"ok": true, "command": "<sdk method>", ...}`` or, for creates, the created resource.
* Tables fit the terminal (or ``$COLUMNS``; 200 columns when piped without it): a table that
  would have to fold its cells drops its *droppable* columns first, in the order the verb lists
  them (a topic list at 80 columns loses ``Created``, ``Compression``, ``Replication``).
* Bytes are never mangled: a payload, key or header value that is valid UTF-8 is shown as text;
  any other is base64, and says so (``"payload_encoding": "base64"`` in JSON, a ``base64:``
  prefix in text) -- see ``binary_text``.
* JSON keeps the protocol's field names and units (timestamps and expiries in µs since the
  epoch / µs, sizes in bytes) with three readability changes: ``null`` for "never" expiries and
  "unlimited" sizes (``u64::MAX`` on the wire), enum bytes as lower-case names
  (``"compression_algorithm": "none"``, ``"status": "active"``), and 128-bit message ids as
  UUID strings.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Iterable, Sequence

# rich, and base64, uuid and datetime for the formatters, are imported when used: a confirmation
# line (``rill message send``'s fast path) needs none of them
if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

U64_MAX = 0xFFFF_FFFF_FFFF_FFFF
_WIDTH_WHEN_PIPED = 200  # rich would wrap tables at 80 columns when stdout is not a terminal


def _console(stderr: bool) -> Console:
    """The terminal's width, else ``$COLUMNS`` (rich reads it), else 200 when piped."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    sized = stream.isatty() or os.environ.get("COLUMNS", "").isdigit()
    return Console(
        file=stream, width=None if sized else _WIDTH_WHEN_PIPED, highlight=False, soft_wrap=False,
    )


class Output:
    """Prints answers (stdout) and confirmations; ``json_mode``/``quiet`` are the global flags."""

    def __init__(self, json_mode: bool = False, quiet: bool = False) -> None:
        self.json_mode = json_mode
        self.quiet = quiet
        self._stdout: Console | None = None
        self._stderr: Console | None = None

    @property
    def console(self) -> Console:
        if self._stdout is None:
            self._stdout = _console(stderr=False)
        return self._stdout

    @property
    def err_console(self) -> Console:
        if self._stderr is None:
            self._stderr = _console(stderr=True)
        return self._stderr

    @property
    def show_progress(self) -> bool:
        """Progress bars only for a human watching a terminal."""
        return not self.quiet and not self.json_mode and self.err_console.is_terminal

    # --- answers -------------------------------------------------------------------------------

    def json(self, value: Any, *, compact: bool = False) -> None:
        text = json.dumps(to_json(value), indent=None if compact else 2, ensure_ascii=False)
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def table(
        self, columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None,
        droppable: Sequence[str] = (),
    ) -> None:
        """A table; ``droppable`` columns go, in that order, while the rest would have to fold."""
        from rich.table import Table

        cells = [[cell(value) for value in row] for row in rows]
        natural = [max([len(column), *(row[index].cell_len for row in cells)])
                   for index, column in enumerate(columns)]
        kept = list(range(len(columns)))
        for name in droppable:
            if sum(natural[index] + 3 for index in kept) + 1 <= self.console.width:  # "│ x " + "│"
                break
            kept = [index for index in kept if columns[index] != name]
        table = Table(title=title, title_justify="left",
                      min_width=min(len(title), self.console.width) if title else None)
        for index in kept:
            table.add_column(columns[index], overflow="fold")
        for row in cells:
            table.add_row(*(row[index] for index in kept))
        self.console.print(table)

    def record(self, pairs: Iterable[tuple[str, Any]], title: str | None = None) -> None:
        """A key/value table for one resource."""
        self.table(("Property", "Value"), pairs, title=title)

    def emit(self, value: Any, columns: Sequence[str], rows: Iterable[Sequence[Any]],
             title: str | None = None, droppable: Sequence[str] = ()) -> None:
        """``value`` as JSON with ``--json``, else the table."""
        if self.json_mode:
            self.json(value)
        else:
            self.table(columns, rows, title, droppable)

    def done(self, message: str, json_value: Any = None, **fields: Any) -> None:
        """A confirmation: one line, or the JSON value (default ``{"ok": true, ...}``)."""
        if self.json_mode:
            self.json(json_value if json_value is not None else {"ok": True, **fields})
        elif not self.quiet:
            self.text(message)

    def text(self, message: str) -> None:
        """Plain data on stdout (printed even with --quiet)."""
        sys.stdout.write(message + "\n")
        sys.stdout.flush()

    def write(self, text: str) -> None:
        """Plain data on stdout as given (no line break added; printed even with --quiet)."""
        sys.stdout.write(text)
        sys.stdout.flush()

    def note(self, message: str) -> None:
        """An informational line on stderr, hidden by --quiet."""
        if not self.quiet:
            sys.stderr.write(message + "\n")
            sys.stderr.flush()


def cell(value: Any) -> Text:
    """A table cell: never interpreted as rich markup."""
    from rich.text import Text

    if value is None:
        return Text("-")
    if isinstance(value, bool):
        return Text("yes" if value else "no")
    return Text(str(value))


# --- value formatting ------------------------------------------------------------------------


def format_time(micros: int) -> str:
    """µs since the epoch -> local ``YYYY-MM-DD HH:MM:SS`` (``-`` for 0)."""
    if not micros:
        return "-"
    from datetime import datetime

    try:
        return datetime.fromtimestamp(micros / 1_000_000).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return str(micros)


def format_size(size: int) -> str:
    """Bytes in decimal units (``10 GB``); u64::MAX is ``unlimited``."""
    if size == U64_MAX:
        return "unlimited"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if value < 1000 or unit == "PB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.2f} {unit}".replace(".00 ", " ")
        value /= 1000
    return f"{size} B"  # pragma: no cover - loop always returns


def format_duration(micros: int) -> str:
    """µs -> ``1h 30m``, ``2m 40s``, ``1s 500ms``, ``250us``; 0 is ``server default`` and
    u64::MAX ``never``. A human reads seconds: parts below a second are shown only under a
    minute, and below a millisecond only under a second."""
    if micros == U64_MAX:
        return "never"
    if micros == 0:
        return "server default"
    parts = []
    seconds, rest = divmod(micros, 1_000_000)
    for unit, length in (("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)):
        amount, seconds = divmod(seconds, length)
        if amount:
            parts.append(f"{amount}{unit}")
    if micros < 60_000_000:
        if rest and micros >= 1_000_000:
            rest -= rest % 1000  # to the millisecond
        if rest:
            parts.append(f"{rest // 1000}ms" if rest % 1000 == 0 else f"{rest}us")
    return " ".join(parts)


def message_id(value: int) -> str:
    """A message's u128 id as the UUID its wire bytes spell (canonical order)."""
    import uuid

    return str(uuid.UUID(bytes=value.to_bytes(16, "little")))


def binary_text(data: bytes) -> tuple[str, str]:
    """(text, encoding): valid UTF-8 as itself (``"text"``), anything else base64 (``"base64"``)."""
    try:
        return bytes(data).decode("utf-8"), "text"
    except UnicodeDecodeError:
        import base64

        return base64.b64encode(data).decode("ascii"), "base64"


def binary_cell(data: bytes) -> str:
    """Bytes for a line of text: UTF-8 as itself, anything else ``base64:<base64>``."""
    text, encoding = binary_text(data)
    return text if encoding == "text" else f"base64:{text}"


def sentinel(value: int) -> int | None:
    """u64::MAX ("never" / "unlimited") -> None, for JSON."""
    return None if value == U64_MAX else value


# --- JSON ------------------------------------------------------------------------------------


def to_json(value: Any) -> Any:
    """Protocol records and plain values -> JSON-ready values (see the module docstring)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: to_json(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.name.lower()
    if isinstance(value, dict):
        return {str(key): to_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value
