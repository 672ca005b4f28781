"""The web console's files: ``/console`` (the page) and ``/console/<file>`` (its scripts, style
sheet and icon), served from the package directory ``transports/http/console/``.

Owns: the routes of the console's static files and their headers. Only the files named in
``FILES`` are served (any other name is a 404, never a path into the package); every answer
carries a Content-Security-Policy that allows scripts, styles, images and requests from this
origin only, so the console works without internet and loads nothing from elsewhere. The files
are public like ``/docs``: they hold no data; everything the console shows comes from the API
with the bearer token of its login (kept in the tab's sessionStorage).
"""

from __future__ import annotations

import functools
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

CONSOLE = "/console"
FILES = {
    "index.html": "text/html; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "chart.js": "text/javascript; charset=utf-8",
    "cluster.js": "text/javascript; charset=utf-8",
    "consumers.js": "text/javascript; charset=utf-8",
    "format.js": "text/javascript; charset=utf-8",
    "overview.js": "text/javascript; charset=utf-8",
    "streams.js": "text/javascript; charset=utf-8",
    "messages.js": "text/javascript; charset=utf-8",
    "ui.js": "text/javascript; charset=utf-8",
    "users.js": "text/javascript; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
HEADERS = {
    "Content-Security-Policy": ("default-src 'self'; script-src 'self'; style-src 'self'; "
                                "img-src 'self' data:; connect-src 'self'; object-src 'none'; "
                                "base-uri 'none'; frame-ancestors 'none'; form-action 'self'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",  # revalidate: a new rill version brings new files
}
PATHS = frozenset({CONSOLE, CONSOLE + "/"} | {f"{CONSOLE}/{name}" for name in FILES})

router = APIRouter(include_in_schema=False)


@functools.cache
def _content(name: str) -> bytes:
    """A console file's bytes, read from the package once per process."""
    return (resources.files("rill.server.transports.http") / "console" / name).read_bytes()


def _file(name: str) -> Response:
    return Response(_content(name), media_type=FILES[name], headers=HEADERS)


@router.get(CONSOLE)
@router.get(CONSOLE + "/")
async def console_page() -> Response:
    return _file("index.html")


def _file_route(name: str) -> None:
    async def console_file() -> Response:
        return _file(name)

    router.add_api_route(f"{CONSOLE}/{name}", console_file, methods=["GET"])


for _name in FILES:  # one route per file: any other name is a 404
    _file_route(_name)
