"""``rill`` command line: ``rill serve`` starts the server (the CLI's one door into the server)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(
    name="rill",
    help="rill: a persistent message streaming server speaking the Iggy binary protocol.",
    no_args_is_help=True,
    add_completion=True,
)


@app.callback()
def main() -> None:
    """rill command-line tool."""


@app.command(
    epilog="Examples:\n\n  rill serve\n\n  rill serve --data-dir /var/lib/rill --tcp-address 0.0.0.0:8090\n\n"
    "  RILL_SYSTEM_FSYNC=always rill serve --config config/server.toml"
)
def serve(
    config: Optional[Path] = typer.Option(None, "--config", help="TOML configuration file."),
    data_dir: Optional[str] = typer.Option(
        None, "--data-dir", help="Data directory (default ./local_data)."
    ),
    tcp_address: Optional[str] = typer.Option(
        None, "--tcp-address", help="HOST:PORT for the binary TCP listener (default 127.0.0.1:8090)."
    ),
) -> None:
    """Run the server on the embedded defaults, a TOML file and RILL_* overrides."""
    from rill.server.app import run
    from rill.server.config import ConfigError, load_config, split_address

    try:
        settings = load_config(config)
        if data_dir is not None:
            settings.system.path = data_dir
        if tcp_address is not None:
            split_address(tcp_address, "--tcp-address")
            settings.tcp.address = tcp_address
    except ConfigError as error:
        typer.echo(f"rill: {error}", err=True)
        raise typer.Exit(2)
    run(settings)


if __name__ == "__main__":
    app()
