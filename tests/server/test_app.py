"""The server process: what it refuses at start, the privacy of what it creates, the
open-file limit it raises and the freed memory its heap keeps."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
import time

import pytest

from rill import errors
from rill.client import Client
from rill.server.app import Server, is_loopback
from rill.server.config import ServerConfig
from rill.server.core.model import Session
from rill.server.core.reconciliation import StartupRefused
from server_process import RillProcess, session


def serve_command(data_dir, *args: str) -> list[str]:
    return [sys.executable, "-m", "rill", "serve", "--data-dir", str(data_dir), *args]


def test_loopback_addresses():
    assert all(map(is_loopback, ("127.0.0.1", "127.3.4.5", "::1", "localhost")))
    assert not any(map(is_loopback, ("0.0.0.0", "::", "192.0.2.7", "10.0.0.1", "no-such-host.invalid")))


def test_a_non_loopback_listener_is_refused_in_one_line_while_root_has_the_default_password(tmp_path):
    env = dict(os.environ, RILL_QUIC_ENABLED="false", RILL_HTTP_ENABLED="false")
    refused = subprocess.run(serve_command(tmp_path / "data", "--tcp-address", "0.0.0.0:0"),
                             capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        "rill: cannot start: refusing to listen on tcp 0.0.0.0:0: the root user still has the "
        "default password. Change it first (rill user change-password), or set [root] "
        "allow_default_password = true (RILL_ROOT_ALLOW_DEFAULT_PASSWORD=true) to start anyway")
    assert "listening" not in refused.stdout


def test_a_kafka_anonymous_user_is_refused_on_a_non_loopback_address(tmp_path):
    env = dict(os.environ, RILL_QUIC_ENABLED="false", RILL_HTTP_ENABLED="false",
               RILL_ROOT_ALLOW_DEFAULT_PASSWORD="true", RILL_KAFKA_ANONYMOUS_USER="reader")
    refused = subprocess.run(serve_command(tmp_path / "data", "--tcp-address", "127.0.0.1:0",
                                           "--kafka-address", "0.0.0.0:0"),
                             capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        "rill: cannot start: refusing to listen on kafka 0.0.0.0:0: [kafka] anonymous_user lets "
        "connections act as 'reader' without logging in, which is for local development: use a "
        "loopback address, or unset it (RILL_KAFKA_ANONYMOUS_USER) so that clients log in by "
        "SASL")
    assert "listening" not in refused.stdout


def test_a_kafka_listener_on_a_non_loopback_address_needs_a_changed_root_password(tmp_path):
    env = dict(os.environ, RILL_QUIC_ENABLED="false", RILL_HTTP_ENABLED="false")
    refused = subprocess.run(serve_command(tmp_path / "data", "--tcp-address", "127.0.0.1:0",
                                           "--kafka-address", "0.0.0.0:0"),
                             capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1].startswith(
        "rill: cannot start: refusing to listen on kafka 0.0.0.0:0: the root user still has the "
        "default password.")


def test_a_kafka_listener_with_sasl_is_allowed_on_a_non_loopback_address(tmp_path):
    """In process: the decisions are taken before any listener binds (nothing binds here)."""

    async def main() -> None:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        config.root.password_hash_cost = 4
        config.quic.enabled = config.http.enabled = False
        config.kafka.enabled = True
        config.kafka.address = "0.0.0.0:0"
        server = Server(config)
        await server.core.start()
        try:
            assert server.exposed_listeners() == ["kafka 0.0.0.0:0"]
            root = Session(1, "127.0.0.1:1", "tcp", user_id=1)
            await server.core.users.change_password(root, 1, "iggy", "a-better-one")
            server._refuse_default_password()
            server._refuse_exposed_kafka()  # clients log in by SASL: allowed
            config.kafka.anonymous_user = "iggy"
            with pytest.raises(StartupRefused, match="anonymous_user"):
                server._refuse_exposed_kafka()
            config.kafka.address = "127.0.0.1:0"
            server._refuse_exposed_kafka()  # local development
        finally:
            await server.core.stop()

    asyncio.run(main())


def test_the_kafka_listener_starts_with_the_flag_and_advertises_its_address(tmp_path):
    from rill.protocol.kafka import apis, decode_response, encode_request, request_class

    server = RillProcess(tmp_path / "data", env={
        "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false",
        "RILL_KAFKA_ADVERTISED_ADDRESS": "kafka.example:19092",
        "RILL_KAFKA_ANONYMOUS_USER": "iggy"},
        args=["--kafka-address", "127.0.0.1:0"]).start()
    try:
        assert any(line.startswith("rill listening on kafka 127.0.0.1:") for line in server.output)
        request = encode_request(apis.METADATA, 12, 1, request_class(apis.METADATA)(topics=None))
        with socket.create_connection(server.kafka_address, timeout=10) as link:
            link.sendall(request)
            data = b""
            while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
                chunk = link.recv(65536)
                assert chunk
                data += chunk
        body = decode_response(apis.METADATA, 12, data[4:]).body
        assert [(b.host, b.port) for b in body.brokers] == [("kafka.example", 19092)]
    finally:
        server.kill()


def test_the_refusal_lifts_once_the_password_changes_or_on_explicit_override(tmp_path):
    """In process: the decision is taken before any listener binds (nothing binds here)."""

    async def main() -> None:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        config.root.password_hash_cost = 4
        config.quic.address = "0.0.0.0:0"
        config.http.enabled = False
        server = Server(config)
        await server.core.start()
        try:
            assert server.exposed_listeners() == ["quic 0.0.0.0:0"]
            with pytest.raises(StartupRefused, match="quic 0.0.0.0:0"):
                server._refuse_default_password()
            config.root.allow_default_password = True
            server._refuse_default_password()
            config.root.allow_default_password = False
            root = Session(1, "127.0.0.1:1", "tcp", user_id=1)
            await server.core.users.change_password(root, 1, "iggy", "a-better-one")
            server._refuse_default_password()
            config.quic.address = "127.0.0.1:0"
            config.root.password = "iggy"
            assert server.exposed_listeners() == []
        finally:
            await server.core.stop()

    asyncio.run(main())


def test_serve_help_shows_no_open_address():
    help_text = subprocess.run([sys.executable, "-m", "rill", "serve", "--help"],
                               capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, COLUMNS="200")).stdout
    assert "0.0.0.0" not in help_text and "127.0.0.1:8090" in help_text
    assert "--recover-metadata" in help_text


def test_every_file_and_directory_the_server_creates_is_private(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)  # an existing directory, readable by everyone
    os.chmod(data_dir, 0o755)
    old_umask = os.umask(0o022)  # what a shell usually has
    try:
        server = RillProcess(data_dir).start()
    finally:
        os.umask(old_umask)
    try:
        with session(server) as client:
            client.create_stream("s", stream_id=1)
            client.create_topic(1, "t", partitions_count=2)
            client.send_messages(1, "t", [b"secret payload"], partitioning=1)
            client.store_consumer_offset(1, "t", 0, consumer=1, partition_id=1)
        entries = list(data_dir.rglob("*"))
        names = {entry.name for entry in entries}
        assert {"metadata.sqlite3", "metadata.sqlite3-wal", "00000000000000000000.log",
                "00000000000000000000.index", "stream.json", "topic.json", "rill.json",
                "jwt_secret", "self_signed_key.pem", "metadata.reserve"} <= names
        too_open = {str(entry.relative_to(data_dir)): oct(stat.S_IMODE(entry.stat().st_mode))
                    for entry in [data_dir, *entries] if stat.S_IMODE(entry.stat().st_mode) & 0o077}
        assert too_open == {}
    finally:
        server.kill()


def open_file_limits(pid: int) -> tuple[int, int]:
    """(soft, hard) RLIMIT_NOFILE of a running process (Linux: /proc)."""
    with open(f"/proc/{pid}/limits") as limits:
        for line in limits:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no open-file limit in /proc")


@pytest.mark.parametrize("limits, raised", [((256, 1024), 1024), ((512, 512), 512)])
def test_the_soft_open_file_limit_is_raised_to_the_hard_one_and_sizes_the_cache(
        tmp_path, limits, raised):
    env = {"RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false",
           "RILL_LOGGING_LEVEL": "info"}
    server = RillProcess(tmp_path / "data", env=env, open_files=limits).start()
    try:
        assert open_file_limits(server.process.pid) == (raised, limits[1])
        output = "".join(server.output)
        if raised > limits[0]:
            assert f"open-file limit raised from {limits[0]} to {raised}" in output
        else:
            assert f"open-file limit {raised} (the hard limit: cannot be raised)" in output
        assert (f"storage keeps at most {raised // 2} segment files open "
                f"(max_open_files = auto, open-file limit {raised})") in output
    finally:
        server.kill()


def heap_size(pid: int) -> int:
    """The size of a running process's brk heap (Linux: /proc), in bytes."""
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            if line.rstrip().endswith("[heap]"):
                start, end = (int(bound, 16) for bound in line.split()[0].split("-"))
                return end - start
    raise AssertionError("no [heap] mapping in /proc")


