"""Inline SVG charts for the HTML report, drawn in Python: no JavaScript, no network.

Owns: ``line_chart`` (one polyline per series, x/y axes with round ticks, a legend; a point's
values show as a tooltip through SVG ``<title>``), ``histogram_chart`` (bars over log-spaced
bins on a logarithmic axis, one translucent layer per series, optional vertical markers such as
p50/p99), ``bar_chart`` (grouped bars: one group per key, one bar per series in the same
colour in every group, its value written above it), the colour palette and the number formatting shared with the report page.

Invariant: every piece of text that reaches the SVG goes through ``html.escape``.
"""

from __future__ import annotations

import html
import math
from typing import Iterable, Sequence

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777",
           "#4b5563", "#65a30d", "#9333ea")
WIDTH, HEIGHT = 760, 320
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 72, 20, 34, 52
MAX_MARKED_POINTS = 300  # above this many points per series, no per-point tooltip circles


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _escape(text: object) -> str:
    return html.escape(str(text), quote=True)


def format_number(value: float) -> str:
    """Compact and readable: 1,234 / 12.3k / 4.56M / 0.0123."""
    magnitude = abs(value)
    if magnitude >= 10_000_000:
        return f"{value / 1e6:,.0f}M"
    if magnitude >= 1_000_000:
        return f"{value / 1e6:.2f}M"
    if magnitude >= 100_000:
        return f"{value / 1e3:,.0f}k"
    if magnitude >= 10_000:
        return f"{value / 1e3:.1f}k"
    if magnitude >= 100 or value == int(value):
        return f"{value:,.0f}"
    if magnitude >= 1:
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (about ``count`` of them)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0, 1.0]
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw_step = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw_step))
    step = next(multiple * power for multiple in (1, 2, 2.5, 5, 10) if multiple * power >= raw_step)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value < high + step * 0.999:
        ticks.append(round(value, 12))
        value += step
    return ticks


def _frame(title: str, x_label: str, y_label: str, top: int = MARGIN_TOP) -> list[str]:
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{_escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{_escape(title)}</title>",
        f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" class="chart-title">{_escape(title)}</text>',
        f'<text x="{MARGIN_LEFT + (WIDTH - MARGIN_LEFT - MARGIN_RIGHT) / 2}" y="{HEIGHT - 8}" '
        f'text-anchor="middle" class="axis-label">{_escape(x_label)}</text>',
        f'<text transform="translate(16 {top + (HEIGHT - top - MARGIN_BOTTOM) / 2}) rotate(-90)" '
        f'text-anchor="middle" class="axis-label">{_escape(y_label)}</text>',
    ]
    return parts


def _legend_layout(names: Sequence[str]) -> tuple[list[tuple[float, float, str]], int]:
    """Where each legend entry goes (rows under the title, wrapped to the width), and the rows."""
    if len(names) < 2:
        return [], 0
    placed, x, row = [], float(MARGIN_LEFT), 0
    for name in names:
        width = 28 + 7 * len(name)
        if x + width > WIDTH - MARGIN_RIGHT and x > MARGIN_LEFT:
            x, row = float(MARGIN_LEFT), row + 1
        placed.append((x, 30 + 16 * row, name))
        x += width
    return placed, row + 1


def _legend(names: Sequence[str]) -> list[str]:
    parts = []
    for index, (x, y, name) in enumerate(_legend_layout(names)[0]):
        parts.append(f'<rect x="{x}" y="{y}" width="12" height="12" rx="2" fill="{colour(index)}"/>')
        parts.append(f'<text x="{x + 16}" y="{y + 10}" class="legend">{_escape(name)}</text>')
    return parts


def _top(names: Sequence[str]) -> int:
    """The plot's top edge: below the title and the legend rows."""
    return MARGIN_TOP + 16 * _legend_layout(names)[1] + (6 if len(names) > 1 else 0)


