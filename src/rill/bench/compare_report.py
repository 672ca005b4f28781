"""What ``rill bench compare``'s report says: its conclusion first, then the detail.

Owns: turning the measured rows (``comparison``: one per target and fsync mode, the figures of
``compare._figures``) and the machine's rows (``rill.bench.machine.Capability.to_dict()``) into
the report's parts — ``finish_report`` adds rill's ratios to each row, the ``summary`` (the
conclusion the page opens with: per target, rill ÷ target for throughput and for latency p50 /
p99, publish and consume; then rill as a fraction of what the machine measured), one grouped
bar chart (``bars``: msg/s of every target side by side), the detailed comparison table and the
machine table.

Ratios are always rill ÷ target on the same fsync mode, for every figure. A throughput ratio
above 1 means rill moved more; a latency ratio below 1 means rill answered sooner: each ratio
cell says which way is better (``good``: True when rill is better) so the page can show it.
Nothing is called a limit: the machine's rows say what was measured, and rill's share of them
is a "fraction of machine capability".

When the run has a row of rill's Kafka listener, ``kafka_table`` opens the conclusion with the
Kafka path's own ratios, MB/s of payload on the same fsync mode (``KAFKA_PAIRS``, each with its
floor from ``KAFKA_FLOORS`` when issue 13 sets one): ``rill-kafka-wire`` ÷ ``rill`` (the two
listeners driven by rill's own clients of the same cost: the Kafka path against the Iggy path,
floor 0.70), ``rill-kafka`` ÷ ``rill`` (what confluent-kafka users get, no floor), and
``rill-kafka`` ÷ each Kafka peer, all driven by confluent-kafka (``kafka-bare``, a bare Python
broker that stores, the reference row: none; ``tansu``: floor 2; ``noida-db``: none). Its rows
are also in the report as ``kafka`` (structured).

Likewise a ``rill-tank`` row (rill's TANK listener, ``rill bench tank``): ``tank_table`` opens the
conclusion with rill-tank ÷ rill (the Iggy listener), msg/s publish and consume, against issue
14's floor ``TANK_FLOORS["rill"]``; structured as ``tank``.

Cost: every row's phases carry the server's CPU seconds (user + system, every process of the
target, over the measured phase: ``rill.bench.cpu``) per million messages and per GB of payload;
``row_cost`` adds publish and consume (what moving a message through the server costs). The
conclusion, the Kafka and the TANK tables each have a CPU-cost ratio column (rill ÷ target, or
the protocol row ÷ its base: below 1 rill spent less CPU per message); "not measured" when a
side has no figure (an existing server, or no ``/proc``).

Round trips (``compare.run_compare(round_trips=N)``): each target that has a round-trip driver
adds ``round_trip`` figures to its row (one message, produce → a consumer tailing with a long
poll: p50 / p99 of N round trips, the server's CPU per million of them); ``round_trip_table``
puts them in the conclusion, each with its ÷ rill (Iggy) p50, structured as ``round_trip``.

A run of several rounds (``compare.median_row``) has rows of medians: its ratios are ratios of
the medians, every table says so in a note, and the Kafka and TANK entries also keep each
round's own ratio (``rounds``), whose range their cells' titles show.
"""

from __future__ import annotations

from typing import Any