def test_the_heap_keeps_heap_top_pad_of_freed_memory_for_reuse(tmp_path):
    """``[system] heap_top_pad`` is glibc's M_TOP_PAD in the server: its heap grows by that
    much spare at once (and keeps it when memory is freed), where Python's own start-up heap
    is a few MB."""
    env = {"RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false",
           "RILL_SYSTEM_HEAP_TOP_PAD": "256 MiB"}
    server = RillProcess(tmp_path / "data", env=env).start()
    try:
        with session(server) as client:  # some requests, whose buffers come from the heap
            client.create_stream("s", 1)
        assert heap_size(server.process.pid) >= 256 << 20
    finally:
        server.kill()


def test_heap_top_pad_is_a_size_below_2_gib():
    from rill.server.config import ConfigError, load_config

    assert load_config(environ={}).system.heap_top_pad == 32 << 20
    assert load_config(environ={"RILL_SYSTEM_HEAP_TOP_PAD": "0"}).system.heap_top_pad == 0
    with pytest.raises(ConfigError, match="system.heap_top_pad: must be from 0 to below 2 GiB"):
        load_config(environ={"RILL_SYSTEM_HEAP_TOP_PAD": "2 GiB"})


@pytest.mark.parametrize("max_connections, warned", [("1000", True), ("100", False)])
def test_a_warning_when_connections_and_files_may_need_more_than_the_limit(
        tmp_path, max_connections, warned):
    env = {"RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false",
           "RILL_CONNECTIONS_MAX_CONNECTIONS": max_connections}
    server = RillProcess(tmp_path / "data", env=env, open_files=(1024, 1024)).start()
    try:
        output = "".join(server.output)
        assert ("need more descriptors than the open-file limit (1024) allows" in output) is warned
    finally:
        server.kill()


