"""The anomaly checker of the cluster's fault runs: a recorded history of sends, polls and
commits, the replicas' logs and the final reads in, counts and examples of every anomaly out.

It follows the queue workload of Jepsen's Kafka-style analyses (the same anomaly names); there
are no transactions, so no cycle search: a log's offsets expose its order.

**History**: JSON lines, one operation each, in the order they happened (``time`` is the
recorder's monotonic clock, informative only). Fields:

``process``  who did it (a producer or a consumer session's client: any JSON scalar)
``type``     ``"invoke"`` (started), then one of ``"ok"`` (done), ``"fail"`` (certainly not
             done: the server refused it), ``"info"`` (unknown: a timeout, a lost link)
``f``        ``"send"``, ``"poll"``, ``"commit"``, ``"subscribe"``/``"assign"`` (a consumer
             session starts: polls of this process are compared only within one session)
``key``      the partition (``send``), any JSON scalar; compared as text
``value``    ``send``: the unique value written (any JSON scalar, compared as text);
             ``poll`` (ok): ``[[key, offset, value], ...]`` in the order the consumer saw them;
             ``commit``: ``{key: offset, ...}`` — the next offset the group will read
``offset``   ``send`` ok: the offset the server acknowledged (absent when unknown, e.g. acks
             without offsets)
``group``    ``commit``: the consumer group (absent: one group)
``time``     seconds (float)

A ``send`` invoked and never completed counts as ``info``. A completion without its
``invoke`` is fine (recorders may write completions only). Lines that are blank or start with
``#`` are skipped; anything else unparseable is one clear error.

**Final reads** (the drain of every partition from its leader after the faults healed):
``{key: [[offset, value], ...]}``. **Replica dumps** (every replica's log, read after stop):
``{node: {key: {"hw": int, "records": [[offset, value], ...]}}}``; ``hw`` is that replica's
high watermark (its records at offsets below it are committed; above it, a tail that may still
be truncated, which is not an anomaly).

**Anomalies** (``Report.anomalies[name]``: a list of examples, one per occurrence):

``lost-write``            an acknowledged send whose value is not in its partition's final read
``inconsistent-offsets``  one (partition, offset) holding two values anywhere: acknowledged
                          sends, polls, final reads, replicas below their HW
``duplicate``             one value at two (partition, offset) positions
``aborted-read``          a value read (poll or final read) whose send failed (``fail``)
``nonmonotonic-poll``     within a consumer session, a partition's polled offset not above the
                          one before
``poll-skip``             within a consumer session, consecutive polls of a partition jumping
                          over an offset known to exist (from any source)
``divergent-replicas``    two replicas holding different records below both their HWs
``nonmonotonic-commit``   a group's acknowledged committed offset of a partition going back

and ``Report.info_sends`` / ``Report.info_landed``: indeterminate sends, and how many of them
were read after all (not an anomaly: the count shows how often "unknown" meant "done").

Run ``python logcheck.py HISTORY.jsonl [--final FINAL.json] [--replicas DUMPS.json]``: prints
the report as JSON, exits 1 if an anomaly was found.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ANOMALIES = ("lost-write", "inconsistent-offsets", "duplicate", "aborted-read",
             "nonmonotonic-poll", "poll-skip", "divergent-replicas", "nonmonotonic-commit")
SESSION_STARTS = ("subscribe", "assign")
EXAMPLES = 8  # examples kept per anomaly in the printed summary (the counts are complete)


class HistoryError(ValueError):
    """A history, final read or dump that is not in the documented shape."""


@dataclass
class Report:
    anomalies: dict[str, list[dict]] = field(default_factory=lambda: {name: [] for name in ANOMALIES})
    acknowledged: int = 0  # sends ok
    failed: int = 0  # sends fail
    info_sends: int = 0  # sends info (or never completed)
    info_landed: int = 0  # of those, read after all
    polled: int = 0  # records seen by polls

    @property
    def counts(self) -> dict[str, int]:
        return {name: len(found) for name, found in self.anomalies.items()}

    @property
    def valid(self) -> bool:
        return not any(self.anomalies.values())

    def found(self) -> set[str]:
        """The names of the anomalies present."""
        return {name for name, found in self.anomalies.items() if found}

    def summary(self) -> dict[str, Any]:
        return {"valid": self.valid, "counts": self.counts,
                "examples": {name: found[:EXAMPLES] for name, found in self.anomalies.items() if found},
                "sends": {"ok": self.acknowledged, "fail": self.failed, "info": self.info_sends,
                          "info-landed": self.info_landed},
                "polled": self.polled}


def _text(scalar: Any) -> str:
    return scalar if isinstance(scalar, str) else json.dumps(scalar)


def _offset(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise HistoryError(f"{where}: offset {value!r} is not an integer >= 0")
    return value


def read_history(lines: Iterable[str]) -> list[dict]:
    """The operations of a JSON-lines history (blank and ``#`` lines skipped)."""
    ops = []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            op = json.loads(line)
        except ValueError as error:
            raise HistoryError(f"history line {number}: not JSON ({error})") from None
        if not isinstance(op, dict) or op.get("type") not in ("invoke", "ok", "fail", "info") \
                or not isinstance(op.get("f"), str):
            raise HistoryError(f"history line {number}: needs a type (invoke|ok|fail|info) and an f")
        op["_line"] = number
        ops.append(op)
    return ops


class _Positions:
    """Every (partition, offset) -> values, and value -> positions, with where each was seen."""

    def __init__(self) -> None:
        self.at: dict[tuple[str, int], dict[str, str]] = defaultdict(dict)  # -> value -> source
        self.of: dict[str, dict[tuple[str, int], str]] = defaultdict(dict)  # value -> pos -> source

    def see(self, key: str, offset: int, value: str, source: str) -> None:
        self.at[(key, offset)].setdefault(value, source)
        self.of[value].setdefault((key, offset), source)

    def known_offsets(self) -> dict[str, list[int]]:
        """Per partition, every offset known to hold a record, sorted."""
        offsets: dict[str, set[int]] = defaultdict(set)
        for key, offset in self.at:
            offsets[key].add(offset)
        return {key: sorted(found) for key, found in offsets.items()}


def check(history: Iterable[Mapping[str, Any]], final_reads: Mapping[Any, Any] | None = None,
          replicas: Mapping[Any, Any] | None = None) -> Report:
    """The report of one run (see the module docstring for the shapes)."""
    report = Report()
    positions = _Positions()
    sends: dict[str, dict] = {}  # value -> {"key", "state": ok|fail|info|invoked, "offset"}
    polls: list[dict] = []  # ok polls with their session
    commits: list[dict] = []  # ok commits
    sessions: dict[str, int] = defaultdict(int)

    for op in history:
        line = op.get("_line", "?")
        f, kind, process = op["f"], op["type"], _text(op.get("process"))
        if f == "send":
            if "value" not in op or "key" not in op:
                raise HistoryError(f"history line {line}: a send needs a key and a value")
            value, key = _text(op["value"]), _text(op["key"])
            entry = sends.setdefault(value, {"key": key, "state": "invoked", "offset": None})
            if kind == "invoke":
                continue
            entry["state"] = kind
            if kind == "ok" and op.get("offset") is not None:
                entry["offset"] = _offset(op["offset"], f"history line {line}")
                positions.see(key, entry["offset"], value, f"send ok (line {line})")
        elif f in SESSION_STARTS and kind == "ok":
            sessions[process] += 1
        elif f == "poll" and kind == "ok":
            records = []
            for record in op.get("value") or []:
                if not isinstance(record, list) or len(record) != 3:
                    raise HistoryError(f"history line {line}: a poll's value is [[key, offset, value], ...]")
                key, offset, value = _text(record[0]), _offset(record[1], f"history line {line}"), _text(record[2])
                positions.see(key, offset, value, f"poll (line {line})")
                records.append((key, offset, value))
            report.polled += len(records)
            polls.append({"process": process, "session": sessions[process], "line": line,
                          "records": records})
        elif f == "commit" and kind == "ok":
            offsets = op.get("value")
            if not isinstance(offsets, dict):
                raise HistoryError(f"history line {line}: a commit's value is {{key: offset}}")
            commits.append({"group": _text(op.get("group")), "line": line,
                            "offsets": {_text(k): _offset(v, f"history line {line}")
                                        for k, v in offsets.items()}})

    final: dict[str, list[tuple[int, str]]] = {}
    for key, records in (final_reads or {}).items():
        key = _text(key)
        final[key] = [(_offset(offset, f"final read of {key}"), _text(value)) for offset, value in records]
        for offset, value in final[key]:
            positions.see(key, offset, value, "final read")

    dumps: dict[str, dict[str, tuple[int, list[tuple[int, str]]]]] = {}
    for node, partitions in (replicas or {}).items():
        node = _text(node)
        dumps[node] = {}
        for key, dump in partitions.items():
            key = _text(key)
            if not isinstance(dump, Mapping) or "hw" not in dump:
                raise HistoryError(f"replica {node} partition {key}: needs hw and records")
            hw = _offset(dump["hw"], f"replica {node} partition {key} hw")
            records = [(_offset(o, f"replica {node} partition {key}"), _text(v))
                       for o, v in dump.get("records", [])]
            dumps[node][key] = (hw, records)
            for offset, value in records:
                if offset < hw:  # above: an uncommitted tail, which may still be cut
                    positions.see(key, offset, value, f"replica {node} below hw")

    anomalies = report.anomalies
    read_values = {value for _key, _offset_, value in
                   (record for poll in polls for record in poll["records"])}
    for records in final.values():
        read_values.update(value for _offset_, value in records)

    # sends: lost writes, aborted reads, indeterminate sends that landed
    final_values = {key: {value for _offset_, value in records} for key, records in final.items()}
    for value, entry in sends.items():
        state = entry["state"]
        if state == "ok":
            report.acknowledged += 1
            if entry["key"] in final_values and value not in final_values[entry["key"]]:
                anomalies["lost-write"].append({"key": entry["key"], "value": value,
                                                "offset": entry["offset"]})
        elif state == "fail":
            report.failed += 1
            if value in read_values:
                anomalies["aborted-read"].append({"key": entry["key"], "value": value,
                                                  "at": sorted(positions.of.get(value, {}))})
        else:  # info, or invoked and never completed
            report.info_sends += 1
            if value in read_values:
                report.info_landed += 1

    # offsets and values: one value per position, one position per value
    for (key, offset), values in sorted(positions.at.items()):
        if len(values) > 1:
            anomalies["inconsistent-offsets"].append(
                {"key": key, "offset": offset, "values": dict(sorted(values.items()))})
    for value, where in sorted(positions.of.items()):
        if len(where) > 1:
            anomalies["duplicate"].append(
                {"value": value, "at": [[key, offset, source] for (key, offset), source in sorted(where.items())]})

    # polls, per consumer session and partition: each next offset the next known one
    known = positions.known_offsets()
    index = {key: {offset: rank for rank, offset in enumerate(offsets)} for key, offsets in known.items()}
    last: dict[tuple[str, int, str], tuple[int, int]] = {}  # (process, session, key) -> offset, line
    for poll in polls:
        for key, offset, _value in poll["records"]:
            where = (poll["process"], poll["session"], key)
            if where in last:
                before, before_line = last[where]
                example = {"process": poll["process"], "key": key, "from": before, "to": offset,
                           "lines": [before_line, poll["line"]]}
                if offset <= before:
                    anomalies["nonmonotonic-poll"].append(example)
                elif index[key][offset] - index[key][before] > 1:
                    example["skipped"] = known[key][index[key][before] + 1:index[key][offset]]
                    anomalies["poll-skip"].append(example)
            last[where] = (offset, poll["line"])

    # commits, per group and partition: never back
    committed: dict[tuple[str, str], tuple[int, int]] = {}
    for commit in commits:
        for key, offset in commit["offsets"].items():
            where = (commit["group"], key)
            if where in committed and offset < committed[where][0]:
                anomalies["nonmonotonic-commit"].append(
                    {"group": commit["group"], "key": key, "from": committed[where][0], "to": offset,
                     "lines": [committed[where][1], commit["line"]]})
            committed[where] = (offset, commit["line"])

    # replicas: the same records below both HWs
    nodes = sorted(dumps)
    for first_index, first in enumerate(nodes):
        for second in nodes[first_index + 1:]:
            for key in sorted(set(dumps[first]) & set(dumps[second])):
                (hw_a, records_a), (hw_b, records_b) = dumps[first][key], dumps[second][key]
                a, b = dict(records_a), dict(records_b)
                start = max(min(a, default=0), min(b, default=0))
                end = min(hw_a, hw_b)
                differ = [offset for offset in sorted(set(a) | set(b))
                          if start <= offset < end and a.get(offset) != b.get(offset)]
                if differ:
                    anomalies["divergent-replicas"].append(
                        {"key": key, "nodes": [first, second], "below": end, "offsets": differ[:EXAMPLES],
                         "count": len(differ)})
    return report


def check_files(history: Path, final: Path | None = None, replicas: Path | None = None) -> Report:
    with open(history) as lines:
        ops = read_history(lines)
    final_reads = json.loads(Path(final).read_text()) if final else None
    dumps = json.loads(Path(replicas).read_text()) if replicas else None
    return check(ops, final_reads, dumps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("history", type=Path)
    parser.add_argument("--final", type=Path, help="final reads: {key: [[offset, value], ...]}")
    parser.add_argument("--replicas", type=Path, help="replica dumps: {node: {key: {hw, records}}}")
    options = parser.parse_args(argv)
    try:
        report = check_files(options.history, options.final, options.replicas)
    except (HistoryError, OSError, ValueError) as error:
        print(f"logcheck: {error}", file=sys.stderr)
        return 2
    print(json.dumps(report.summary(), indent=2))
    return 0 if report.valid else 1


if __name__ == "__main__":
    sys.exit(main())