PHASES = ("publish", "consume")
RATIO_FIGURES = (  # (figure key, column words, higher is better for rill)
    ("msg_per_s", "msg/s", True),
    ("p50_ms", "p50 latency", False),
    ("p99_ms", "p99 latency", False),
)
CLIENTS = {
    "rill": "rill SDK (send, poll)",
    "nats": "nats-py: publish_async × batch, pull fetch(batch)",
    "redis": "redis-py + hiredis: XADD pipeline, XRANGE COUNT",
    "bare": "raw SEND frames → append / sendfile",
    "rill-kafka": "confluent-kafka: produce × batch + flush, consume(num_messages=batch)",
    "rill-kafka-wire": "rill's Kafka codec: a batch encoded once and re-sent, Fetch v12",
    "kafka-bare": "confluent-kafka: produce × batch + flush, consume(num_messages=batch)",
    "tansu": "confluent-kafka: produce × batch + flush, consume(num_messages=batch)",
    "noida-db": "confluent-kafka: produce × batch + flush, consume(num_messages=batch)",
    "rill-tank": "rill.client.tank: one bundle per Produce, one bundle per Consume",
}
NAMES = {
    "rill": "rill",
    "nats": "NATS JetStream",
    "redis": "Redis Streams",
    "bare": "bare Python server",
    "rill-kafka": "rill's Kafka listener",
    "rill-kafka-wire": "rill's Kafka listener (rill's Kafka codec)",
    "kafka-bare": "bare Python Kafka broker (stores)",
    "tansu": "tansu (memory)",
    "noida-db": "noida-db (memory)",
    "rill-tank": "rill's TANK listener",
}
KAFKA_PEERS = ("kafka-bare", "tansu", "noida-db")  # kafka-bare: a reference row, no floor
# (a Kafka row, what it is divided by): the Kafka path against the Iggy path with clients of
# the same cost, then what confluent-kafka users get against the Iggy path and the peers, then
# what a bare storing broker reaches against tansu in the same run (the machine's context for
# the 2 × tansu floor: a broker that writes each batch to a file before answering, against one
# that keeps it in memory)
KAFKA_PAIRS = (("rill-kafka-wire", "rill"), ("rill-kafka", "rill"),
               *(("rill-kafka", peer) for peer in KAFKA_PEERS), ("kafka-bare", "tansu"))
# issue 13: the Kafka path ≥ 0.70 × the Iggy path; rill with confluent-kafka ≥ 2 × tansu (MB/s)
KAFKA_FLOORS = {("rill-kafka-wire", "rill"): 0.70, ("rill-kafka", "tansu"): 2.0}
KAFKA_COLUMNS = ["ratio", "fsync", "publish MB/s ratio", "consume MB/s ratio", "floor",
                 "publish meets floor", "consume meets floor",
                 "server CPU-s / M msg ratio (lower = less CPU)"]
TANK_FLOORS = {"rill": 0.60}  # issue 14: the TANK path ≥ 60% of the Iggy path's msg/s
TANK_COLUMNS = ["rill-tank ÷", "fsync", "publish msg/s ratio", "consume msg/s ratio", "floor",
                "publish meets floor", "consume meets floor",
                "server CPU-s / M msg ratio (lower = less CPU)"]
FSYNC_NAMES = {"interval": "every second", "always": "always"}
COLUMNS = [
    "target", "fsync", "client",
    "publish msg/s", "publish MB/s", "publish p99 ms",
    "consume msg/s", "consume MB/s", "consume p99 ms",
    "publish server CPU-s / M msg", "consume server CPU-s / M msg",
    "server CPU-s / GB (publish + consume)",
    "rill ÷ target (publish msg/s)", "rill ÷ target (consume msg/s)",
]
COST_WORDS = "server CPU-s per million msg, publish + consume"
SUMMARY_COLUMNS = ["target", "fsync"] + [
    f"{phase} {words} ({'higher' if higher else 'lower'} = rill better)"
    for phase in PHASES for _, words, higher in RATIO_FIGURES
] + [f"{COST_WORDS} (lower = rill better)"]
MACHINE_COLUMNS = ["machine capability", "fsync", "how", "MB/s",
                   "rill publish MB/s ÷ it", "rill consume MB/s ÷ it"]


def ratio(rill: float | None, other: float | None) -> float | None:
    """rill ÷ other to 4 significant digits (a latency ratio may be 0.0017)."""
    if rill is None or not other:
        return None
    return float(f"{rill / other:.4g}")


