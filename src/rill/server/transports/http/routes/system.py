"""System routes: ``/``, ``/ping``, ``/health``, ``/ready``, ``/stats``, the metrics endpoint,
clients and snapshots.

Owns: the routes of wire §8.4's system rows, and the two probes of orchestrators: ``/health``
(liveness: the process answers) and ``/ready`` (readiness: started, not stopping, and message
writes not failing; 503 with the reason otherwise). ``/``, ``/ping``, the probes and the metrics
endpoint are public (``/`` redirects a browser to the web console, ``/console``); ``/stats``
needs a login (unlike Iggy: it names the host, its OS and memory).
``/server`` (a rill extension, what the web console's overview shows; any logged-in user) says
what this server runs: version, start and uptime, its listeners by protocol, the fsync policy,
the disk use of the data directory, the running totals of messages and bytes in and out (null
when ``[http.metrics]`` is off: a reader derives rates from two samples) and the clients
connected by protocol and transport. A snapshot answers the ZIP archive as an ``application/zip`` attachment
named ``rill_snapshot_<YYYYmmdd_HHMMSS>.zip`` (UTC).
"""

from __future__ import annotations

import shutil
import time
from typing import Any, Optional

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from rill import __version__
from rill.protocol.iggy.commands.system import Ping
from rill.server.transports.http import schemas
from rill.server.transports.http.auth import session_of
from rill.server.transports.http.models import SnapshotBody
from rill.server.transports.http.routes.console import CONSOLE
from rill.server.transports.http.routes.common import SECURED, context, execute_command, execute, replies, run

public = APIRouter(tags=["system"])
router = APIRouter(tags=["system"], dependencies=SECURED)


@public.get("/", response_class=RedirectResponse, status_code=307,
            summary="The web console: redirects to /console")
async def root() -> RedirectResponse:
    return RedirectResponse(CONSOLE)


@public.get("/ping", response_class=PlainTextResponse, summary="Liveness: answers pong")
async def ping(request: Request) -> PlainTextResponse:
    await execute_command(context(request).core, session_of(request), Ping())
    return PlainTextResponse("pong", headers={"X-Rill-Version": __version__})


@public.get("/health", summary="Liveness: the server process answers")
async def health() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@public.get("/ready", summary="Readiness: started, not stopping, and writes succeed (else 503)",
            responses={503: {"description": "Not ready; the body says why"}})
async def ready(request: Request) -> Response:
    reason = context(request).core.unready_because()
    if reason is not None:
        return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)
    return JSONResponse({"status": "ready"})


@router.get("/stats", response_model=None, responses=replies(schemas.Stats, body=False),
            summary="Server statistics (any logged-in user)")
async def get_stats(request: Request) -> Response:
    return await run(request, "get_stats")


async def metrics(request: Request) -> PlainTextResponse:
    """Counters and histograms in the Prometheus text format."""
    text = context(request).metrics.render()
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/server", summary="What this server runs: version, uptime, listeners, fsync, disk, "
                               "throughput totals, clients by protocol (any logged-in user)",
            responses=replies(body=False))
async def get_server(request: Request) -> dict[str, Any]:
    stats = await execute(request, "get_stats")  # the login check, and the model's figures
    rill = context(request)
    system = rill.core.config.system
    try:
        disk = shutil.disk_usage(rill.core.config.data_path)
        disk_figures: dict[str, Any] = {"total_bytes": disk.total, "free_bytes": disk.free}
    except OSError:
        disk_figures = {"total_bytes": None, "free_bytes": None}
    metrics = rill.metrics
    throughput = None
    if metrics.enabled:
        throughput = {"messages_in": metrics.messages_appended,
                      "messages_out": sum(metrics.messages_out.values()),
                      "bytes_in": sum(metrics.bytes_in.values()),
                      "bytes_out": sum(metrics.bytes_out.values())}
    return {
        "version": __version__,
        "start_time": stats.start_time,  # µs since the epoch
        "run_time": stats.run_time,  # µs
        "listeners": [{"protocol": name, "address": f"{host}:{port}"}
                      for name, (host, port) in rill.listeners.items()],
        "fsync": {"policy": system.fsync, "interval_ms": round(system.fsync_interval * 1000)},
        "disk": {"messages_bytes": stats.messages_size_bytes, **disk_figures},
        "counts": {"streams": stats.streams_count, "topics": stats.topics_count,
                   "partitions": stats.partitions_count, "messages": stats.messages_count,
                   "consumer_groups": stats.consumer_groups_count},
        "throughput": throughput,
        "clients": [{"protocol": protocol, "transport": transport, "count": count}
                    for (protocol, transport), count in sorted(rill.core.connections_by_protocol().items())],
    }


@router.get("/clients", response_model=None, responses=replies(list[schemas.ClientInfo], body=False),
            summary="Connected TCP/QUIC clients (HTTP callers never appear)")
async def get_clients(request: Request) -> Response:
    return await run(request, "get_clients")


@router.get("/clients/{client_id}", response_model=None,
            responses=replies(schemas.ClientInfoDetails, body=False), summary="One client")
async def get_client(request: Request, client_id: int = Path(ge=0, le=2**32 - 1)) -> Response:
    return await run(request, "get_client")


@router.post("/snapshot", response_class=Response, summary="A diagnostic ZIP archive",
             responses={200: {"content": {"application/zip": {}}, "description": "The archive"},
                        **{k: v for k, v in replies().items() if k != 200}})
async def get_snapshot(request: Request, body: Optional[SnapshotBody] = None) -> Response:
    archive = await execute(request, "get_snapshot", body)
    name = time.strftime("rill_snapshot_%Y%m%d_%H%M%S.zip", time.gmtime())
    return Response(bytes(archive), media_type="application/zip",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})
