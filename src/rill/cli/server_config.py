"""The server's configuration on the command line: ``rill serve`` and ``rill config show``.

Owns: the flags that set server keys (``--config``, ``--data-dir``, ``--tcp-address``,
``--quic-address``, ``--http-address``, ``--kafka-address``, ``--tank-address``: one definition, used by both verbs), building the
effective configuration from them (``effective_config``: defaults, file, environment, flags,
in that order), and ``rill config show``, which prints every key with its value and where it
came from (default, file, environment, flag), secrets masked. It needs no server: it shows
what ``rill serve`` with the same flags and environment would run with.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from rill.cli.context import settings
from rill.cli.params import examples

if TYPE_CHECKING:  # the server's modules load only when a verb needs them (a fast CLI start)
    from rill.server.config import ServerConfig, Sources

CONFIG_FILE = typer.Option(None, "--config", help="TOML configuration file.")
DATA_DIR = typer.Option(None, "--data-dir", help="Data directory (default ./local_data).")
TCP_ADDRESS = typer.Option(
    None, "--tcp-address", help="HOST:PORT for the binary TCP listener (default 127.0.0.1:8090).")
QUIC_ADDRESS = typer.Option(
    None, "--quic-address", help="HOST:PORT (UDP) for the binary QUIC listener (default 127.0.0.1:8080).")
HTTP_ADDRESS = typer.Option(
    None, "--http-address", help="HOST:PORT for the HTTP JSON API (default 127.0.0.1:3000).")
KAFKA_ADDRESS = typer.Option(
    None, "--kafka-address",
    help="HOST:PORT (loopback) for the Kafka listener; giving it enables the listener "
    "(default off, 127.0.0.1:9092).")

TANK_ADDRESS = typer.Option(
    None, "--tank-address",
    help="HOST:PORT for the TANK listener; giving it enables the listener (default off, "
    "127.0.0.1:11011). On a non-loopback address [tank] user must name a user.")


def effective_config(config_file: Optional[Path], data_dir: Optional[str], tcp_address: Optional[str],
                     quic_address: Optional[str], http_address: Optional[str],
                     kafka_address: Optional[str] = None,
                     tank_address: Optional[str] = None) -> tuple[ServerConfig, Sources]:
    """The configuration ``rill serve`` runs with; a bad value is one line and exit 2."""
    from rill.server.config import ConfigError, apply_flags, load_config

    sources: Sources = {}
    try:
        config = load_config(config_file, sources=sources)
        apply_flags(config, {
            "system.path": ("--data-dir", data_dir),
            "tcp.address": ("--tcp-address", tcp_address),
            "quic.address": ("--quic-address", quic_address),
            "http.address": ("--http-address", http_address),
            "kafka.address": ("--kafka-address", kafka_address),
            "kafka.enabled": ("--kafka-address", None if kafka_address is None else True),
            "tank.address": ("--tank-address", tank_address),
            "tank.enabled": ("--tank-address", None if tank_address is None else True),
        }, sources)
    except ConfigError as error:
        typer.echo(f"rill: {error}", err=True)
        raise typer.Exit(2)
    return config, sources


app = typer.Typer(name="config", help="The server's configuration.", no_args_is_help=True)


@app.command("show", epilog=examples(
    "rill config show",
    "RILL_SYSTEM_FSYNC=always rill config show --config config/server.toml",
    "rill --json config show --data-dir /var/lib/rill",
))
def show(
    ctx: typer.Context,
    config_file: Optional[Path] = CONFIG_FILE,
    data_dir: Optional[str] = DATA_DIR,
    tcp_address: Optional[str] = TCP_ADDRESS,
    quic_address: Optional[str] = QUIC_ADDRESS,
    http_address: Optional[str] = HTTP_ADDRESS,
    kafka_address: Optional[str] = KAFKA_ADDRESS,
    tank_address: Optional[str] = TANK_ADDRESS,
) -> None:
    """Show the configuration `rill serve` would run with here: every key, its value and
    where it came from (default, file, environment, flag); secrets masked."""
    config, sources = effective_config(config_file, data_dir, tcp_address, quic_address, http_address,
                                       kafka_address, tank_address)
    from rill.server.config import effective_settings

    rows = effective_settings(config, sources)
    out = settings(ctx).output
    out.emit([{"key": key, "value": value, "source": source} for key, value, source in rows],
             ("Key", "Value", "Source"), rows, title="Server configuration")


def serve(
    config: Optional[Path] = CONFIG_FILE,
    data_dir: Optional[str] = DATA_DIR,
    tcp_address: Optional[str] = TCP_ADDRESS,
    quic_address: Optional[str] = QUIC_ADDRESS,
    http_address: Optional[str] = HTTP_ADDRESS,
    kafka_address: Optional[str] = KAFKA_ADDRESS,
    tank_address: Optional[str] = TANK_ADDRESS,
    recover_metadata: bool = typer.Option(
        False, "--recover-metadata",
        help="Start although the metadata store is damaged or lost its users: move a damaged "
        "store aside, rebuild streams, topics and partitions from the data directory and "
        "create the root user from the [root] settings. Users, tokens, consumer groups and "
        "offsets cannot be rebuilt.",
    ),
) -> None:
    """Run the server on the embedded defaults, a TOML file and RILL_* overrides."""
    from rill.server.app import run

    server_settings, _ = effective_config(config, data_dir, tcp_address, quic_address,
                                          http_address, kafka_address, tank_address)
    run(server_settings, recover_metadata)


def register(root: typer.Typer) -> None:
    """Add ``rill serve`` and the ``config`` group to the root app."""
    root.command("serve", epilog=(
        "Examples:\n\n  rill serve\n\n  rill serve --data-dir /var/lib/rill --tcp-address 127.0.0.1:8090\n\n"
        "  RILL_SYSTEM_FSYNC=always rill serve --config config/server.toml\n\n"
        "Listening on an address other than loopback is refused while the root user has the "
        "default password: change it first (rill user change-password)."
    ))(serve)
    root.add_typer(app)
