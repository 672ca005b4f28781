"""The HTML report: one self-contained page (inline CSS and SVG) a person opens in a browser.

Owns: ``render_html(report)`` and ``write_html(report, path)`` for any report made with
``results.new_report``: the title and creation time at the top, then the report's conclusion
when it has one — its "summary" tables (a ratio cell, ``{"ratio", "text", "good", "title"}``,
shows as ``td.ratio``, green when ``good``, red when not) and its "bars" (grouped bar charts) —
so it is read without scrolling on a 1280 × 800 screen; then the machine; for each scenario a
summary table (each kind overall, then every actor: MB/s, msg/s, latency p50/p90/p99/p99.9,
average and maximum), the server's cost when the run metered it ("server_cpu": CPU seconds,
per million messages, per GB of payload), a throughput-over-time chart (the "timeline" of each kind) and a latency
distribution chart per kind (its "latency_histogram", log-spaced bins, percentile markers).
The summaries come before the runs: every entry of "tables" (with its notes), then of "curves"
(an x/y line chart, one line per series), then the scenarios. Reports from other tools that follow the same shape render too; missing keys are
skipped, never fatal.

Invariants: no JavaScript, no fonts or files fetched from anywhere; every text from the report
is escaped (``html.escape``), so a title or an option value cannot inject markup.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Iterable

from rill.bench.charts import bar_chart, format_number, histogram_chart, line_chart
from rill.bench.results import HISTOGRAM_BINS_PER_DECADE

LATENCY_KEYS = (("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p999", "p99.9"), ("avg", "avg"), ("max", "max"))
SUMMARY_COLUMNS = ("Actor", "Kind", "Messages", "Batches", "Seconds", "MB/s", "msg/s",
                   *(f"{label} ms" for _, label in LATENCY_KEYS))
OPTION_LABELS = (
    ("transport", "transport"), ("producers", "producers"), ("consumers", "consumers"),
    ("streams", "streams"), ("partitions", "partitions"), ("consumer_groups", "consumer groups"),
    ("messages_per_batch", "messages/batch"), ("message_size", "message size (B)"),
    ("batches", "batches/actor"), ("duration", "duration (s)"), ("warmup", "warm-up (s)"),
    ("fsync", "fsync"), ("server", "server"),
)
COST_COLUMNS = ("server CPU-s (user + system)", "CPU-s per million messages", "CPU-s per GB of payload",
                "messages counted", "server processes")
MAX_ACTOR_LINES = 8  # the timeline chart draws each actor too when there are at most this many

STYLE = """
:root { --ink:#111827; --muted:#6b7280; --line:#e5e7eb; --head:#f3f4f6; --accent:#2563eb; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--ink); background: #fafafa; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 28px 48px; }
header { border-bottom: 3px solid var(--accent); margin-bottom: 20px; padding-bottom: 12px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 36px 0 8px; padding-top: 8px; border-top: 1px solid var(--line); }
h3 { font-size: 15px; margin: 18px 0 6px; color: #374151; }
.meta, .note { color: var(--muted); }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
nav a:hover { text-decoration: underline; }
table { border-collapse: collapse; margin: 8px 0 12px; background: #fff; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid var(--line); padding: 4px 9px; text-align: right; white-space: nowrap; }
th { background: var(--head); font-weight: 600; }
td:first-child, th:first-child, td.text { text-align: left; }
tr.overall td { font-weight: 600; background: #eff6ff; }
table.machine td, table.machine th { text-align: left; }
.options { display: flex; flex-wrap: wrap; gap: 6px; margin: 6px 0 10px; padding: 0; list-style: none; }
.options li { background: #fff; border: 1px solid var(--line); border-radius: 12px; padding: 1px 10px; }
.options b { font-weight: 600; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
svg.chart { background: #fff; border: 1px solid var(--line); border-radius: 6px; max-width: 100%; height: auto; }
svg .chart-title { font-size: 14px; font-weight: 600; fill: var(--ink); }
svg .axis-label { font-size: 12px; fill: #374151; }
svg .tick, svg .legend { font-size: 11px; fill: #4b5563; }
svg .grid { stroke: #eef0f3; stroke-width: 1; }
svg .axis { stroke: #9ca3af; stroke-width: 1; }
svg .marker { stroke: #111827; stroke-width: 1; stroke-dasharray: 4 3; }
svg .marker-label { font-size: 11px; fill: #111827; }
ul.notes { margin: 4px 0 12px; color: #374151; }
section { overflow-x: auto; }  /* a wide table scrolls in its section, not the page */
section.summary th:nth-child(2) { text-align: left; }
section.summary h2 { font-size: 17px; margin: 10px 0 4px; padding-top: 0; border-top: 0; }
section.summary table { margin: 4px 0 2px; }
section.summary th { white-space: normal; vertical-align: bottom; font-size: 12px; line-height: 1.25; }
section.summary ul.notes { margin: 2px 0 6px; font-size: 12px; padding-left: 18px; }
td.ratio { font-weight: 600; }
td.ratio.good { background: #dcfce7; color: #14532d; }
td.ratio.bad { background: #fee2e2; color: #7f1d1d; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _cell(value: Any) -> str:
    if isinstance(value, dict) and "ratio" in value:
        good = {True: " good", False: " bad"}.get(value.get("good"), "")
        return (f'<td class="ratio{good}" data-ratio="{_e(value["ratio"])}" title="{_e(value.get("title", ""))}">'
                f'{_e(value.get("text", value["ratio"]))}</td>')
    if isinstance(value, bool) or value is None:
        return f'<td class="text">{_e("—" if value is None else value)}</td>'
    if isinstance(value, int):
        return f"<td>{value:,}</td>"
    if isinstance(value, float):
        return f"<td>{_e(format_number(value) if abs(value) >= 1000 else f'{value:.4g}')}</td>"
    return f'<td class="text">{_e(value)}</td>'


def _table(columns: Iterable[Any], rows: Iterable[tuple[str, Iterable[Any]]], css_class: str = "") -> str:
    head = "".join(f"<th>{_e(column)}</th>" for column in columns)
    body = "\n".join(
        f'<tr class="{_e(row_class)}">' + "".join(_cell(value) for value in values) + "</tr>"
        for row_class, values in rows
    )
    return f'<table class="{_e(css_class)}"><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>'


def _summary_row(name: str, kind: str, summary: dict[str, Any]) -> list[Any]:
    latency = summary.get("latency_ms") or {}
    return [name, kind, summary.get("messages"), summary.get("batches"), summary.get("seconds"),
            summary.get("mb_per_s"), summary.get("msg_per_s"),
            *(latency.get(key) for key, _ in LATENCY_KEYS)]


def actor_order(actor: dict[str, Any]) -> tuple[int, str, int]:
    """Producers first, then consumers; ``consumer-2`` before ``consumer-10``."""
    name = str(actor.get("actor", ""))
    stem, _, number = name.rpartition("-")
    kinds = {"producer": 0, "consumer": 1}
    return (kinds.get(actor.get("kind", ""), 2), stem, int(number) if number.isdigit() else 0)


def _options(options: dict[str, Any]) -> str:
    items = []
    for key, label in OPTION_LABELS:
        value = options.get(key)
        if value is None or value == "":
            continue
        items.append(f"<li>{_e(label)} <b>{_e(value)}</b></li>")
    return f'<ul class="options">{"".join(items)}</ul>' if items else ""


def _scenario(index: int, scenario: dict[str, Any]) -> str:
    name = scenario.get("label") or scenario.get("scenario") or f"scenario {index + 1}"
    target = scenario.get("target", "")
    overall: dict[str, Any] = scenario.get("overall") or {}
    actors: list[dict[str, Any]] = sorted(scenario.get("actors") or [], key=actor_order)
    parts = [f'<section id="scenario-{index + 1}">',
             f"<h2>{_e(name)}{' — ' + _e(target) if target else ''}</h2>",
             _options(scenario.get("options") or {})]
    rows: list[tuple[str, list[Any]]] = []
    for kind, summary in sorted(overall.items(), key=lambda item: item[0] != "producers"):
        label = f"all {kind} ({summary.get('actors', '?')})"
        rows.append(("overall", _summary_row(label, kind.rstrip("s"), summary)))
    for actor in actors:
        rows.append(("", _summary_row(actor.get("actor", "?"), actor.get("kind", ""), actor)))
    parts.append(_table(SUMMARY_COLUMNS, rows, "summary"))
    parts.append(_cost(scenario.get("server_cpu")))
    parts.append('<div class="charts">')
    timeline: dict[str, list[list[float]]] = {}
    for kind, summary in overall.items():
        timeline[f"all {kind}"] = [[point[0], point[2]] for point in summary.get("timeline") or []]
    if len(actors) <= MAX_ACTOR_LINES and len(actors) > len(overall):
        for actor in actors:
            timeline[actor.get("actor", "?")] = [[point[0], point[2]] for point in actor.get("timeline") or []]
    parts.append(line_chart(timeline, title=f"{name}: throughput over time", x_label="seconds",
                            y_label="MB/s"))
    for kind, summary in overall.items():
        latency = summary.get("latency_ms") or {}
        markers = {label: latency[key] for key, label in LATENCY_KEYS[:4] if latency.get(key)}
        parts.append(histogram_chart(
            {kind: summary.get("latency_histogram") or []},
            title=f"{name}: {kind} batch latency distribution", x_label="ms", y_label="batches",
            markers=markers, bins_per_decade=HISTOGRAM_BINS_PER_DECADE,
        ))
    parts.append("</div></section>")
    return "\n".join(parts)


def _cost(cost: dict[str, Any] | None) -> str:
    """The server's cost over the run's measured phase (words when it was not measured)."""
    if not cost:
        return ""
    if not cost.get("measured"):
        return ('<p class="note">server CPU: not measured (a server the bench did not start and '
                "no --server-pid, or no /proc)</p>")
    row = [cost.get("cpu_s"), cost.get("cpu_s_per_million"), cost.get("cpu_s_per_gb"),
           cost.get("messages"), ", ".join(str(pid) for pid in cost.get("pids") or []) or "—"]
    return _table(COST_COLUMNS, [("", row)], "cost")


def _extra_table(index: int, table: dict[str, Any], prefix: str = "table", css_class: str = "") -> str:
    columns = table.get("columns") or []
    rows = [("", list(row)) for row in table.get("rows") or []]
    notes = table.get("notes") or []
    title = _e(table.get("title", f"Table {index + 1}"))
    parts = [f'<section id="{prefix}-{index + 1}" class="{css_class}"><h2>{title}</h2>', _table(columns, rows, "data")]
    if notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{_e(note)}</li>" for note in notes) + "</ul>")
    parts.append("</section>")
    return "\n".join(parts)


def _curve(index: int, curve: dict[str, Any]) -> str:
    title = curve.get("title", f"Curve {index + 1}")
    chart = line_chart(curve.get("series") or {}, title=title, x_label=curve.get("x_label", "x"),
                       y_label=curve.get("y_label", "y"))
    notes = curve.get("notes") or []
    note_html = ('<ul class="notes">' + "".join(f"<li>{_e(note)}</li>" for note in notes) + "</ul>") if notes else ""
    return f'<section id="curve-{index + 1}"><h2>{_e(title)}</h2>{chart}{note_html}</section>'


def _bars(index: int, spec: dict[str, Any]) -> str:
    title = spec.get("title", f"Chart {index + 1}")
    chart = bar_chart(spec.get("groups") or {}, title=title, y_label=spec.get("y_label", ""))
    notes = spec.get("notes") or []
    note_html = ('<ul class="notes">' + "".join(f"<li>{_e(note)}</li>" for note in notes) + "</ul>") if notes else ""
    return f'<section id="bars-{index + 1}" class="bars">{chart}{note_html}</section>'


def render_html(report: dict[str, Any]) -> str:
    """The whole page for ``report`` (a ``results.new_report`` dict, filled)."""
    title = report.get("title") or "rill bench"
    machine: dict[str, Any] = report.get("machine") or {}
    scenarios = report.get("scenarios") or []
    tables = report.get("tables") or []
    curves = report.get("curves") or []
    links = [f'<a href="#table-{index + 1}">{_e(table.get("title", index + 1))}</a>' for index, table in enumerate(tables)]
    links += [f'<a href="#curve-{index + 1}">{_e(curve.get("title", index + 1))}</a>' for index, curve in enumerate(curves)]
    links += [f'<a href="#scenario-{index + 1}">{_e(scenario.get("label") or scenario.get("scenario", index + 1))}</a>'
              for index, scenario in enumerate(scenarios)]
    machine_rows = [("", [key, value]) for key, value in machine.items()]
    summary = report.get("summary") or []
    bars = report.get("bars") or []
    body = [
        "<header>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">{_e(report.get("tool", "rill bench"))} · created {_e(report.get("created", ""))} '
        "· MB = 10<sup>6</sup> bytes · latencies are batch round trips in ms (nearest-rank percentiles)</p>",
        "</header>",
    ]
    # the conclusion first (it must fit the first screen), then the machine and the contents
    body += [_extra_table(index, table, "summary", "summary") for index, table in enumerate(summary)]
    body += [_bars(index, spec) for index, spec in enumerate(bars)]
    body += [_table(("machine", ""), machine_rows, "machine") if machine_rows else "",
             f"<nav>{''.join(links)}</nav>" if len(links) > 1 else ""]
    # the summaries (comparison tables, scaling curves), then every run in detail
    body += [_extra_table(index, table) for index, table in enumerate(tables)]
    body += [_curve(index, curve) for index, curve in enumerate(curves)]
    body += [_scenario(index, scenario) for index, scenario in enumerate(scenarios)]
    if not (scenarios or tables or curves or summary or bars):
        body.append('<p class="note">This report holds no results.</p>')
    body.append(f'<footer>Generated by {_e(report.get("tool", "rill bench"))}. '
                "Self-contained: no scripts, nothing loaded from the network.</footer>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{_e(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body><main>\n"
        + "\n".join(part for part in body if part)
        + "\n</main></body>\n</html>\n"
    )


def write_html(report: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(report), encoding="utf-8")
    return path