def _empty(title: str, x_label: str, y_label: str) -> str:
    parts = _frame(title, x_label, y_label)
    parts.append(f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" class="axis-label">no data</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def line_chart(series: dict[str, Sequence[Sequence[float]]], *, title: str, x_label: str, y_label: str,
               y_from_zero: bool = True) -> str:
    """An x/y chart with one line per series (``{name: [[x, y], ...]}``)."""
    named = {name: [(float(point[0]), float(point[1])) for point in points]
             for name, points in series.items() if points}
    if not named:
        return _empty(title, x_label, y_label)
    xs = [x for points in named.values() for x, _ in points]
    ys = [y for points in named.values() for _, y in points]
    x_ticks = nice_ticks(min(xs), max(xs), 6)
    if all(x == int(x) for x in xs):  # counts (actors, partitions): whole-number ticks only
        whole = [tick for tick in x_ticks if tick == int(tick)]
        x_ticks = whole if len(whole) >= 2 else [float(x) for x in range(int(min(xs)), int(max(xs)) + 2)]
    y_ticks = nice_ticks(0.0 if y_from_zero else min(ys), max(ys) or 1.0, 5)
    x_low, x_high = x_ticks[0], x_ticks[-1]
    y_low, y_high = y_ticks[0], y_ticks[-1]
    top = _top(list(named))
    plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_height = HEIGHT - top - MARGIN_BOTTOM

    def sx(x: float) -> float:
        return MARGIN_LEFT + (x - x_low) / ((x_high - x_low) or 1.0) * plot_width

    def sy(y: float) -> float:
        return top + plot_height - (y - y_low) / ((y_high - y_low) or 1.0) * plot_height

    parts = _frame(title, x_label, y_label, top)
    parts += _grid(x_ticks, y_ticks, sx, sy, top)
    for index, (name, points) in enumerate(named.items()):
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        parts.append(f'<polyline fill="none" stroke="{colour(index)}" stroke-width="2" '
                     f'stroke-linejoin="round" points="{path}"><title>{_escape(name)}</title></polyline>')
        if len(points) <= MAX_MARKED_POINTS:
            radius = 3.5 if len(points) <= 40 else 2
            for x, y in points:
                tip = f"{name}: {format_number(y)} {y_label} at {format_number(x)} {x_label}"
                parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="{radius}" fill="{colour(index)}">'
                             f"<title>{_escape(tip)}</title></circle>")
    parts += _legend(list(named))
    parts.append("</svg>")
    return "\n".join(parts)


