"""Connections to rill from Spark processes: one logged-in client per process and server.

Owns: a module-level pool of blocking ``rill.client.Client`` objects, created lazily inside
``read()``/``write()``/driver calls (never in a data source's ``__init__``: readers and writers
are pickled, and Python workers are forked), and reused across the tasks a Python worker runs.
A pool inherited through ``fork`` is dropped, since its event-loop thread did not survive.

Riding out a server restart: a server that does not answer is tried again
``reconnectAttempts`` times (10 by default), the waits starting at ``reconnectBackoff`` seconds
(1) and doubling up to 8 times it (about a minute in all), both when a process first connects
(each round tries every address of 'servers') and when a pooled client lost its link (the SDK's
own bounded reconnect). ``with_client`` runs a read that may be repeated: a request the lost
link took with it (``Disconnected``) is asked again once the client reconnected.

Invariant: connection and login failures come out as ``RillConnectionError`` or
``RillOptionError`` naming the option to fix, never as a bare socket error; a
``RillConnectionError``'s message starts with the cause (``CannotEstablishConnection:`` or
``Disconnected:``), so it is the first thing of the error a Spark user sees.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from typing import Callable, TypeVar

from rill import errors
from rill.client import Client
from rill.client.async_client import reconnect_delay

from pyspark_rill.options import ConnectionOptions, RillOptionError


log = logging.getLogger(__name__)

T = TypeVar("T")
_RETRIES_AFTER_DISCONNECT = 3  # a read asked again at most this often when links keep dropping


class RillConnectionError(ConnectionError):
    """The rill server could not be reached (the message starts with the cause and names the
    options to look at)."""


def connection_failure(cause: type[errors.RillError], message: str) -> RillConnectionError:
    """``RillConnectionError("<Cause>: message")`` whose ``__cause__`` is a ``cause`` with the
    same words that was never raised. Python prints a chain's cause first, and one never raised
    has no traceback, so the first line of the text Spark shows (its prefix, then the Python
    traceback) is ``rill.errors.<Cause>: message``, not "Traceback (most recent call last)"."""
    failure = RillConnectionError(f"{cause.__name__}: {message}")
    failure.__cause__ = cause(reason=message)
    failure.__suppress_context__ = True
    return failure


_pool: dict[ConnectionOptions, Client] = {}
_pool_pid = os.getpid()
_lock = threading.Lock()


def connect(options: ConnectionOptions) -> Client:
    """The pooled, logged-in client for ``options`` (created on first use in this process)."""
    global _pool_pid
    with _lock:
        if _pool_pid != os.getpid():  # forked: the parent's clients are unusable here
            _pool.clear()
            _pool_pid = os.getpid()
        client = _pool.get(options)
        if client is None:
            client = _pool[options] = _open(options)
        return client


def _open(options: ConnectionOptions) -> Client:
    """A logged-in client of the first server of the 'servers' list that answers, trying the
    list ``1 + reconnectAttempts`` times with the back-off between rounds."""
    if options.transport != "tcp":
        importlib.import_module(f"rill.client.{options.transport}")  # registers the transport
    rounds = options.reconnect_attempts + 1
    started = time.monotonic()
    failures: dict[str, str] = {}
    for attempt in range(1, rounds + 1):
        for address in options.servers.split(","):
            client = Client(
                address, transport=options.transport, connect_attempts=1,
                max_reconnect_attempts=options.reconnect_attempts,
                reconnect_interval=options.reconnect_backoff, connect_timeout=5.0, timeout=300.0,
                ca_file=options.ca_file, verify_certificate=options.verify_certificate,
            )
            try:
                client.connect()
            except errors.CannotEstablishConnection as error:
                client.close()
                failures[address] = error.reason
                continue
            except errors.InvalidTlsCertificate as error:
                client.close()
                raise connection_failure(errors.InvalidTlsCertificate, (
                    f"option 'servers': the certificate of {address} is not trusted "
                    f"({error.reason}): give it with option 'caFile' (a rill server's own is "
                    "<data dir>/secrets/self_signed_cert.pem), or set verifyCertificate=false"))
            _login(client, options)
            return client
        if attempt < rounds:
            delay = reconnect_delay(options.reconnect_backoff, attempt)
            log.warning("rill: no server of %s answers (attempt %d of %d); next in %.1f s",
                        options.servers, attempt, rounds, delay)
            time.sleep(delay)
    raise connection_failure(errors.CannotEstablishConnection, (
        f"option 'servers': cannot reach a rill server at {options.servers} over "
        f"{options.transport} ({rounds} rounds, {_budget(options, started)}): "
        + "; ".join(failures.values())))


def _budget(options: ConnectionOptions, started: float) -> str:
    return (f"gave up after {time.monotonic() - started:.1f} s; options "
            f"reconnectAttempts={options.reconnect_attempts}, "
            f"reconnectBackoff={options.reconnect_backoff:g}")


def with_client(options: ConnectionOptions, work: Callable[[Client], T]) -> T:
    """``work(client)`` with the pooled client, for reads (safe to ask again): when the link
    drops under it, the client reconnects (bounded by reconnectAttempts) and ``work`` runs
    again. A server that stays away is a ``RillConnectionError`` naming the cause first."""
    started = time.monotonic()
    lost = 0
    while True:
        try:
            return work(connect(options))
        except (errors.Disconnected, errors.CannotEstablishConnection) as error:
            lost += 1
            link_lost(options, error, lost, started)


def link_lost(options: ConnectionOptions, error: errors.RillError, lost: int, started: float) -> None:
    """A read lost its link (the ``lost``-th time in a row): return to ask again (the pooled
    client reconnects on the next request), or raise the ``RillConnectionError`` a user sees."""
    if isinstance(error, errors.CannotEstablishConnection):
        raise connection_failure(errors.CannotEstablishConnection, (
            f"the connection to {options.servers} was lost and could not be made again "
            f"({_budget(options, started)}): {error.reason}"))
    if lost > _RETRIES_AFTER_DISCONNECT:
        raise connection_failure(errors.Disconnected, (
            f"the connection to {options.servers} was lost {lost} times in a row while reading"))
    log.warning("rill: the connection to %s was lost; reconnecting and asking again",
                options.servers)


def _login(client: Client, options: ConnectionOptions) -> None:
    try:
        if options.token is not None:
            client.login_with_personal_access_token(options.token)
        else:
            client.login_user(options.username, options.password)
    except (errors.InvalidCredentials, errors.InvalidPersonalAccessToken,
            errors.PersonalAccessTokenExpired, errors.UserInactive) as error:
        client.close()
        raise RillOptionError(
            f"options 'username'/'password' or 'token': the server refused the login: {error}"
        ) from None
    except BaseException:
        client.close()
        raise


def close_all() -> None:
    """Close every pooled client of this process (tests, notebooks)."""
    with _lock:
        clients = list(_pool.values()) if _pool_pid == os.getpid() else []
        _pool.clear()
    for client in clients:
        try:
            client.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
