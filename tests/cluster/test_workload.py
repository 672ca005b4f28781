"""The workload end to end on one standalone node (no cluster runtime needed): kafka-python
and confluent-kafka producers (acks=all, idempotent), rill's SDK over Iggy's protocol, rill's
TANK client and a consumer group record a history,
the final read and the replica dump read back, and the checker finds the run clean."""

from __future__ import annotations

import json
import time

from cluster.logcheck import check_files
from cluster.workload import History, Workload, create_topic, dump_replicas, final_read

ACKS_WANTED = 400


def recorded(history: History, fragment: str) -> int:
    """Lines of the history so far holding ``fragment`` (the clients are other threads and
    processes: their progress is polled)."""
    history._file.flush()
    with open(history.path) as lines:
        return sum(fragment in line for line in lines)


def acks_of(history: History, process: str) -> int:
    """Sends ``process`` had acknowledged (the Iggy producer is the third, ``p2``; the TANK
    one the fourth, ``p3``)."""
    return recorded(history, f'"process": "{process}", "type": "ok"')


def polls(history: History) -> int:
    """Polls the consumers had answered (a group's first join can take seconds)."""
    return recorded(history, '"type": "ok", "f": "poll"')


def test_a_fault_free_run_records_a_history_the_checker_finds_clean(local_cluster, tmp_path):
    cluster = local_cluster(size=1, cluster=False)
    node = cluster.node(0)
    create_topic(node.kafka, "soak", 3, 1)
    history = History(tmp_path / "history.jsonl")
    workload = Workload(node.kafka, "soak", history, partitions=3, producers=2, consumers=2,
                        iggy_nodes=[node.address("tcp")], tank_nodes=[node.address("tank")]).start()
    deadline = time.monotonic() + 120
    while (len(history.acks) < ACKS_WANTED or not acks_of(history, "p2")
           or not acks_of(history, "p3") or not polls(history)):
        assert time.monotonic() < deadline, f"only {len(history.acks)} sends acknowledged"
        time.sleep(0.2)
    assert workload.stop() == []
    history.close()
    final = final_read(node.kafka, "soak", 3)
    assert node.stop() == 0
    replicas = dump_replicas({"n1": node.data_dir}, "soak")
    assert set(replicas["n1"]) == {"0", "1", "2"}
    assert {key: dump["records"] for key, dump in replicas["n1"].items()} == final

    (tmp_path / "final.json").write_text(json.dumps(final))
    (tmp_path / "replicas.json").write_text(json.dumps(replicas))
    report = check_files(tmp_path / "history.jsonl", tmp_path / "final.json", tmp_path / "replicas.json")
    assert report.valid, report.summary()
    assert report.acknowledged >= ACKS_WANTED
    assert report.polled > 0
    assert sum(len(records) for records in final.values()) >= report.acknowledged