def test_a_second_server_on_the_same_data_directory_is_refused_in_one_line(tmp_path):
    first = RillProcess(tmp_path / "data").start()
    try:
        with session(first) as client:
            client.create_stream("kept")
        env = dict(os.environ, RILL_QUIC_ENABLED="false", RILL_HTTP_ENABLED="false")
        second = subprocess.run(serve_command(tmp_path / "data", "--tcp-address", "127.0.0.1:0"),
                                capture_output=True, text=True, env=env, timeout=60)
        assert second.returncode == 1
        lines = second.stderr.strip().splitlines()
        assert lines[-1].startswith(
            f"rill: cannot start: the data directory {tmp_path / 'data'} is in use by another "
            f"rill server (pid {first.process.pid} on ")
        assert "Traceback" not in second.stderr
        assert not (tmp_path / "data" / "clean_shutdown").exists()  # not written under it
        with session(first) as client:
            assert [stream.name for stream in client.get_streams()] == ["kept"]
    finally:
        first.kill()
    first.restart().kill()  # a killed holder leaves no stale lock


def test_the_start_is_summed_up_in_one_line(tmp_path):
    from rill import __version__

    env = {"RILL_LOGGING_LEVEL": "info", "RILL_QUIC_ENABLED": "false"}
    server = RillProcess(tmp_path / "data", env=env).start()
    try:
        with session(server) as client:
            client.create_stream("s")
            client.create_topic("s", "t", partitions_count=3)
    finally:
        server.kill()
    server.restart()
    try:
        deadline = time.monotonic() + 10  # the line follows the "listening" ones
        while len(summaries := [line for line in server.output if " serving " in line]) < 2:
            assert time.monotonic() < deadline, "no summary line after the restart"
            time.sleep(0.05)
        summary = summaries[-1]
        (host, port), (http_host, http_port) = server.tcp_address, server.http_address
    finally:
        server.stop()
    assert (f"rill {__version__} serving {(tmp_path / 'data').resolve()} on tcp {host}:{port}, "
            f"http {http_host}:{http_port}; fsync interval (1 s); 1 streams, 1 topics, "
            f"3 partitions loaded, recovered after an unclean stop") in summary


