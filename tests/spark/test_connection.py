"""Connections from Spark processes: the pool, failover along the 'servers' list, and the
messages that name the option to fix."""

from __future__ import annotations

import threading
import time
import traceback

import pytest

from pyspark_rill.connection import RillConnectionError, close_all, connect, with_client
from pyspark_rill.options import ConnectionOptions, RillOptionError
from rill import errors
from rill.client import Client
from server_process import RillProcess


def test_the_first_server_that_answers_is_used_and_pooled(rill) -> None:
    options = ConnectionOptions(f"127.0.0.1:1,{rill.address}", "tcp", "iggy", "iggy", None)
    client = connect(options)
    assert client.get_stream("no such stream") is None  # logged in
    assert connect(options) is client
    close_all()
    assert connect(options) is not client
    close_all()


def test_unreachable_servers_and_bad_credentials_name_the_option(rill) -> None:
    unreachable = ConnectionOptions("127.0.0.1:1,127.0.0.1:2", "tcp", "iggy", "iggy", None,
                                    reconnect_attempts=2, reconnect_backoff=0.05)
    with pytest.raises(RillConnectionError) as caught:
        connect(unreachable)
    message = str(caught.value)
    assert message.startswith("CannotEstablishConnection: option 'servers': cannot reach a rill "
                              "server at 127.0.0.1:1,127.0.0.1:2 over tcp (3 rounds, gave up after ")
    assert "options reconnectAttempts=2, reconnectBackoff=0.05" in message
    assert isinstance(caught.value.__cause__, errors.CannotEstablishConnection)  # printed first
    with pytest.raises(RillOptionError, match="'username'/'password' or 'token'"):
        connect(ConnectionOptions(rill.address, "tcp", "iggy", "wrong", None))


def test_a_read_rides_out_a_server_restart(tmp_path) -> None:
    server = RillProcess(tmp_path / "data").start()
    try:
        options = ConnectionOptions(server.address, "tcp", "iggy", "iggy", None,
                                    reconnect_attempts=8, reconnect_backoff=0.25)
        with_client(options, lambda client: client.create_stream("restarted"))
        server.kill()
        threading.Timer(2.0, server.restart).start()  # back after two seconds
        assert with_client(options, lambda client: client.get_stream("restarted")).name == "restarted"
    finally:
        close_all()
        server.kill()


def test_a_server_that_stays_away_fails_the_read_with_the_cause_first(tmp_path) -> None:
    server = RillProcess(tmp_path / "data").start()
    address = server.address
    options = ConnectionOptions(address, "tcp", "iggy", "iggy", None,
                                reconnect_attempts=2, reconnect_backoff=0.05)
    try:
        with_client(options, lambda client: client.ping())
    finally:
        server.kill()
    try:
        with pytest.raises(RillConnectionError) as caught:
            with_client(options, lambda client: client.get_streams())
    finally:
        close_all()
    first_line = "".join(traceback.TracebackException.from_exception(caught.value).format()).splitlines()[0]
    assert first_line.startswith(f"rill.errors.CannotEstablishConnection: the connection to "
                                 f"{address} was lost and could not be made again")


def _stream_into_memory(spark, server, name: str, **options: str):
    return (spark.readStream.format("rill")
            .options(servers=server.address, username="iggy", password="iggy", stream="s",
                     topic="t", startingOffsets="earliest", **options).load()
            .select("partition", "offset").writeStream.format("memory").queryName(name)
            .trigger(processingTime="300 milliseconds").start())


def _rows(spark, name: str) -> list[tuple[int, int]]:
    return sorted(tuple(row) for row in spark.sql(f"select partition, offset from {name}").collect())


def _wait(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def _serving_topic(tmp_path) -> RillProcess:
    server = RillProcess(tmp_path / "data", env={"RILL_QUIC_ENABLED": "false"}).start()
    with Client(server.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("s")
        client.create_topic("s", "t", partitions_count=2)
        client.send_messages("s", "t", [b"before"] * 40, partitioning=1)
    return server


def test_a_streaming_query_rides_out_a_server_restart_with_the_defaults(spark, tmp_path) -> None:
    server = _serving_topic(tmp_path)
    query = _stream_into_memory(spark, server, "rides_out")
    try:
        assert _wait(lambda: len(_rows(spark, "rides_out")) == 40, 60), query.exception()
        server.kill()
        time.sleep(8)  # a restart that takes seconds (the old connector gave up after ~1.5 s)
        server.restart()
        with Client(server.address) as client:
            client.login_user("iggy", "iggy")
            client.send_messages("s", "t", [b"after"] * 25, partitioning=2)
        assert _wait(lambda: len(_rows(spark, "rides_out")) == 65 or not query.isActive, 90)
        assert query.isActive, query.exception()
        assert _rows(spark, "rides_out") == [(1, n) for n in range(40)] + [(2, n) for n in range(25)]
    finally:
        query.stop()
        close_all()
        server.kill()


def test_a_query_whose_server_stays_away_fails_with_the_cause_on_the_first_line(spark, tmp_path) -> None:
    server = _serving_topic(tmp_path)
    query = _stream_into_memory(spark, server, "gives_up", reconnectAttempts="1", reconnectBackoff="0.2")
    try:
        assert _wait(lambda: len(_rows(spark, "gives_up")) == 40, 60)
        server.kill()
        assert _wait(lambda: not query.isActive, 60), "the query kept running without its server"
        first_line = str(query.exception()).splitlines()[0]
        assert "rill.errors.CannotEstablishConnection: the connection to " in first_line, first_line
        assert "reconnectAttempts=1" in first_line
    finally:
        query.stop()
        close_all()
        server.kill()
