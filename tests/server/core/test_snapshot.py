"""GET_SNAPSHOT_FILE (wire §3.1, §4.13): the ZIP builder on its own, then over real sockets."""

from __future__ import annotations

import io
import os
import socket
import struct
import subprocess
import sys
import zipfile

import pytest

from rill import errors
from rill.client import Client
from rill.protocol.permissions import GlobalPermissions, Permissions
from rill.protocol.primitives import SnapshotCompression, SnapshotType
from rill.server.core.snapshot import COMPRESSION_METHODS, build_snapshot

EXPECTED_METHOD = {
    SnapshotCompression.STORED: zipfile.ZIP_STORED,
    SnapshotCompression.DEFLATED: zipfile.ZIP_DEFLATED,
    SnapshotCompression.BZIP2: zipfile.ZIP_BZIP2,
    SnapshotCompression.ZSTD: getattr(zipfile, "ZIP_ZSTANDARD", zipfile.ZIP_DEFLATED),
    SnapshotCompression.LZMA: zipfile.ZIP_LZMA,
    SnapshotCompression.XZ: zipfile.ZIP_LZMA,
}
GATHERED_ALWAYS = (
    SnapshotType.FILESYSTEM_OVERVIEW,
    SnapshotType.PROCESS_LIST,
    SnapshotType.RESOURCE_USAGE,
    SnapshotType.TEST,
)


def open_zip(data: bytes) -> zipfile.ZipFile:
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert archive.testzip() is None  # every entry's CRC checks out
    return archive


# -- the builder -------------------------------------------------------------------------------


def test_every_compression_byte_has_a_zip_method():
    assert COMPRESSION_METHODS == EXPECTED_METHOD


def test_builder_writes_one_entry_per_type(tmp_path):
    (tmp_path / "streams" / "1").mkdir(parents=True)
    (tmp_path / "streams" / "1" / "seg.log").write_bytes(b"x" * 1234)
    data = build_snapshot(SnapshotCompression.BZIP2, GATHERED_ALWAYS, tmp_path, tmp_path / "logs")
    archive = open_zip(data)
    assert sorted(archive.namelist()) == sorted(
        ["filesystem_overview.txt", "process_list.txt", "resource_usage.txt", "test.txt"]
    )
    assert all(info.compress_type == zipfile.ZIP_BZIP2 for info in archive.infolist())
    assert archive.read("test.txt") == b"test"
    overview = archive.read("filesystem_overview.txt").decode()
    assert "streams/1/seg.log" in overview and " 1234 " in overview
    processes = archive.read("process_list.txt").decode()
    assert f" {os.getpid()} " in processes
    usage = archive.read("resource_usage.txt").decode()
    assert f"process {os.getpid()}" in usage and "load average" in usage and "threads" in usage


def test_builder_skips_server_logs_when_there_are_none(tmp_path):
    data = build_snapshot(
        SnapshotCompression.STORED, (SnapshotType.SERVER_LOGS, SnapshotType.TEST),
        tmp_path, tmp_path / "logs",
    )
    assert open_zip(data).namelist() == ["test.txt"]
    (tmp_path / "logs").mkdir()
    data = build_snapshot(SnapshotCompression.STORED, (SnapshotType.SERVER_LOGS,), tmp_path,
                          tmp_path / "logs")
    assert open_zip(data).namelist() == []


def test_builder_concatenates_log_files_oldest_first(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "b.log").write_text("second\n")
    (logs / "a.log").write_text("third\n")
    (logs / "c.log").write_text("first\n")
    for age, name in ((300, "c.log"), (200, "b.log"), (100, "a.log")):
        mtime = 1_700_000_000 - age
        os.utime(logs / name, (mtime, mtime))
    data = build_snapshot(SnapshotCompression.LZMA, (SnapshotType.SERVER_LOGS,), tmp_path, logs)
    archive = open_zip(data)
    assert archive.read("server_logs.txt") == b"first\nsecond\nthird\n"
    assert archive.getinfo("server_logs.txt").compress_type == zipfile.ZIP_LZMA


def test_builder_writes_a_repeated_type_once(tmp_path):
    data = build_snapshot(
        SnapshotCompression.DEFLATED, (SnapshotType.TEST, SnapshotType.TEST), tmp_path, tmp_path
    )
    assert open_zip(data).namelist() == ["test.txt"]


def test_builder_skips_a_type_that_fails(tmp_path, monkeypatch):
    import rill.server.core.snapshot as snapshot

    def broken():
        raise RuntimeError("no process table here")

    monkeypatch.setattr(snapshot, "process_list", broken)
    data = build_snapshot(
        SnapshotCompression.DEFLATED, (SnapshotType.PROCESS_LIST, SnapshotType.TEST),
        tmp_path, tmp_path,
    )
    assert open_zip(data).namelist() == ["test.txt"]


