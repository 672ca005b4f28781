"""``rill ping``, ``rill me``, ``rill stats``, ``rill snapshot``: the server as a whole.

Owns: the four top-level system verbs (``register(app)`` adds them to the root app).

* ``ping`` never logs in (PING needs no session), so it is the health check: exit 0 when the
  server answers, 3 when it cannot be reached.
* ``stats`` prints the GET_STATS record (JSON: the ``Stats`` fields as on the wire: sizes in
  bytes, ``run_time`` in µs, ``start_time`` µs since the epoch).
* ``snapshot`` writes the server's diagnostic ZIP archive to ``--output`` and lists its files.
"""

from __future__ import annotations

import io
import time
import zipfile
from pathlib import Path
from typing import Any, List, Optional

import typer

from rill.cli import params
from rill.cli.clients import show_client
from rill.cli.context import session, settings
from rill.cli.output import format_duration, format_size, format_time, to_json
from rill.cli.params import examples
from rill.protocol.primitives import SnapshotCompression, SnapshotType


def ping(
    ctx: typer.Context,
    count: int = typer.Option(1, "--count", "-n", min=1, max=1000, help="How many pings."),
) -> None:
    """Check that the server answers (no login needed)."""
    out = settings(ctx).output
    times: list[float] = []
    with session(ctx, login=False) as client:
        address = settings(ctx).subject.get("address")
        for _ in range(count):
            started = time.perf_counter()
            client.ping()
            times.append((time.perf_counter() - started) * 1000)
            if not out.json_mode:
                out.text(f"pong from {address}: {times[-1]:.2f} ms")
    if out.json_mode:
        out.json({"ok": True, "command": "ping", "address": address,
                  "round_trips_ms": [round(value, 3) for value in times]})


def get_me(ctx: typer.Context) -> None:
    """Show this connection's own client record."""
    with session(ctx) as client:
        details = client.get_me()
    show_client(ctx, details, "This client")


def _stats_rows(stats: Any) -> list[tuple[str, Any]]:
    return [
        ("Server version", stats.server_version or "unknown"),
        ("Process ID", stats.process_id),
        ("CPU usage (process / total)", f"{stats.cpu_usage:.1f}% / {stats.total_cpu_usage:.1f}%"),
        ("Memory usage", format_size(stats.memory_usage)),
        ("Total / available memory", f"{format_size(stats.total_memory)} / {format_size(stats.available_memory)}"),
        ("Started", format_time(stats.start_time)),
        ("Run time", format_duration(stats.run_time) if stats.run_time else "0s"),
        ("Log read / written", f"{format_size(stats.read_bytes)} / {format_size(stats.written_bytes)}"),
        ("Messages size", format_size(stats.messages_size_bytes)),
        ("Streams", stats.streams_count),
        ("Topics", stats.topics_count),
        ("Partitions", stats.partitions_count),
        ("Segments", stats.segments_count),
        ("Messages", stats.messages_count),
        ("Clients", stats.clients_count),
        ("Consumer groups", stats.consumer_groups_count),
        ("Hostname", stats.hostname),
        ("OS", f"{stats.os_name} {stats.os_version}".strip()),
        ("Kernel", stats.kernel_version),
    ]


def get_stats(ctx: typer.Context) -> None:
    """Show server statistics."""
    with session(ctx) as client:
        stats = client.get_stats()
    out = settings(ctx).output
    if out.json_mode:
        out.json(to_json(stats))
    else:
        out.record(_stats_rows(stats), title="Server statistics")


def _snapshot_types(values: List[str]) -> tuple[SnapshotType, ...]:
    if not values:
        from rill.protocol.iggy.commands.system import DEFAULT_SNAPSHOT_TYPES

        return tuple(DEFAULT_SNAPSHOT_TYPES)
    chosen: list[SnapshotType] = []
    for value in values:
        for name in filter(None, (part.strip() for part in value.split(","))):
            members = list(SnapshotType) if name.lower() == "all" else [
                params.enum_value(SnapshotType, name, "snapshot type")]
            chosen.extend(member for member in members if member not in chosen)
    return tuple(chosen)


def get_snapshot(
    ctx: typer.Context,
    output: Path = typer.Option(..., "--output", "-o", dir_okay=False, help="Where to write the ZIP file."),
    compression: str = typer.Option("deflated", "--compression",
                                    help="stored, deflated, bzip2, zstd, lzma or xz."),
    types: Optional[List[str]] = typer.Option(
        None, "--type", help="filesystem_overview, process_list, resource_usage, test, server_logs or all; "
        "repeatable (default: all but test)."),
) -> None:
    """Download a diagnostic snapshot (a ZIP archive) of the server."""
    method = params.enum_value(SnapshotCompression, compression, "compression")
    kinds = _snapshot_types(types or [])
    with session(ctx) as client:
        archive = client.get_snapshot(method, kinds)
    output.write_bytes(archive)
    try:
        names = zipfile.ZipFile(io.BytesIO(archive)).namelist()
    except zipfile.BadZipFile:
        names = []
    settings(ctx).output.done(
        f"snapshot written to {output} ({format_size(len(archive))}: {', '.join(names) or 'no files'})",
        command="get_snapshot", output=str(output), size_bytes=len(archive), files=names,
    )


def register(app: typer.Typer) -> None:
    """Add the system verbs to the root app."""
    app.command("ping", epilog=examples("rill ping", "rill --address 10.0.0.5:8090 ping --count 5"))(ping)
    app.command("me", epilog=examples("rill me", "rill --json me"))(get_me)
    app.command("stats", epilog=examples("rill stats", "rill --json stats | jq .messages_count"))(get_stats)
    app.command("snapshot", epilog=examples(
        "rill snapshot --output snapshot.zip",
        "rill snapshot -o logs.zip --type server_logs --compression stored",
    ))(get_snapshot)
