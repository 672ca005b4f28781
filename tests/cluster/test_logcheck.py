"""The checker on synthetic histories: each anomaly's history reports exactly that anomaly, a
clean history (rewinds in a new session, a tail above a replica's HW, indeterminate sends)
reports none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.logcheck import HistoryError, check, read_history

LOGCHECK = Path(__file__).with_name("logcheck.py")


def send(process, key, value, kind="ok", offset=None):
    op = {"process": process, "type": kind, "f": "send", "key": key, "value": value}
    if offset is not None:
        op["offset"] = offset
    return [{"process": process, "type": "invoke", "f": "send", "key": key, "value": value}, op]


def poll(process, *records):
    return [{"process": process, "type": "invoke", "f": "poll"},
            {"process": process, "type": "ok", "f": "poll", "value": [list(r) for r in records]}]


def subscribe(process):
    return [{"process": process, "type": "ok", "f": "subscribe"}]


def commit(process, offsets, group="g"):
    return [{"process": process, "type": "ok", "f": "commit", "group": group, "value": offsets}]


def history(*parts):
    return [op for part in parts for op in part]


def clean_run():
    ops = history(
        send(0, 0, "a", offset=0), send(1, 0, "b", offset=1), send(0, 0, "c", offset=2),
        send(1, 0, "d", kind="fail"), send(2, 0, "e", kind="info"), send(2, 0, "f", kind="info"),
        send(2, 1, "h", offset=0),
        [{"process": 3, "type": "invoke", "f": "send", "key": 1, "value": "i"}],  # never completed
        subscribe(10), poll(10, (0, 0, "a"), (0, 1, "b"), (1, 0, "h")),
        poll(10, (0, 2, "c"), (0, 3, "e")), commit(10, {"0": 4, "1": 1}),
        subscribe(10), poll(10, (0, 2, "c"), (0, 3, "e")),  # a new session may start earlier
        commit(10, {"0": 4, "1": 1}))
    final = {"0": [[0, "a"], [1, "b"], [2, "c"], [3, "e"]], "1": [[0, "h"]]}
    replicas = {
        "n1": {"0": {"hw": 4, "records": [[0, "a"], [1, "b"], [2, "c"], [3, "e"]]},
               "1": {"hw": 1, "records": [[0, "h"]]}},
        # behind, with a tail above its HW that the leader does not have: not an anomaly
        "n2": {"0": {"hw": 3, "records": [[0, "a"], [1, "b"], [2, "c"], [3, "g"]]},
               "1": {"hw": 1, "records": [[0, "h"]]}},
    }
    return ops, final, replicas


def test_a_clean_history_reports_nothing():
    report = check(*clean_run())
    assert report.found() == set() and report.valid
    assert (report.acknowledged, report.failed, report.info_sends, report.info_landed) == (4, 1, 3, 1)
    assert report.polled == 7


def test_an_acknowledged_send_missing_from_the_final_read_is_a_lost_write():
    ops = history(send(0, 0, "a", offset=0), send(0, 0, "b", offset=1), send(0, 0, "c", offset=2))
    report = check(ops, {"0": [[0, "a"], [2, "c"]]})
    assert report.found() == {"lost-write"}
    assert report.anomalies["lost-write"] == [{"key": "0", "value": "b", "offset": 1}]


def test_one_offset_with_two_values_is_inconsistent():
    ops = history(send(0, 0, "a", offset=0), send(1, 0, "c", kind="info"), poll(5, (0, 0, "c")))
    report = check(ops, {"0": [[0, "a"]]})
    assert report.found() == {"inconsistent-offsets"}
    assert report.anomalies["inconsistent-offsets"][0]["values"].keys() == {"a", "c"}
    assert report.info_landed == 1


def test_one_value_at_two_offsets_is_a_duplicate():
    ops = history(send(0, 0, "a", offset=0), send(0, 0, "b", offset=1))
    report = check(ops, {"0": [[0, "a"], [1, "b"], [2, "a"]]})
    assert report.found() == {"duplicate"}
    assert [[key, offset] for key, offset, _source in report.anomalies["duplicate"][0]["at"]] == \
        [["0", 0], ["0", 2]]


def test_reading_a_failed_send_is_an_aborted_read():
    ops = history(send(0, 0, "a", offset=0), send(0, 0, "x", kind="fail"), poll(5, (0, 1, "x")))
    report = check(ops, {"0": [[0, "a"], [1, "x"]]})
    assert report.found() == {"aborted-read"}


def test_a_poll_going_back_within_a_session_is_nonmonotonic():
    ops = history(send(0, 0, "a", offset=0), send(0, 0, "b", offset=1),
                  subscribe(5), poll(5, (0, 0, "a"), (0, 1, "b")), poll(5, (0, 0, "a")))
    report = check(ops, {"0": [[0, "a"], [1, "b"]]})
    assert report.found() == {"nonmonotonic-poll"}
    assert report.anomalies["nonmonotonic-poll"][0]["from"] == 1


def test_a_poll_jumping_over_a_known_offset_is_a_skip():
    ops = history(send(0, 0, "a", offset=0), send(0, 0, "b", offset=1), send(0, 0, "c", offset=3),
                  subscribe(5), poll(5, (0, 0, "a")), poll(5, (0, 3, "c")))
    report = check(ops, {"0": [[0, "a"], [1, "b"], [3, "c"]]})
    assert report.found() == {"poll-skip"}
    assert report.anomalies["poll-skip"][0]["skipped"] == [1]  # offset 2 never existed: no skip


def test_replicas_that_differ_below_their_high_watermarks_diverge():
    ops = history(send(0, 0, "a", offset=0), send(0, 0, "b", offset=1))
    final = {"0": [[0, "a"], [1, "b"]]}
    replicas = {"n1": {"0": {"hw": 2, "records": [[0, "a"], [1, "b"]]}},
                "n2": {"0": {"hw": 2, "records": [[0, "a"]]}}}
    report = check(ops, final, replicas)
    assert report.found() == {"divergent-replicas"}
    assert report.anomalies["divergent-replicas"][0]["offsets"] == [1]


def test_a_committed_offset_going_back_is_nonmonotonic():
    ops = history(send(0, 0, "a", offset=0), send(0, 0, "b", offset=1),
                  commit(5, {"0": 2}), commit(6, {"0": 1}), commit(6, {"0": 1}, group="other"))
    report = check(ops, {"0": [[0, "a"], [1, "b"]]})
    assert report.found() == {"nonmonotonic-commit"}
    assert len(report.anomalies["nonmonotonic-commit"]) == 1


def test_the_command_line_reads_files_and_exits_by_the_verdict(tmp_path):
    ops, final, replicas = clean_run()
    (tmp_path / "history.jsonl").write_text("# a run\n" + "".join(json.dumps(op) + "\n" for op in ops))
    (tmp_path / "final.json").write_text(json.dumps(final))
    (tmp_path / "replicas.json").write_text(json.dumps(replicas))
    command = [sys.executable, str(LOGCHECK), str(tmp_path / "history.jsonl"),
               "--final", str(tmp_path / "final.json"), "--replicas", str(tmp_path / "replicas.json")]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["valid"] is True
    final["0"].pop(1)  # b lost
    (tmp_path / "final.json").write_text(json.dumps(final))
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    assert done.returncode == 1
    assert json.loads(done.stdout)["counts"]["lost-write"] == 1


def test_a_malformed_line_is_one_clear_error():
    with pytest.raises(HistoryError, match="history line 2: not JSON"):
        read_history(['{"type": "ok", "f": "send", "key": 0, "value": 1}', "{oops"])
    with pytest.raises(HistoryError, match="line 1: needs a type"):
        read_history(['{"f": "send"}'])
