"""The fast path of ``rill message send``: the common command line without typer or asyncio.

Owns: ``run(args)``, called by the entry point (``rill.cli.main``) before the typer app is
imported. ``rill [global options] message send STREAM TOPIC MESSAGE... [--partition N |
--key KEY]`` over TCP is most of what scripts run, and typer (~0.12 s of CPU) plus asyncio and
the SDK's codec of every command (~0.3 s) cost far more than the request; this path parses
that one shape with a small parser and sends over a blocking socket (``rill.client.link``),
through the same pieces as the typer verb: ``Settings.resolve`` and ``log_in``
(``rill.cli.context``: options, environment, saved contexts, the password prompt), the
commands' own codecs, ``failures.report`` (error lines and exit codes), ``Output`` and
``report_sent`` (the confirmation). tests/cli/test_fast_send.py runs each case through both
paths and compares stdout, stderr and the exit code.

Anything else returns ``None`` and the full CLI runs: ``--help``, ``--file``, ``--header``,
``--key-separator``, ``--batch-size``, ``--``, short options with attached values, unknown
options, a value that is not plainly valid (the typer verb words the usage error), and a QUIC or
HTTP transport (given or saved in the context).
"""

from __future__ import annotations

import os
from typing import Any

# global options before the resource: option -> (Settings field, environment variable)
_GLOBAL_VALUES = {
    "--transport": ("transport", None),
    "--address": ("address", "RILL_ADDRESS"), "-a": ("address", "RILL_ADDRESS"),
    "--username": ("username", "RILL_USERNAME"), "-u": ("username", "RILL_USERNAME"),
    "--password": ("password", "RILL_PASSWORD"), "-p": ("password", "RILL_PASSWORD"),
    "--token": ("token", "RILL_TOKEN"), "-t": ("token", "RILL_TOKEN"),
    "--context": ("context", "RILL_CONTEXT"),
    "--ca-file": ("ca_file", "RILL_CA_FILE"),
}
_GLOBAL_FLAGS = {"--json": "json_mode", "--quiet": "quiet", "-q": "quiet", "--insecure": "insecure"}
_SEND_VALUES = {"--partition": "partition", "--key": "key", "-k": "key"}
_MAX_PARTITION = 0xFFFFFFFF


def _identifier(text: str) -> int | str | None:
    """A plainly valid stream or topic (as ``params.identifier`` reads it), else None."""
    text = text.strip()
    if not text or len(text.encode("utf-8", "surrogatepass")) > 255:
        return None
    if text.isdigit():
        if not (text.isascii() and 0 < int(text) <= _MAX_PARTITION):
            return None
        return int(text)
    return text


def parse(args: list[str]) -> dict[str, Any] | None:
    """The global options, stream, topic, messages, partition and key of a plain ``message
    send`` command line; None when it is anything else."""
    options: dict[str, Any] = {}
    words: list[str] = []  # the resource, the verb, then its positional arguments
    verb: dict[str, str] = {}
    position = 0
    while position < len(args):
        arg = args[position]
        position += 1
        if arg == "--json":  # accepted anywhere (RootGroup moves it in front of the verb)
            options["json_mode"] = True
            continue
        if not arg.startswith("-") or arg == "-":
            words.append(arg)
            continue
        name, equals, attached = arg.partition("=")
        if equals and not name.startswith("--"):
            return None
        table: dict[str, Any] = _GLOBAL_VALUES if not words else _SEND_VALUES if len(words) >= 2 else {}
        if not words and name in _GLOBAL_FLAGS and not equals:
            options[_GLOBAL_FLAGS[name]] = True
            continue
        if name not in table:
            return None  # --help, --file, --header, a cluster of short flags, ... : typer's
        if equals:
            value = attached
        elif position < len(args) and not args[position].startswith("-"):
            value = args[position]
            position += 1
        else:
            return None
        if words:
            verb[table[name]] = value
        else:
            options[table[name][0]] = value
    if words[:2] != ["message", "send"] or len(words) < 5:
        return None
    stream, topic = _identifier(words[2]), _identifier(words[3])
    if stream is None or topic is None:
        return None
    partition = verb.get("partition")
    if partition is not None:
        if not (partition.isascii() and partition.isdigit() and 0 < int(partition) <= _MAX_PARTITION):
            return None
    key = verb.get("key")
    if key is not None and (partition is not None or not 0 < len(key.encode("utf-8", "surrogatepass")) <= 255):
        return None
    try:
        payloads = [text.encode("utf-8") for text in words[4:]]
    except UnicodeEncodeError:
        return None
    if not all(payloads):
        return None  # an empty message: the protocol's refusal, worded by the typer verb
    for field, variable in _GLOBAL_VALUES.values():
        if field not in options and variable and os.environ.get(variable):
            options[field] = os.environ[variable]
    transport = options.get("transport")
    if transport is not None:
        if transport.lower() != "tcp":
            return None
        options["transport"] = "tcp"
    return {"options": options, "stream": stream, "topic": topic, "payloads": payloads,
            "partition": None if partition is None else int(partition), "key": key}


def report_sent(out: Any, sent: int, stream: int | str, topic: int | str, target: str) -> None:
    """The confirmation of ``rill message send`` (both paths)."""
    out.done(f"sent {sent} message(s) to topic {topic} of stream {stream} ({target})",
             command="send_messages", stream=stream, topic=topic, messages_count=sent)


def run(args: list[str]) -> int | None:
    """Send as ``rill message send`` would and return the exit code; None: not handled here."""
    parsed = parse(args)
    if parsed is None:
        return None
    from rill.cli import failures
    from rill.cli.context import Settings

    options = Settings(**parsed["options"])
    stream, topic, partition, key = parsed["stream"], parsed["topic"], parsed["partition"], parsed["key"]
    try:
        options.about(stream=stream, topic=topic, partition=partition)
        resolved = options.resolve()
        if resolved["transport"] != "tcp":
            return None  # a saved QUIC or HTTP context: the SDK's transports
        send(options, resolved, parsed)
    except (Exception, KeyboardInterrupt) as error:
        code = failures.report(error, options.subject)
        if code is None:
            raise
        return code
    target = f"partition {partition}" if partition else f"key {key!r}" if key else "balanced"
    report_sent(options.output, len(parsed["payloads"]), stream, topic, target)
    return 0


def send(options: Any, resolved: dict[str, Any], parsed: dict[str, Any]) -> None:
    """Connect, log in with the resolved credential, send the payloads as one batch."""
    from rill.cli.context import log_in
    from rill.cli.failures import EXIT_USAGE, fail
    from rill.client.link import BlockingLink
    from rill.protocol.iggy.messages import Message
    from rill.protocol.iggy.primitives import Partitioning

    address = resolved["address"]
    options.about(address=address)
    try:
        link = BlockingLink(address, connect_timeout=10.0)
    except ValueError as error:  # a malformed address
        raise fail(f"invalid address {address!r}: {error}", EXIT_USAGE) from None
    partition, key = parsed["partition"], parsed["key"]
    partitioning = (Partitioning.messages_key(key) if key is not None else
                    Partitioning.partition_id(partition) if partition is not None else None)
    with link:
        log_in(options, link, resolved)  # type: ignore[arg-type]  (the Client's two logins)
        link.send_messages(parsed["stream"], parsed["topic"],
                           [Message(payload) for payload in parsed["payloads"]], partitioning)
