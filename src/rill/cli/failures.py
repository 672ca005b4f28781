"""How the CLI fails: one readable line on stderr and a small, documented set of exit codes.

Owns: the exit codes and the wording of every error line: ``report(error, subject)`` is the
single place where an error raised by a verb becomes its ``error: ...`` line and exit code --
called by ``RillGroup`` (``rill.cli.root``, the click group of the ``rill`` app) for every verb,
and by the fast path of ``rill message send`` (``rill.cli.fast_send``). Verbs never catch
``RillError`` themselves. ``rill serve`` is left out: it fails exactly as it did before the CLI
grew (the server reports its own errors). typer is imported only to build a ``typer.Exit``
(``fail``), so the fast path imports it on no successful run.

Exit codes (chosen over "status code modulo 256", which collides -- 4100 % 256 == 4 -- and
would hide the one thing a script usually wants to know: retry or give up):

====  =========================================================================================
0     success
1     the server (or the SDK) answered an error; the line names it, e.g.
      ``error: stream with ID 99 was not found (1009 stream_id_not_found)``; also local file
      errors (``error: cannot access out.zip: Permission denied``)
2     usage error: a bad option or argument (typer's usage message), an unknown transport
3     no connection: cannot connect, the connection was lost, or the request timed out
130   interrupted (Ctrl-C)
====  =========================================================================================

Error lines use the SDK's message (``rill.errors`` fills it from the request the SDK sent: the
binary protocol carries only a status code), so ``Stream with ID: {0} was not found.`` becomes
``stream with ID 99 was not found`` (or ``stream with name orders ...`` when a name was used);
an error the SDK did not fill is filled the same way (``RillError.about``) from what the
command line named.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported with the first connection (``rill --version`` needs none)
    import typer

    from rill import errors

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CONNECTION = 3
EXIT_INTERRUPTED = 130

_CONNECTION_ERRORS = frozenset(
    {"cannot_establish_connection", "disconnected", "not_connected", "connection_closed",
     "tcp_error", "quic_error", "stale_client", "client_shutdown", "invalid_tls_certificate"}
)

# errors whose template says too little on a command line
_WORDING: dict[str, str] = {
    "unauthenticated": "not logged in: give --username/--password or --token, or run 'rill login'",
    "invalid_credentials": "invalid credentials (wrong username or password)",
    "unauthorized": "permission denied for this user",
    "feature_unavailable": "this server does not implement the command yet",
}

def _sentence(text: str) -> str:
    text = text.strip().rstrip(".")
    first = text.split(" ", 1)[0]
    if len(first) > 1 and first[1:].isupper():  # keep TCP, JWT, HTTP, UTF-8 ...
        return text
    return text[:1].lower() + text[1:]


def describe(error: errors.RillError, subject: dict[str, Any] | None = None) -> str:
    """The text after ``error: `` for an error raised by the SDK or the server."""
    subject = subject or {}
    name = error.name
    if name == "cannot_establish_connection":
        cause = error.__cause__
        errno = getattr(cause, "errno", None)
        detail = (os.strerror(errno) if errno else getattr(cause, "strerror", None)) or (
            str(cause) if cause else "")
        address = subject.get("address", "the server")
        return f"cannot connect to {address}" + (f" ({detail.lower()})" if detail else "")
    if name == "invalid_tls_certificate":
        address = subject.get("address", "the server")
        return (f"the certificate of {address} is not trusted: pass --ca-file with it (a rill "
                f"server's own is <data dir>/secrets/self_signed_cert.pem), or --insecure")
    if name in _CONNECTION_ERRORS:
        address = subject.get("address", "the server")
        return f"connection to {address} lost ({error.code} {name})"
    if name in _WORDING:
        return f"{_WORDING[name]} ({error.code} {name})"
    if name == "resource_not_found" and subject.get("resource_label"):
        text = f"{subject['resource_label']} was not found"
    else:  # the SDK's own message, filled from the command line's names if it is still bare
        text = error.about(subject).reason
    return f"{_sentence(text)} ({error.code} {name})"


def exit_code(error: errors.RillError) -> int:
    return EXIT_CONNECTION if error.name in _CONNECTION_ERRORS else EXIT_ERROR


def fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    """Print ``error: message`` and return the Exit to raise: ``raise fail("...")``."""
    import typer

    print_error(message)
    return typer.Exit(code)


def print_error(message: str) -> None:
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()


def report(error: BaseException, subject: dict[str, Any]) -> int | None:
    """Print the line for ``error`` and return its exit code; None for an error that is not
    the CLI's to word (a bug: its traceback is worth more than a line). A ``typer.Exit`` (from
    ``fail``: its line is already printed) gives its own code."""
    from rill import errors

    if isinstance(error, errors.RillError):
        print_error(describe(error, subject))
        return exit_code(error)
    if isinstance(error, KeyboardInterrupt):
        sys.stderr.write("\n")
        return EXIT_INTERRUPTED
    if isinstance(error, TimeoutError):  # a request that got no answer in time
        print_error(f"no answer from {subject.get('address', 'the server')} in time (timeout)")
        return EXIT_CONNECTION
    if isinstance(error, OSError):
        filename = f" {error.filename}" if error.filename else ""
        print_error(f"cannot access{filename}: {error.strerror or error}")
        return EXIT_ERROR
    typer = sys.modules.get("typer")
    if typer is not None and isinstance(error, typer.Exit):
        return int(error.exit_code)
    return None