def ratio_cell(value: float | None, higher_is_better: bool | None, title: str = "", suffix: str = "×") -> Any:
    """A cell the HTML page shows as a ratio (``good`` colours it, None: neither way); "n/a"
    when there is none."""
    if value is None:
        return "n/a"
    good = None if value == 1 or higher_is_better is None else (value > 1) == higher_is_better
    return {"ratio": value, "text": f"{value:.3g}{suffix}", "good": good, "title": title}


def row_cost(row: dict[str, Any] | None, figure: str = "cpu_s_per_million") -> float | None:
    """The server's CPU per million messages (or per GB: ``cpu_s_per_gb``) to publish and then
    consume, publish's plus consume's; None when the row did not run or was not metered."""
    if row is None or row.get("status") != "ok":
        return None
    values = [(row.get(phase) or {}).get(figure) for phase in PHASES]
    if any(value is None for value in values):
        return None
    return round(sum(values), 4)


def cost_ratio(row: dict[str, Any] | None, base: dict[str, Any] | None) -> float | None:
    """``row``'s CPU per million messages ÷ ``base``'s (publish + consume)."""
    return ratio(row_cost(row), row_cost(base))


def cost_cell(value: float | None, title: str) -> Any:
    """A CPU-cost ratio cell: below 1 the first side spent less CPU per message (good)."""
    return "not measured" if value is None else ratio_cell(value, False, title)


def round_ratios(row: dict[str, Any] | None, base: dict[str, Any] | None,
                 figure: str) -> dict[str, list[float | None]] | None:
    """Per phase, each round's ``row`` ÷ ``base`` of ``figure`` (None unless both ran in
    rounds)."""
    if row is None or base is None or "rounds" not in row or "rounds" not in base:
        return None
    return {phase: [ratio(one[phase][figure], other[phase][figure])
                    for one, other in zip(row["rounds"], base["rounds"])] for phase in PHASES}


def _spread(entry: dict[str, Any], phase: str) -> str:
    """A ratio cell's title words on its rounds: "" for a run of one round."""
    values = [value for value in (entry.get("rounds") or {}).get(phase, ()) if value is not None]
    if not values:
        return ""
    words = (f"ratio of the medians of {len(values)} rounds; per round "
             f"{min(values):.3g}×–{max(values):.3g}×")
    if entry.get("floor"):
        met = sum(value >= entry["floor"] for value in values)
        words += f", {met} of {len(values)} at or above the floor"
    return f" ({words})"


def add_ratios(comparison: list[dict[str, Any]]) -> None:
    """``rill_ratio[phase][figure]`` on every row: rill ÷ the row on its fsync mode (None on
    rill's own rows, rows that did not run, and when rill did not run)."""
    rill_rows = {row["fsync"]: row for row in comparison if row["target"] == "rill" and row["status"] == "ok"}
    for row in comparison:
        rill = rill_rows.get(row["fsync"])
        ok = row["status"] == "ok" and rill is not None and row["target"] != "rill"
        row["cpu_s_per_million"] = row_cost(row)
        row["cpu_s_per_gb"] = row_cost(row, "cpu_s_per_gb")
        row["rill_cost_ratio"] = cost_ratio(rill, row) if ok else None
        row["rill_ratio"] = {
            phase: {figure: ratio(rill[phase].get(figure), row[phase].get(figure))
                    for figure, _, _ in RATIO_FIGURES} if ok else None
            for phase in PHASES
        }