def _grid(x_ticks: Iterable[float], y_ticks: Iterable[float], sx, sy, top: int,
          x_text=format_number) -> list[str]:
    parts = []
    bottom = HEIGHT - MARGIN_BOTTOM
    for y in y_ticks:
        parts.append(f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" class="grid"/>')
        parts.append(f'<text x="{MARGIN_LEFT - 6}" y="{sy(y) + 4:.1f}" text-anchor="end" class="tick">'
                     f"{_escape(format_number(y))}</text>")
    for x in x_ticks:
        parts.append(f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{top}" y2="{bottom}" class="grid"/>')
        parts.append(f'<text x="{sx(x):.1f}" y="{bottom + 16}" text-anchor="middle" class="tick">'
                     f"{_escape(x_text(x))}</text>")
    parts.append(f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{bottom}" y2="{bottom}" class="axis"/>')
    parts.append(f'<line x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT}" y1="{top}" y2="{bottom}" class="axis"/>')
    return parts


def histogram_chart(series: dict[str, Sequence[Sequence[float]]], *, title: str, x_label: str,
                    y_label: str, markers: dict[str, float] | None = None, bins_per_decade: int = 10) -> str:
    """Bars over log-spaced bins: ``{name: [[upper_edge, count], ...]}``; each bin spans
    ``upper / 10**(1/bins_per_decade)`` to ``upper``. ``markers`` draws labelled vertical lines."""
    named = {name: [(float(edge), float(count)) for edge, count in bins if edge > 0]
             for name, bins in series.items() if bins}
    named = {name: bins for name, bins in named.items() if bins}
    if not named:
        return _empty(title, x_label, y_label)
    ratio = 10 ** (1.0 / bins_per_decade)
    lows = [edge / ratio for bins in named.values() for edge, _ in bins]
    highs = [edge for bins in named.values() for edge, _ in bins]
    log_low = math.floor(math.log10(min(lows)) * 2) / 2
    log_high = math.ceil(math.log10(max(highs)) * 2) / 2
    if log_high <= log_low:
        log_high = log_low + 0.5
    counts = [count for bins in named.values() for _, count in bins]
    y_ticks = nice_ticks(0.0, max(counts) or 1.0, 5)
    y_high = y_ticks[-1]
    top = _top(list(named))
    plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_height = HEIGHT - top - MARGIN_BOTTOM

    def sx(value: float) -> float:
        return MARGIN_LEFT + (math.log10(value) - log_low) / (log_high - log_low) * plot_width

    def sy(count: float) -> float:
        return top + plot_height - count / (y_high or 1.0) * plot_height

    x_ticks = [10 ** power for power in range(math.ceil(log_low), math.floor(log_high) + 1)]
    if len(x_ticks) < 3:  # a narrow range: add the 2 and 5 multiples
        x_ticks = sorted(value * multiple for value in [10 ** p for p in range(math.floor(log_low), math.ceil(log_high) + 1)]
                         for multiple in (1, 2, 5)
                         if log_low <= math.log10(value * multiple) <= log_high)
    parts = _frame(title, x_label, y_label, top)
    parts += _grid(x_ticks, y_ticks, sx, sy, top)
    opacity = 0.85 if len(named) == 1 else 0.55
    for index, (name, bins) in enumerate(named.items()):
        for edge, count in bins:
            if count <= 0:
                continue
            left, right = sx(edge / ratio), sx(edge)
            tip = f"{name}: {int(count)} batches between {format_number(edge / ratio)} and {format_number(edge)} {x_label}"
            parts.append(
                f'<rect x="{left:.1f}" y="{sy(count):.1f}" width="{max(right - left - 1, 1):.1f}" '
                f'height="{sy(0) - sy(count):.1f}" fill="{colour(index)}" fill-opacity="{opacity}">'
                f"<title>{_escape(tip)}</title></rect>"
            )
    for offset, (label, value) in enumerate((markers or {}).items()):
        if value <= 0 or not log_low <= math.log10(value) <= log_high:
            continue
        x = sx(value)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{HEIGHT - MARGIN_BOTTOM}" class="marker"/>')
        near_right = x > WIDTH - MARGIN_RIGHT - 48  # keep the label inside the chart
        anchor, label_x = ("end", x - 3) if near_right else ("start", x + 3)
        parts.append(f'<text x="{label_x:.1f}" y="{top + 14 + 12 * (offset % 4)}" text-anchor="{anchor}" '
                     'class="marker-label">'
                     f"{_escape(label)}</text>")
    parts += _legend(list(named))
    parts.append("</svg>")
    return "\n".join(parts)


def bar_chart(groups: dict[str, dict[str, float]], *, title: str, y_label: str) -> str:
    """Grouped bars (``{group: {series: value}}``): each group holds one bar per series, in
    the order the series first appear; a series missing from a group leaves its slot empty.
    Each bar is a ``rect.bar`` carrying ``data-group`` and ``data-series``. A group name's
    `` · `` parts go on separate lines under the axis."""
    groups = {group: {name: float(value) for name, value in values.items() if value is not None}
              for group, values in groups.items()}
    names = list(dict.fromkeys(name for values in groups.values() for name in values))
    if not names:
        return _empty(title, "", y_label)
    y_ticks = nice_ticks(0.0, max(value for values in groups.values() for value in values.values()) or 1.0, 5)
    y_high = y_ticks[-1]
    top = _top(names) + 14  # room for the value over the tallest bar
    bottom = HEIGHT - MARGIN_BOTTOM
    plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    slot = plot_width / len(groups)
    bar = min(48.0, slot * 0.8 / len(names))

    def sy(value: float) -> float:
        return bottom - value / (y_high or 1.0) * (bottom - top)

    parts = _frame(title, "", y_label, top)
    for y in y_ticks:
        parts.append(f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" class="grid"/>')
        parts.append(f'<text x="{MARGIN_LEFT - 6}" y="{sy(y) + 4:.1f}" text-anchor="end" class="tick">'
                     f"{_escape(format_number(y))}</text>")
    for group_index, (group, values) in enumerate(groups.items()):
        left = MARGIN_LEFT + slot * group_index + (slot - bar * len(names)) / 2
        for index, name in enumerate(names):
            if name not in values:
                continue
            value = values[name]
            x = left + bar * index
            tip = f"{name}, {group}: {format_number(value)} {y_label}"
            parts.append(
                f'<rect class="bar" data-group="{_escape(group)}" data-series="{_escape(name)}" '
                f'x="{x + 1:.1f}" y="{sy(value):.1f}" width="{bar - 2:.1f}" height="{bottom - sy(value):.1f}" '
                f'fill="{colour(index)}"><title>{_escape(tip)}</title></rect>')
            if bar >= 26:
                parts.append(f'<text x="{x + bar / 2:.1f}" y="{sy(value) - 4:.1f}" text-anchor="middle" '
                             f'class="tick">{_escape(format_number(value))}</text>')
        for line, words in enumerate(group.split(" · ")):
            parts.append(f'<text x="{MARGIN_LEFT + slot * (group_index + 0.5):.1f}" y="{bottom + 16 + 14 * line}" '
                         f'text-anchor="middle" class="tick">{_escape(words)}</text>')
    parts.append(f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{bottom}" y2="{bottom}" class="axis"/>')
    parts.append(f'<line x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT}" y1="{top}" y2="{bottom}" class="axis"/>')
    parts += _legend(names)
    parts.append("</svg>")
    return "\n".join(parts)
