"""``rill`` command line: ``rill <resource> <verb>`` over the SDK, and ``rill serve``.

Owns: the root typer app, its global options (kept as ``Settings`` on the click context), the
list of command groups and ``RillGroup``, the click group class whose ``invoke`` turns what a
verb raises into its error line (``failures.report``). ``rill.cli.main`` is the entry point:
it runs this app, or the fast path of ``rill message send`` (``rill.cli.fast_send``). ``rill serve`` starts the server: it is the CLI's one door into
``rill.server`` and imports it lazily, inside the verb; every other verb goes through
``rill.client`` (imported when a connection is opened, so ``--help`` and ``serve`` stay light).

Imports are lazy, so that a command answers like kcat (``benchmarks/cli_startup.py`` measures
the CPU per call): ``COMMANDS`` names the module of every command group and top-level verb,
and ``RootGroup`` imports only the one the command line asks for (``rill --version`` imports
none; ``rill --help`` all). rich, the client, aioquic, pydantic and the bench machinery are
imported by the verbs that use them (tests/cli/test_startup.py guards it).

Layout: one module per resource group (``streams``, ``topics``, ``partitions``, ``messages``,
``consumer_groups``, ``consumer_offsets``, ``users``, ``tokens``, ``clients``), ``system`` for
``ping``/``me``/``stats``/``snapshot``, ``login`` for ``login``/``logout``/``context``;
``context`` (connection and saved contexts), ``output`` (tables and JSON), ``params`` (value
parsers) and ``failures`` (error lines and exit codes: 0 ok, 1 error answered, 2 usage,
3 no connection, 130 interrupted) are shared by all.

Command-line conventions, the same for every verb:

* ``--json`` may stand anywhere before a ``--`` (``rill --json stream list`` and ``rill stream
  list --json`` are one command): ``RootGroup`` moves it in front of the verb.
* A short flag means one thing everywhere (tests/cli/test_help.py checks it): ``-a``
  ``--address``, ``-b`` ``--batches``, ``-c`` ``--consumer``, ``-d`` ``--duration``, ``-e``
  ``--message-expiry``, ``-f`` ``--file``, ``-g`` ``--group``, ``-H`` ``--header``, ``-k``
  ``--key``, ``-m`` ``--messages-per-batch``, ``-n`` ``--count``, ``-o`` ``--output``, ``-p``
  ``--password``, ``-q`` ``--quiet``, ``-s`` ``--max-size``, ``-t`` ``--token``, ``-u``
  ``--username``, ``-V`` ``--version``, ``-w`` ``--warmup``. Other options have no short form.
* A yes/no option is a flag (``--first``, ``--insecure``): help shows no value for it.
"""

from __future__ import annotations

from typing import Any, Optional

import typer
from typer.core import TyperGroup

from rill.cli import failures, plain_values
from rill.cli.context import TRANSPORTS, Settings

ANYWHERE_FLAGS = ("--json",)  # global flags a verb's own options may be mixed with


# command name -> its module: a resource group (the module's ``app``) or a top-level verb that
# the module adds with its ``register(app)``; imported when the command is used
COMMANDS: dict[str, str] = {
    "stream": "rill.cli.streams",
    "topic": "rill.cli.topics",
    "partition": "rill.cli.partitions",
    "message": "rill.cli.messages",
    "consumer-group": "rill.cli.consumer_groups",
    "consumer-offset": "rill.cli.consumer_offsets",
    "user": "rill.cli.users",
    "pat": "rill.cli.tokens",
    "client": "rill.cli.clients",
    "cluster": "rill.cli.cluster",
    "ping": "rill.cli.system",
    "me": "rill.cli.system",
    "stats": "rill.cli.system",
    "snapshot": "rill.cli.system",
    "login": "rill.cli.login",
    "logout": "rill.cli.login",
    "context": "rill.cli.login",
    "bench": "rill.cli.bench",
    "serve": "rill.cli.server_config",
    "config": "rill.cli.server_config",
}


def _module_commands(name: str) -> dict[str, Any]:
    """The click commands a CLI module adds to the root: its ``app`` group, or what its
    ``register(app)`` adds."""
    import importlib

    module = importlib.import_module(name)
    if hasattr(module, "register"):
        holder = typer.Typer()
        module.register(holder)
        return dict(typer.main.get_group(holder).commands)
    group = typer.main.get_command(module.app)
    return {group.name: group}


class RillGroup(TyperGroup):
    """The top-level click group: turns every exception a verb raises into one stderr line."""

    #: verbs whose failures are reported their own way (``serve`` runs the server as it always did)
    unhandled = frozenset({"serve"})

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (Exception, KeyboardInterrupt) as error:
            from rill import errors

            if (not isinstance(error, (errors.RillError, OSError, KeyboardInterrupt))
                    or ctx.invoked_subcommand in self.unhandled):
                raise
            code = failures.report(error, getattr(ctx.obj, "subject", None) or {})
            raise typer.Exit(code) from None