def machine_fractions(comparison: list[dict[str, Any]], capabilities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per fsync mode rill ran with: each measured capability and rill's MB/s (payload) as a
    fraction of it — publish against the disk synced like that mode and against loopback TCP,
    consume against loopback TCP (it reads the page cache, not the disk)."""
    fractions = []
    for row in comparison:
        if row["target"] != "rill" or row["status"] != "ok":
            continue
        for capability in capabilities:
            if capability.get("fsync") not in (None, row["fsync"]):
                continue
            over_loopback = capability["name"] == "loopback_tcp"
            fractions.append({
                "fsync": row["fsync"],
                "capability": capability,
                "publish": ratio(row["publish"]["mb_per_s"], capability["mb_per_s"]),
                "consume": ratio(row["consume"]["mb_per_s"], capability["mb_per_s"]) if over_loopback else None,
            })
    return fractions


# --- the parts of the report --------------------------------------------------------------------


def summary_tables(comparison: list[dict[str, Any]], fractions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conclusion: rill ÷ each target for every figure, then rill's fraction of the machine."""
    rows: list[list[Any]] = []
    for row in comparison:
        if row["target"] == "rill":
            continue
        head = [NAMES[row["target"]], FSYNC_NAMES[row["fsync"]]]
        ratios = row["rill_ratio"]
        if row["status"] != "ok" or ratios["publish"] is None:
            reason = f"{row['status']}: {row['reason']}" if row["status"] != "ok" else "rill did not run"
            rows.append(head + [reason] + ["—"] * (len(SUMMARY_COLUMNS) - 3))
            continue
        for phase in PHASES:
            for figure, words, higher in RATIO_FIGURES:
                title = f"rill ÷ {NAMES[row['target']]}, {phase} {words}, fsync {FSYNC_NAMES[row['fsync']]}"
                head.append(ratio_cell(ratios[phase][figure], higher, title))
        head.append(cost_cell(row.get("rill_cost_ratio"),
                              f"rill ÷ {NAMES[row['target']]}, {COST_WORDS}, fsync {FSYNC_NAMES[row['fsync']]}"))
        rows.append(head)
    tables = [{
        "title": "Conclusion: rill ÷ each target",
        "columns": SUMMARY_COLUMNS,
        "rows": rows,
        "notes": [
            "Each cell is rill's figure divided by the target's, on the same fsync mode. "
            "Throughput (msg/s): above 1× rill moved more. Latency (batch round trip, p50 / p99): "
            "below 1× rill answered sooner. On the page, green: rill better; red: the target better.",
            "Server CPU: the CPU seconds (user + system) of every process of each server over its "
            "measured publish and consume phases, per million messages; below 1× rill spent less "
            "CPU per message.",
        ],
    }]
    if fractions:
        tables.append({
            "title": "rill as a fraction of machine capability",
            "columns": ["machine capability", "fsync", "rill publish ÷ it", "rill consume ÷ it"],
            "rows": [[entry["capability"]["label"], FSYNC_NAMES[entry["fsync"]],
                      *(_fraction_cell(entry, phase) for phase in PHASES)] for entry in fractions],
            "notes": ["rill's MB/s of payload ÷ what the machine did alone (the table of machine "
                      "capability below says how each was measured): how much of it rill uses, "
                      "not a score; neither is a ceiling."],
        })
    return tables


def _fraction_cell(entry: dict[str, Any], phase: str) -> Any:
    capability = entry["capability"]
    if capability["mb_per_s"] is None:
        return capability["reason"]
    if entry[phase] is None:
        return "—"
    title = f"rill {phase} MB/s ÷ {capability['label']} ({capability['how']})"
    return ratio_cell(entry[phase], None, title, suffix=" of it")


def throughput_bars(comparison: list[dict[str, Any]]) -> dict[str, Any]:
    """One group per phase and fsync mode, one bar per target (rill first, as it ran)."""
    groups: dict[str, dict[str, float]] = {}
    for row in comparison:
        if row["status"] != "ok":
            continue
        for phase in PHASES:
            group = groups.setdefault(f"{phase} · fsync {FSYNC_NAMES[row['fsync']]}", {})
            group[NAMES[row["target"]]] = row[phase]["msg_per_s"]
    return {
        "title": "msg/s side by side (higher is better)",
        "y_label": "msg/s",
        "groups": groups,
        "notes": ["Targets that did not run have no bar; the detailed table below says why."],
    }


def comparison_table(comparison: list[dict[str, Any]], workload: dict[str, Any]) -> dict[str, Any]:
    """Every row's figures, as measured."""
    rows: list[list[Any]] = []
    for row in comparison:
        head = [row["target"], row["fsync"], CLIENTS[row["target"]]]
        if row["status"] != "ok":
            rows.append(head + [f"{row['status']}: {row['reason']}"] + ["—"] * (len(COLUMNS) - 4))
            continue
        cells = head
        for phase in PHASES:
            figures = row[phase]
            cells += [round(figures["msg_per_s"]), round(figures["mb_per_s"], 1), figures["p99_ms"]]
        for phase in PHASES:
            cells.append(_cost(row[phase].get("cpu_s_per_million")))
        cells.append(_cost(row_cost(row, "cpu_s_per_gb")))
        for phase in PHASES:
            ratios = row["rill_ratio"][phase]
            cells.append("—" if row["target"] == "rill" else
                         "n/a" if ratios is None or ratios["msg_per_s"] is None else f"{ratios['msg_per_s']:.2f}×")
        rows.append(cells)
    size = workload["message_size"]
    return {
        "title": _comparison_title(comparison),
        "columns": COLUMNS,
        "rows": rows,
        "notes": [
            f"{workload['messages']:,} messages of {size:,} bytes in batches (pipelines) of "
            f"{workload['batch']:,}, one partition / stream, client and server on 127.0.0.1; "
            "each server started fresh for its row, one at a time.",
            "fsync interval = every second (rill interval, NATS sync_interval 1s, Redis "
            "appendfsync everysec, bare 1 s); always = before every acknowledgement (NATS "
            "sync_interval always, Redis appendfsync always, bare fsync per frame).",
            "msg/s and MB/s (10^6 bytes of payload) over the whole run; p99 of the batch round "
            "trips (one send / pipeline / publish_async batch, one poll / XRANGE / fetch).",
            "clients (Python, uvloop): "
            + "; ".join(f"{name}: {text}" for name, text in CLIENTS.items()) + ".",
            "server CPU-s: user + system seconds of every process of the server (rill, or the "
            "peer's broker and its children) from the first to the last round trip of the phase "
            "(connecting, creating topics and starting the server are not counted), per million "
            "messages and per GB (10^9 bytes) of payload; \"not measured\" without /proc.",
            "rill ÷ target compares msg/s on the same fsync mode. The bare row is a minimal "
            "Python server that only appends frames to a file (and streams the file back) with "
            "no per-message work: a reference point, not a limit (rill can beat it).",
        ],
    }


def _cost(value: float | None) -> Any:
    return "not measured" if value is None else value


def _comparison_title(comparison: list[dict[str, Any]]) -> str:
    targets = [target for target in dict.fromkeys(row["target"] for row in comparison) if target != "rill"]
    if all(target in ("nats", "redis", "bare") for target in targets):
        return "rill vs NATS JetStream vs Redis Streams vs a bare Python server"
    return " vs ".join(["rill", *(NAMES[target] for target in targets)])


def machine_table(capabilities: list[dict[str, Any]], fractions: list[dict[str, Any]]) -> dict[str, Any]:
    """The machine's own figures, each labelled for what it measured, and rill's share."""
    by_capability = {}
    for entry in fractions:
        by_capability.setdefault(id(entry["capability"]), []).append(entry)
    rows: list[list[Any]] = []
    for capability in capabilities:
        figure = capability["mb_per_s"] if capability["mb_per_s"] is not None else capability["reason"]
        entries = by_capability.get(id(capability)) or [None]
        for entry in entries:
            fsync = entry["fsync"] if entry else capability.get("fsync")
            shares = ["—", "—"] if entry is None else [
                "—" if entry[phase] is None else f"{entry[phase]:.2f} of it" for phase in PHASES]
            rows.append([capability["label"], FSYNC_NAMES.get(fsync, "—"), capability["how"], figure, *shares])
    return {
        "title": "Machine capability (measured in this run)",
        "columns": MACHINE_COLUMNS,
        "rows": rows,
        "notes": [
            "loopback TCP: iperf3 (a C tool), one stream over 127.0.0.1, bytes received per "
            "second; without iperf3 the row says it was not measured.",
            "disk: a sequential write of 1 MiB blocks to a new file beside the servers' data, "
            "fdatasync at the end (beside fsync every second) or after every block (beside fsync "
            "always, which syncs each 1 MB batch). Python only issues write and fdatasync.",
            "These are what the machine did alone with one stream, not ceilings: rill's "
            "consume (sendfile) can pass iperf3's copy through user space.",
        ],
    }


def kafka_ratios(comparison: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per fsync mode and ``KAFKA_PAIRS`` entry present in the run: the Kafka row's MB/s ÷ the
    other's, publish and consume, with the floor when there is one (None: not measured)."""
    ok = {(row["target"], row["fsync"]): row for row in comparison if row["status"] == "ok"}
    present = {(row["target"], row["fsync"]) for row in comparison}
    entries = []
    for fsync in dict.fromkeys(row["fsync"] for row in comparison):
        for target, other in KAFKA_PAIRS:
            if (target, fsync) not in present or (other, fsync) not in present:
                continue
            base, kafka = ok.get((other, fsync)), ok.get((target, fsync))
            ratios = {phase: None if base is None or kafka is None else
                      ratio(kafka[phase]["mb_per_s"], base[phase]["mb_per_s"]) for phase in PHASES}
            floor = KAFKA_FLOORS.get((target, other))
            entries.append({
                "target": target, "against": other, "fsync": fsync, "floor": floor, **ratios,
                "cpu_s_per_million": cost_ratio(kafka, base),
                "meets": {phase: None if floor is None or ratios[phase] is None else ratios[phase] >= floor
                          for phase in PHASES},
                "rounds": round_ratios(kafka, base, "mb_per_s"),
            })
    return entries


def kafka_table(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The Kafka path's conclusion: rill-kafka ÷ rill (Iggy) and ÷ each Kafka peer, and
    kafka-bare ÷ tansu."""
    rows: list[list[Any]] = []
    for entry in entries:
        name = "rill (Iggy listener)" if entry["against"] == "rill" else NAMES[entry["against"]]
        label = f"{entry['target']} ÷ {name}"
        floor = entry["floor"]
        cells: list[Any] = [label, FSYNC_NAMES[entry["fsync"]]]
        for phase in PHASES:
            title = f"{label}, {phase} MB/s, fsync {FSYNC_NAMES[entry['fsync']]}{_spread(entry, phase)}"
            cells.append(_kafka_ratio_cell(entry[phase], entry["meets"][phase], title))
        cells.append("—" if floor is None else f"≥ {floor:g}×")
        for phase in PHASES:
            meets = entry["meets"][phase]
            cells.append("—" if floor is None else "not measured" if meets is None else "yes" if meets else "no")
        cells.append(cost_cell(entry.get("cpu_s_per_million"),
                               f"{label}, {COST_WORDS}, fsync {FSYNC_NAMES[entry['fsync']]}"))
        rows.append(cells)
    return {
        "title": "Kafka protocol: rill's Kafka listener ÷ rill's Iggy listener and ÷ Kafka peers",
        "columns": KAFKA_COLUMNS,
        "rows": rows,
        "notes": [
            "MB/s of payload, same workload and fsync mode, measured in this run. rill (the Iggy "
            "listener) uses rill's own client (send, poll); rill-kafka-wire uses rill's Kafka "
            "codec, as cheap a client (a batch encoded once and re-sent, records counted from "
            "batch headers); rill-kafka, kafka-bare, tansu and noida-db use confluent-kafka "
            "(librdkafka, C).",
            "Floors (issue 13): the Kafka path ≥ 0.70 × the Iggy path (rill-kafka-wire ÷ rill); "
            "rill with confluent-kafka ≥ 2 × tansu. tansu and noida-db keep data in memory "
            "(no fsync); kafka-bare (a bare Python broker: one write per batch, pread to fetch, "
            "no per-record work) stores with rill's fsync policy, a reference without a floor; "
            "kafka-bare ÷ tansu is what a broker that writes each batch to a file before "
            "answering reaches against tansu on this machine in this run.",
        ],
    }


def _kafka_ratio_cell(value: float | None, meets: bool | None, title: str) -> Any:
    """A ratio cell coloured by its floor (green: met, red: missed; none without a floor)."""
    cell = ratio_cell(value, None, title)
    if isinstance(cell, dict):
        cell["good"] = meets
    return cell


def tank_ratios(comparison: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per fsync mode with a rill-tank row and a rill row: rill-tank's msg/s ÷ rill's (Iggy),
    publish and consume, with issue 14's floor (None: not measured)."""
    ok = {(row["target"], row["fsync"]): row for row in comparison if row["status"] == "ok"}
    entries = []
    for row in comparison:
        fsync = row["fsync"]
        if row["target"] != "rill-tank" or not any(
                other["target"] == "rill" and other["fsync"] == fsync for other in comparison):
            continue
        base, tank = ok.get(("rill", fsync)), ok.get(("rill-tank", fsync))
        ratios = {phase: None if base is None or tank is None else
                  ratio(tank[phase]["msg_per_s"], base[phase]["msg_per_s"]) for phase in PHASES}
        floor = TANK_FLOORS["rill"]
        entries.append({"against": "rill", "fsync": fsync, "floor": floor, **ratios,
                        "cpu_s_per_million": cost_ratio(tank, base),
                        "meets": {phase: None if ratios[phase] is None else ratios[phase] >= floor
                                  for phase in PHASES},
                        "rounds": round_ratios(tank, base, "msg_per_s")})
    return entries


def tank_table(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The TANK path's conclusion: rill-tank ÷ rill (Iggy listener), msg/s."""
    rows: list[list[Any]] = []
    for entry in entries:
        cells: list[Any] = ["rill (Iggy listener)", FSYNC_NAMES[entry["fsync"]]]
        for phase in PHASES:
            title = f"rill-tank ÷ rill, {phase} msg/s, fsync {FSYNC_NAMES[entry['fsync']]}{_spread(entry, phase)}"
            cells.append(_kafka_ratio_cell(entry[phase], entry["meets"][phase], title))
        cells.append(f"≥ {entry['floor']:g}×")
        for phase in PHASES:
            meets = entry["meets"][phase]
            cells.append("not measured" if meets is None else "yes" if meets else "no")
        cells.append(cost_cell(entry.get("cpu_s_per_million"),
                               f"rill-tank ÷ rill, {COST_WORDS}, fsync {FSYNC_NAMES[entry['fsync']]}"))
        rows.append(cells)
    return {
        "title": "TANK protocol: rill's TANK listener ÷ rill's Iggy listener",
        "columns": TANK_COLUMNS,
        "rows": rows,
        "notes": [
            "msg/s, same workload and fsync mode, measured in this run; both rows use rill's own "
            "clients (TankClient for TANK; send, poll for Iggy).",
            "Floor (issue 14): the TANK path ≥ 0.60 × the Iggy path's msg/s, both directions.",
            "Server CPU ratio: rill-tank's server CPU seconds per million messages (publish + "
            "consume) ÷ the Iggy listener's; below 1× the TANK path spent less CPU per message.",
        ],
    }


ROUND_TRIP_COLUMNS = ["target", "fsync", "round trips", "p50 ms", "p99 ms", "max ms",
                      "server CPU-s / M msg", "p50 ÷ rill (Iggy) p50"]


def round_trip_entries(comparison: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row that measured round trips: its figures and its p50 ÷ rill's (Iggy) on the same
    fsync mode (None when rill did not measure them)."""
    rill = {row["fsync"]: row["round_trip"] for row in comparison
            if row["target"] == "rill" and row["status"] == "ok" and row.get("round_trip")}
    entries = []
    for row in comparison:
        trips = row.get("round_trip") if row["status"] == "ok" else None
        if not trips:
            continue
        base = rill.get(row["fsync"])
        entries.append({"target": row["target"], "fsync": row["fsync"], **trips,
                        "p50_vs_rill": None if base is None or row["target"] == "rill"
                        else ratio(trips["p50_ms"], base["p50_ms"])})
    return entries


def round_trip_table(entries: list[dict[str, Any]], targets_without: list[str]) -> dict[str, Any]:
    """The one-message round trip of every target that has one."""
    rows: list[list[Any]] = []
    for entry in entries:
        versus = entry["p50_vs_rill"]
        rows.append([NAMES[entry["target"]], FSYNC_NAMES[entry["fsync"]], entry["messages"],
                     entry["p50_ms"], entry["p99_ms"], entry.get("max_ms"),
                     _cost(entry.get("cpu_s_per_million")),
                     "—" if versus is None else ratio_cell(
                         versus, False, f"{NAMES[entry['target']]} round trip p50 ÷ rill's (Iggy)")])
    notes = [
        "One message at a time: a producer sends it and waits for the acknowledgement while a "
        "consumer on its own connection long-polls at the tail; a round trip is from the "
        "produce's start to the consumer's receipt, the next message is sent once it arrived. "
        "Both clients are Python (uvloop) in one process, after untimed warm-up round trips.",
        "How each protocol tails: Iggy (rill): POLL_MESSAGES_WAITING (rill's poll that waits, "
        "1031), one request; Kafka (rill-kafka-wire): Fetch with max_wait_ms and "
        "min_bytes 1; TANK: Consume with max_wait_ms and min_bytes 1.",
        "server CPU-s / M msg: the server's CPU over the round trips, per million of them.",
    ]
    if targets_without:
        notes.append("No round-trip driver: " + ", ".join(NAMES[target] for target in targets_without)
                     + " (tansu answers a Fetch at the tail only when max_wait_ms has passed, "
                     "noida-db has no long poll; NATS and Redis are not driven here).")
    return {"title": "One message: produce → tailing consumer (round trip)",
            "columns": ROUND_TRIP_COLUMNS, "rows": rows, "notes": notes}


def finish_report(report: dict[str, Any], comparison: list[dict[str, Any]],
                  capabilities: list[dict[str, Any]]) -> None:
    """Fill ``report`` from the measured rows: ratios, the conclusion, the chart, the tables."""
    add_ratios(comparison)
    fractions = machine_fractions(comparison, capabilities)
    report["comparison"] = comparison
    report["machine_capability"] = capabilities
    report["summary"] = summary_tables(comparison, fractions)
    kafka = kafka_ratios(comparison)
    if kafka:
        report["kafka"] = kafka
        report["summary"].insert(0, kafka_table(kafka))
    tank = tank_ratios(comparison)
    if tank:
        report["tank"] = tank
        report["summary"].insert(0, tank_table(tank))
    if report["workload"].get("round_trips"):
        trips = round_trip_entries(comparison)
        report["round_trip"] = trips
        without = [target for target in dict.fromkeys(row["target"] for row in comparison if row["status"] == "ok")
                   if not any(entry["target"] == target for entry in trips)]
        report["summary"].insert(0, round_trip_table(trips, without))
    report["bars"].append(throughput_bars(comparison))
    report["tables"].append(comparison_table(comparison, report["workload"]))
    rounds = report["workload"].get("rounds", 1)
    if rounds > 1:
        for table in [*report["summary"], *report["tables"]]:
            table["notes"].append(
                f"Every figure is the median of {rounds} rounds, run interleaved (every target "
                "once per round, in order) so that a slow spell of the machine falls on all of "
                "them; ratios are ratios of those medians. Each round's figures are in the JSON "
                "report (comparison[].rounds).")
    if capabilities:
        report["tables"].append(machine_table(capabilities, fractions))
