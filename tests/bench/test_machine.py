"""The machine rows of ``rill bench compare``: iperf3's JSON read right, the disk written and
synced as labelled, and a missing iperf3 reported as not measured, never as a number."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from rill.bench.machine import disk_write, loopback_tcp, measure_machine, parse_iperf3

# the shape of ``iperf3 -c ... -J`` (3.12), trimmed to what matters
IPERF3_REPORT = {
    "start": {"connected": [{"local_host": "127.0.0.1", "remote_port": 5201}]},
    "intervals": [],
    "end": {
        "streams": [],
        "sum_sent": {"seconds": 2.0, "bytes": 6_000_000_000, "bits_per_second": 24_000_000_000.0},
        "sum_received": {"seconds": 2.0, "bytes": 5_900_000_000, "bits_per_second": 23_600_000_000.0},
        "cpu_utilization_percent": {"host_total": 34.1},
    },
}


def test_parse_iperf3_gives_received_megabytes_per_second():
    assert parse_iperf3(json.dumps(IPERF3_REPORT)) == 2950.0  # 23.6 Gbit/s = 2,950 MB/s


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("", "no JSON"),
        ("iperf3: error - unable to connect", "no JSON"),
        ('{"start": {}, "intervals": [], "end": {}, "error": "unable to connect to server"}',
         "unable to connect"),
        ('{"end": {"sum_received": {"bits_per_second": 0}}}', "bits_per_second"),
        ("[]", "not an object"),
    ],
)
def test_parse_iperf3_refuses_reports_without_a_figure(output, message):
    with pytest.raises(ValueError, match=message):
        parse_iperf3(output)


def test_missing_iperf3_is_not_measured_not_a_number(tmp_path):
    row = loopback_tcp(1, binary=str(tmp_path / "no-iperf3"))
    assert row.mb_per_s is None
    assert row.reason == "not measured (iperf3 not installed)"
    assert row.label == "machine: loopback TCP (iperf3)"


def test_missing_iperf3_in_the_measurements(tmp_path):
    rows = measure_machine(("interval",), tmp_path, mib=2, seconds=1, iperf3=str(tmp_path / "no-iperf3"))
    assert [row.name for row in rows] == ["loopback_tcp", "disk_write"]
    assert rows[0].mb_per_s is None and "iperf3 not installed" in rows[0].reason


def test_loopback_tcp_with_the_real_iperf3():
    assert shutil.which("iperf3"), "Debian's iperf3 is needed: ./run test installs it"
    row = loopback_tcp(1)
    assert row.reason is None and row.mb_per_s > 0
    assert "iperf3" in row.how and "127.0.0.1" in row.how


@pytest.mark.parametrize(("sync_every", "syncs", "words"), [(None, 1, "at the end"), (1, 5, "after every block"),
                                                            (2, 3, "every 2 blocks")])
def test_disk_write_syncs_as_labelled_and_cleans_up(tmp_path, monkeypatch, sync_every, syncs, words):
    synced = []
    real_fdatasync = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda descriptor: (synced.append(os.fstat(descriptor).st_size),
                                                             real_fdatasync(descriptor)))
    row = disk_write(tmp_path, mib=4, sync_every=sync_every, fsync="always")
    assert row.name == "disk_write" and row.fsync == "always" and row.reason is None
    assert row.mb_per_s > 0
    assert row.label == "machine: disk sequential write + fdatasync"
    assert "4 × 1 MiB blocks" in row.how and words in row.how
    assert len(synced) == syncs and synced[-1] == 4 * 1024 * 1024
    assert list(tmp_path.iterdir()) == []  # the file and its directory are gone


def test_disk_write_that_cannot_write_is_not_measured(tmp_path):
    row = disk_write(tmp_path / "missing", mib=1)
    assert row.mb_per_s is None and row.reason.startswith("not measured (")


def test_measure_machine_syncs_the_disk_like_each_fsync_mode(tmp_path):
    rows = measure_machine(("interval", "always"), tmp_path, mib=2, seconds=1)
    disks = [row for row in rows if row.name == "disk_write"]
    assert [(row.fsync, "at the end" in row.how, "after every block" in row.how) for row in disks] == [
        ("interval", True, False), ("always", False, True)]
