"""The ``rill`` command's entry point (``[project.scripts] rill = "rill.cli.main:app"``).

Owns: ``app``, what the installed script calls. A plain ``rill message send`` over TCP is sent
by the fast path (``rill.cli.fast_send``: no typer, no asyncio, well under half the CPU);
every other command line runs the typer app of ``rill.cli.root``, imported only then. ``app``
also stands for that typer app wherever one is expected (``typer.main.get_command(app)``,
``typer.testing.CliRunner().invoke(app, ...)``): its other attributes are the typer app's.
"""

from __future__ import annotations

import sys
from typing import Any


class _Entry:
    """``app()``: the fast path when it handles the command line, else the typer app."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs:  # the installed script: the command line is sys.argv
            from rill.cli import fast_send

            code = fast_send.run(sys.argv[1:])
            if code is not None:
                sys.stdout.flush()
                raise SystemExit(code)
        return _typer_app()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(_typer_app(), name)


def _typer_app() -> Any:
    from rill.cli.root import app as typer_app

    return typer_app


app = _Entry()

if __name__ == "__main__":
    app()