# -- over the wire -----------------------------------------------------------------------------


@pytest.fixture
def client(rill_server):
    with Client(rill_server.address) as client:
        client.login_user("iggy", "iggy")
        yield client


@pytest.mark.parametrize("compression", list(SnapshotCompression))
def test_snapshot_has_the_requested_types_and_compression(client, compression):
    data = client.get_snapshot(compression, GATHERED_ALWAYS)
    archive = open_zip(data)
    assert sorted(archive.namelist()) == sorted(f"{t.name.lower()}.txt" for t in GATHERED_ALWAYS)
    assert {info.compress_type for info in archive.infolist()} == {EXPECTED_METHOD[compression]}
    assert archive.read("test.txt") == b"test"
    assert b"metadata.sqlite3" in archive.read("filesystem_overview.txt")


def test_snapshot_subsets_and_default_request(client):
    archive = open_zip(client.get_snapshot(SnapshotCompression.STORED, [SnapshotType.TEST]))
    assert archive.namelist() == ["test.txt"]
    assert archive.getinfo("test.txt").compress_type == zipfile.ZIP_STORED
    assert open_zip(client.get_snapshot(SnapshotCompression.STORED, [])).namelist() == []
    default = open_zip(client.get_snapshot())  # deflated; server_logs skipped: no log files
    assert sorted(default.namelist()) == [
        "filesystem_overview.txt", "process_list.txt", "resource_usage.txt",
    ]
    assert client.get_stats().clients_count == 1  # the connection is still serving


def test_snapshot_includes_server_logs_from_the_data_directory(rill_factory, tmp_path):
    data_dir = tmp_path / "with-logs"
    (data_dir / "logs").mkdir(parents=True)
    (data_dir / "logs" / "rill.log").write_text("a line from the server log\n")
    server = rill_factory(data_dir=data_dir).start()
    with Client(server.address) as client:
        client.login_user("iggy", "iggy")
        archive = open_zip(client.get_snapshot(SnapshotCompression.DEFLATED,
                                               [SnapshotType.SERVER_LOGS]))
        assert archive.read("server_logs.txt") == b"a line from the server log\n"


def test_snapshot_needs_the_server_read_permission(rill_server):
    with Client(rill_server.address) as client:
        with pytest.raises(errors.Unauthenticated):
            client.get_snapshot(SnapshotCompression.STORED, [SnapshotType.TEST])
        client.login_user("iggy", "iggy")
        client.create_user("nobody", "secret-1")
        client.create_user("operator", "secret-2",
                           permissions=Permissions(GlobalPermissions(read_servers=True)))
    with Client(rill_server.address) as plain:
        plain.login_user("nobody", "secret-1")
        with pytest.raises(errors.Unauthorized):
            plain.get_snapshot(SnapshotCompression.STORED, [SnapshotType.PROCESS_LIST])
    with Client(rill_server.address) as operator:
        operator.login_user("operator", "secret-2")
        data = operator.get_snapshot(SnapshotCompression.STORED, [SnapshotType.TEST])
        assert open_zip(data).read("test.txt") == b"test"


def test_the_process_list_shows_no_other_process_command_line(tmp_path):
    secret = "--password=hunter2-" + os.urandom(4).hex()
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", secret])
    try:
        data = build_snapshot(SnapshotCompression.STORED, [SnapshotType.PROCESS_LIST], tmp_path,
                              tmp_path / "logs")
    finally:
        bystander.kill()
        bystander.wait()
    processes = open_zip(data).read("process_list.txt").decode()
    assert f" {bystander.pid} " in processes  # listed, by name only
    assert secret not in processes
    own = next(line for line in processes.splitlines() if f" {os.getpid()} " in line)
    assert "pytest" in own or "python" in own  # the server's own command line stays


def test_unknown_compression_or_type_bytes_are_status_3(rill_server):
    host, port = rill_server.tcp_address
    with socket.create_connection((host, port), timeout=10) as raw:
        for payload in (bytes([7, 1, 4]), bytes([2, 1, 6]), bytes([2, 2, 4])):
            raw.sendall(struct.pack("<II", 4 + len(payload), 11) + payload)
            header = b""
            while len(header) < 8:
                chunk = raw.recv(8 - len(header))
                assert chunk, "the server closed the connection"
                header += chunk
            status, length = struct.unpack("<II", header)
            assert (status, length) == (3, 0)
