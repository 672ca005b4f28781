"""Connections to rill from Spark processes: one logged-in client per process and server.

Owns: a module-level pool of blocking ``rill.client.Client`` objects, created lazily inside
``read()``/``write()``/driver calls (never in a data source's ``__init__``: readers and writers
are pickled, and Python workers are forked), and reused across the tasks a Python worker runs.
A pool inherited through ``fork`` is dropped, since its event-loop thread did not survive.

Invariant: connection and login failures come out as ``RillConnectionError`` or
``RillOptionError`` naming the option to fix, never as a bare socket error.
"""

from __future__ import annotations

import importlib
import os
import threading

from rill import errors
from rill.client import Client

from pyspark_rill.options import ConnectionOptions, RillOptionError


class RillConnectionError(ConnectionError):
    """The rill server could not be reached (the message names the 'servers' option)."""


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
    """A logged-in client of the first server of the 'servers' list that answers."""
    if options.transport != "tcp":
        importlib.import_module(f"rill.client.{options.transport}")  # registers the transport
    failures = []
    for address in options.servers.split(","):
        client = Client(
            address, transport=options.transport, connect_attempts=3, max_reconnect_attempts=3,
            reconnect_interval=0.5, connect_timeout=5.0, timeout=300.0,
            ca_file=options.ca_file, verify_certificate=options.verify_certificate,
        )
        try:
            client.connect()
        except errors.CannotEstablishConnection as error:
            client.close()
            failures.append(error.reason)
            continue
        except errors.InvalidTlsCertificate as error:
            client.close()
            raise RillConnectionError(
                f"option 'servers': the certificate of {address} is not trusted ({error.reason}): "
                "give it with option 'caFile' (a rill server's own is "
                "<data dir>/secrets/self_signed_cert.pem), or set verifyCertificate=false"
            ) from None
        _login(client, options)
        return client
    raise RillConnectionError(
        f"option 'servers': cannot reach a rill server at {options.servers} over "
        f"{options.transport}: " + "; ".join(failures))


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