class RootGroup(RillGroup):
    """The ``rill`` group: ``ANYWHERE_FLAGS`` found after the verb are moved in front of it, and
    the commands of ``COMMANDS`` are imported when asked for."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        end = args.index("--") if "--" in args else len(args)
        found = [flag for flag in ANYWHERE_FLAGS if flag in args[:end]]
        moved = [arg for arg in args[:end] if arg not in found] + args[end:]
        return super().parse_args(ctx, found + moved)

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(name for name in super().list_commands(ctx) if name not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            for name, command in _module_commands(COMMANDS[cmd_name]).items():
                self.commands.setdefault(name, command)
        return super().get_command(ctx, cmd_name)


def _flags_show_no_type() -> None:
    """typer (0.2x) prints ``<bool>`` beside every flag in rich help; a flag takes no value."""
    option = getattr(typer.core, "TyperOption", None)
    shown = getattr(option, "display_type_rich", None)
    if shown is None or getattr(shown, "flags_hidden", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> Any:
        return None if self.is_flag else shown(self, ctx)

    display_type_rich.flags_hidden = True  # type: ignore[attr-defined]
    option.display_type_rich = display_type_rich


_flags_show_no_type()
plain_values.install()  # no pydantic for plain strings and numbers

app = typer.Typer(
    name="rill",
    help="rill: a persistent message streaming server speaking the Iggy binary protocol.",
    no_args_is_help=True,
    add_completion=True,
    cls=RootGroup,
    pretty_exceptions_show_locals=False,  # never print a password held in a local variable
    epilog="Examples:\n\n  rill -u iggy login\n\n  rill stream create orders\n\n"
    "  rill topic create orders eu --partitions 3\n\n  rill message send orders eu hello world\n\n"
    "  rill --json message poll orders eu --first --count 10\n\n"
    "Exit codes: 0 ok, 1 the server answered an error, 2 usage error, 3 no connection, 130 interrupted.",
)


def _transport_callback(value: Optional[str]) -> Optional[str]:
    if value is not None and value.lower() not in TRANSPORTS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(TRANSPORTS)}")
    return None if value is None else value.lower()


def _version_callback(value: bool) -> None:
    if value:
        import platform

        from rill import __version__

        typer.echo(f"rill {__version__} (Python {platform.python_version()})")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", "-V", is_eager=True,
                                 callback=_version_callback, help="Print rill's version and exit."),
    transport: Optional[str] = typer.Option(
        None, "--transport", callback=_transport_callback, metavar="tcp|quic|http",
        help="tcp (default), quic or http.",
    ),
    address: Optional[str] = typer.Option(
        None, "--address", "-a", envvar="RILL_ADDRESS", show_envvar=True,
        help="Server HOST:PORT (default: the saved context's, else 127.0.0.1:8090 for tcp, "
        ":8080 for quic, :3000 for http).",
    ),
    username: Optional[str] = typer.Option(None, "--username", "-u", envvar="RILL_USERNAME", show_envvar=True,
                                           help="Log in as this user (the password is prompted)."),
    password: Optional[str] = typer.Option(None, "--password", "-p", envvar="RILL_PASSWORD", show_envvar=False,
                                           help="Password for --username (prefer the prompt)."),
    token: Optional[str] = typer.Option(None, "--token", "-t", envvar="RILL_TOKEN", show_envvar=False,
                                        help="Log in with a personal access token."),
    context: Optional[str] = typer.Option(None, "--context", envvar="RILL_CONTEXT", show_envvar=True,
                                          help="Use this saved context (default: the current one)."),
    ca_file: Optional[str] = typer.Option(
        None, "--ca-file", envvar="RILL_CA_FILE", show_envvar=True,
        help="Trust this PEM certificate or CA for QUIC and TLS (a rill server's self-signed "
        "one is <data dir>/secrets/self_signed_cert.pem).",
    ),
    insecure: bool = typer.Option(
        False, "--insecure", help="Do not verify the server's certificate (a self-signed local "
        "server whose certificate you cannot get; prefer --ca-file).",
    ),
    json_output: bool = typer.Option(False, "--json", help="Machine-readable JSON output (also "
                                     "accepted after the verb: rill stream list --json)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No confirmations or progress bars."),
) -> None:
    """rill command-line tool: manage a rill (or Iggy 0.4) server and its messages."""
    import logging

    # aioquic reports a refused handshake on its own logger; the CLI's error line says it better
    logging.getLogger("quic").setLevel(logging.ERROR)
    ctx.obj = Settings(
        transport=transport, address=address, username=username, password=password, token=token,
        context=context, json_mode=json_output, quiet=quiet, ca_file=ca_file,
        insecure=insecure or None,
    )


if __name__ == "__main__":
    app()
