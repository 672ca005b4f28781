"""The real Iggy Python SDK (iggy-py 0.4.0, a Rust client) drives rill.

It runs in its own virtual environment (``./run test`` creates it; RILL_IGGY_PY_PYTHON points
at its interpreter), in a subprocess running ``iggy_py_script.py``, which prints JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import zlib
from pathlib import Path

import pytest

from rill.client import Client, PollingStrategy
from rill.protocol.permissions import GlobalPermissions, Permissions

SCRIPT = Path(__file__).with_name("iggy_py_script.py")

pytestmark = pytest.mark.interop


def iggy_python() -> str:
    path = os.environ.get("RILL_IGGY_PY_PYTHON", ".venv-iggy-py/bin/python")
    assert Path(path).exists(), (
        f"iggy-py interpreter {path} is missing: run ./run test, which installs iggy-py==0.4.0"
    )
    return path


def test_iggy_py_round_trip(rill_server):
    with Client(rill_server.address) as client:  # a read-only user for iggy-py's second session
        client.login_user("iggy", "iggy")
        client.create_user("reader", "reader-pass", permissions=Permissions(
            GlobalPermissions(read_streams=True, read_topics=True, poll_messages=True), None))
    result = subprocess.run(
        [iggy_python(), str(SCRIPT), rill_server.address],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    report = json.loads(result.stdout.strip().splitlines()[-1])
    sent = report["sent"]
    assert report["stream"] == {"id": 10, "name": "interop", "topics_count": 0}
    assert report["topic"]["name"] == "events" and report["topic"]["id"] == 1
    assert "StreamNameAlreadyExists" in report["duplicate_stream_error"]
    assert report["reader_stream_name"] == "interop"
    assert report["reader_poll_count"] == 10
    assert "Unauthorized" in report["reader_create_error"]
    by_offset = report["offset"]
    assert [m["payload"] for m in by_offset] == sent[2:7]
    assert [m["offset"] for m in by_offset] == list(range(2, 7))
    assert [m["payload"] for m in report["first"]] == sent[:3]
    assert [m["payload"] for m in report["last"]] == sent[-3:]
    assert [m["payload"] for m in report["timestamp"]] == sent
    assert [m["payload"] for m in report["next_first"]] == sent[:4]
    assert [m["payload"] for m in report["next_second"]] == sent[4:8]
    for message in by_offset:
        assert message["checksum"] == zlib.crc32(message["payload"].encode())
        assert message["state"] == "Available"
        assert message["length"] == len(message["payload"])
    # rill's own SDK sees the very same ids and timestamps iggy-py saw
    with Client(rill_server.address) as client:
        client.login_user("iggy", "iggy")
        ours = client.poll_messages(10, 1, partition_id=1, strategy=PollingStrategy.offset(2),
                                    count=5).messages
    assert [m.id for m in ours] == [m["id"] for m in by_offset]
    assert [m.timestamp for m in ours] == [m["timestamp"] for m in by_offset]