@pytest.fixture
def busy_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("case", ["tcp port", "http port", "tcp tls", "http tls", "data dir",
                                  "config key"])
def test_a_start_that_cannot_be_made_is_one_line_on_stderr(tmp_path, busy_port, case):
    env = dict(os.environ, RILL_QUIC_ENABLED="false")
    args = ["--tcp-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0"]
    data_dir = tmp_path / "data"
    expected = {
        "tcp port": f"cannot listen on tcp 127.0.0.1:{busy_port}: ",
        "http port": f"cannot listen on http 127.0.0.1:{busy_port}: ",
        "tcp tls": "cannot load [tcp.tls] certificate /no/cert.pem and key /no/key.pem: No such file",
        "http tls": "cannot load [http.tls] certificate /no/cert.pem and key /no/key.pem: No such file",
        "data dir": "cannot use the data directory ",
        "config key": "system.no_such_key: unknown configuration key",
    }[case]
    if case == "tcp port":
        args[1] = f"127.0.0.1:{busy_port}"
    elif case == "http port":
        args[3] = f"127.0.0.1:{busy_port}"
    elif case in ("tcp tls", "http tls"):
        prefix = "RILL_TCP_TLS_" if case == "tcp tls" else "RILL_HTTP_TLS_"
        env.update({prefix + "ENABLED": "true", prefix + "CERTIFICATE": "/no/cert.pem",
                    prefix + "KEY": "/no/key.pem"})
    elif case == "data dir":
        (tmp_path / "file").write_text("not a directory")
        data_dir = tmp_path / "file" / "data"
    elif case == "config key":
        (tmp_path / "rill.toml").write_text("[system]\nno_such_key = 1\n")
        args += ["--config", str(tmp_path / "rill.toml")]
    refused = subprocess.run(serve_command(data_dir, *args), capture_output=True, text=True,
                             env=env, timeout=60)
    assert refused.returncode != 0
    assert "Traceback" not in refused.stderr and "╭" not in refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("rill: ") and expected in last, refused.stderr


def test_a_clean_stop_says_what_it_flushed(tmp_path):
    server = RillProcess(tmp_path / "data", env={"RILL_LOGGING_LEVEL": "info",
                                                 "RILL_QUIC_ENABLED": "false"}).start()
    with session(server) as client:
        client.create_stream("s")
        client.create_topic("s", "t", partitions_count=4)
    assert server.stop() == 0
    deadline = time.monotonic() + 10
    while not any("stopped cleanly" in line for line in server.output):
        assert time.monotonic() < deadline, "".join(server.output)
        time.sleep(0.05)
    line = next(line for line in server.output if "stopped cleanly" in line)
    assert ("4 partition logs synced and closed, the metadata store and the transaction journal "
            "closed") in line


def test_json_log_format_gives_one_object_per_line(tmp_path):
    server = RillProcess(tmp_path / "data", env={"RILL_LOGGING_LEVEL": "info", "RILL_LOGGING_FORMAT": "json",
                                                 "RILL_QUIC_ENABLED": "false"}).start()
    with session(server) as client:
        client.create_stream("s")
    with Client(server.address) as stranger, pytest.raises(errors.InvalidCredentials):
        stranger.login_user("iggy", "not-the-password-0451")
    assert server.stop() == 0
    logged = [line for line in server.output if not line.startswith("rill ")]  # stdout: listening, stopped
    records = [json.loads(line) for line in logged]  # every log line is one JSON object
    assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
    messages = [r["message"] for r in records]
    assert any(" serving " in m and "fsync interval" in m for m in messages)
    failed = [r for r in records if r["level"] == "warning" and "login" in r["message"].lower()]
    assert failed and "127.0.0.1" in failed[0]["message"] and "iggy" in failed[0]["message"]
    assert not any("not-the-password-0451" in line for line in server.output)
    assert any("stopped cleanly" in m for m in messages)


def test_an_unknown_log_format_is_refused_in_one_line(tmp_path):
    refused = subprocess.run(serve_command(tmp_path / "data"), capture_output=True, text=True, timeout=60,
                             env={**os.environ, "RILL_LOGGING_FORMAT": "xml"})
    assert refused.returncode == 2
    assert refused.stderr.strip() == "rill: logging.format: 'xml' is not one of text, json"
