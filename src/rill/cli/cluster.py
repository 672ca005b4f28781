"""``rill cluster status``: the members, the controller and every partition's leader, epoch,
replicas, ISR and follower lag, as the cluster's nodes see them.

Owns: the ``cluster`` command group. ``status`` reads ``GET /cluster`` (an HTTP route) of the
node it is pointed at, then, since a follower's lag is known only on the partition's leader,
``GET /cluster`` of every other live member's ``http`` listener, and takes from each the
follower rows of the partitions that member leads. It logs in to each node with the same
credential (token or username and password).

Which HTTP API: ``--http HOST:PORT`` (or ``RILL_HTTP_ADDRESS``); else the address when the
transport is http (``--transport http``); else port 3000 (the HTTP listener's default) on the
host of the address. Outcomes: a node that does not answer is one ``error:`` line (exit 3
when it is the node pointed at; for another member the table is still printed, its partitions'
lag shown as unknown, and the exit code is 1); a standalone server is one ``error:`` line, exit
1. ``--json`` prints ``GET /cluster``'s document with every partition's ``followers`` filled
from its leader and ``unreachable``, the members that did not answer.
"""

from __future__ import annotations

from typing import Any, Optional

import typer

from rill.cli.context import connect, log_in, settings
from rill.cli.failures import EXIT_ERROR, fail, print_error
from rill.cli.params import examples

app = typer.Typer(name="cluster", help="See the cluster: members, controller, leaders, ISR, lag.",
                  no_args_is_help=True)

DEFAULT_HTTP_PORT = 3000


@app.callback()
def cluster() -> None:
    """See the cluster: members, controller, leaders, ISR, lag."""  # a group, not one command


def http_address(resolved: dict[str, Any], given: str | None) -> str:
    """The HTTP API to ask (see the module's docstring)."""
    if given:
        return given
    address = str(resolved["address"])
    if resolved["transport"] == "http":
        return address
    host = address.rsplit(":", 1)[0] if ":" in address else address
    return f"{host}:{DEFAULT_HTTP_PORT}"


def read_status(ctx: typer.Context, resolved: dict[str, Any], address: str) -> dict[str, Any]:
    """``GET /cluster`` of the node at ``address``, logged in with the resolved credential."""
    options = settings(ctx)
    client = connect(options, {**resolved, "transport": "http", "address": address})
    try:
        log_in(options, client, resolved)
        return client.get_cluster()
    finally:
        client.close()


def _key(row: dict[str, Any]) -> tuple[int, int, int]:
    return (row["stream_id"], row["topic_id"], row["partition_id"])


def gather(ctx: typer.Context, resolved: dict[str, Any], first: dict[str, Any],
           asked: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``first`` with each partition's follower rows taken from the member that leads it; and
    the members that did not answer."""
    from rill import errors

    leaders_rows: dict[tuple[int, int, int], list[dict[str, Any]]] = {
        _key(row): row["followers"] for row in first["partitions"] if "followers" in row}
    unreachable: list[dict[str, Any]] = []
    for member in first["members"]:
        node = member["node_id"]
        if node == first["node_id"]:
            continue
        address = (member.get("listeners") or {}).get("http")
        if not address:
            unreachable.append({"node_id": node, "address": None,
                                "error": "it advertises no http listener"})
            continue
        try:
            status = read_status(ctx, resolved, address)
        except errors.RillError as error:
            unreachable.append({"node_id": node, "address": address, "error": str(error)})
            continue
        for row in status.get("partitions") or []:
            if row.get("leader") == node and "followers" in row:
                leaders_rows[_key(row)] = row["followers"]
    partitions = []
    for row in first["partitions"]:
        row = dict(row)
        row["followers"] = leaders_rows.get(_key(row))  # None: its leader did not say
        partitions.append(row)
    return {**first, "partitions": partitions, "asked": asked}, unreachable


def _name(row: dict[str, Any], what: str) -> Any:
    """A partition's stream or topic name; its id while the node has not applied it yet."""
    name = row.get(what)
    return name if name is not None else row[f"{what}_id"]


def _nodes(ids: list[int]) -> str:
    return ",".join(str(node) for node in ids) if ids else "-"


def _lag(row: dict[str, Any]) -> str:
    followers = row.get("followers")
    if row.get("leader") is None:
        return "no leader"
    if followers is None:
        return "unknown"
    if not followers:
        return "-"
    return " ".join(f"{f['node_id']}:{f['lag_messages']} ({float(f['lag_seconds']):.1f}s)"
                    for f in followers)


def show(ctx: typer.Context, status: dict[str, Any]) -> None:
    out = settings(ctx).output
    if out.json_mode:
        out.json(status)
        return
    controller = status["controller_id"]
    counters = status.get("counters") or {}
    out.record([
        ("Cluster", status["name"]),
        ("Asked", f"node {status['node_id']} at {status['asked']}"),
        ("Controller", "none (electing)" if controller is None else f"node {controller}"),
        ("Live members", len(status["members"])),
        ("Under-replicated partitions", counters.get("under_replicated_partitions", 0)),
    ], title="Cluster")
    rows = []
    for member in status["members"]:
        node = member["node_id"]
        mark = " (controller)" if node == controller else ""
        listeners = ", ".join(f"{name} {address}"
                              for name, address in sorted((member.get("listeners") or {}).items()))
        rows.append((f"{node}{mark}", listeners))
    out.table(("Node", "Listeners"), rows, title="Members")
    out.table(
        ("Stream", "Topic", "Partition", "Leader", "Epoch", "Replicas", "ISR", "Offline",
         "Follower lag (node:messages)"),
        [(_name(row, "stream"), _name(row, "topic"), row["partition_id"],
          "-" if row["leader"] is None else row["leader"], row["leader_epoch"],
          _nodes(row["replicas"]), _nodes(row["isr"]), _nodes(row.get("offline") or []), _lag(row))
         for row in status["partitions"]],
        title="Partitions", droppable=("Offline", "Epoch"))


@app.command("status", epilog=examples(
    "rill cluster status",
    "rill cluster status --http 10.0.0.2:3000",
    "rill --json cluster status",
))
def cluster_status(
    ctx: typer.Context,
    http: Optional[str] = typer.Option(
        None, "--http", envvar="RILL_HTTP_ADDRESS",
        help="The node's HTTP API (default: the address with --transport http, else port "
             f"{DEFAULT_HTTP_PORT} on the address's host)."),
) -> None:
    """Members (the controller marked), and per partition its leader, epoch, replicas, ISR and
    the lag of each follower (asked of the partition's leader)."""
    options = settings(ctx)
    resolved = options.resolve()
    asked = http_address(resolved, http)
    options.about(address=asked)
    first = read_status(ctx, resolved, asked)
    if first.get("mode") != "cluster":
        raise fail(f"the server at {asked} runs standalone: it is no member of a cluster "
                   "([cluster] etcd_endpoints is empty)")
    status, unreachable = gather(ctx, resolved, first, asked)
    status["unreachable"] = unreachable
    show(ctx, status)
    for node in unreachable:
        print_error(f"node {node['node_id']} at {node['address']} did not answer "
                    f"({node['error']}): the lag of the partitions it leads is unknown")
    if unreachable:
        raise typer.Exit(EXIT_ERROR)
