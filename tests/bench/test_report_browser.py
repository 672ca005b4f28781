"""The compare report leads with its conclusion: in a real headless Chromium with a 1280 × 800
viewport, every target's rill ÷ target ratios are on the first screen (no scrolling), and the
chart after them has one bar per target in each group."""

from __future__ import annotations

from pathlib import Path

from selenium.webdriver.common.by import By

from bench.known_compare import TARGETS, known_report, known_rows
from browser import headless_chromium
from rill.bench.compare_report import NAMES, RATIO_FIGURES
from rill.bench.report_html import write_html

WIDTH, HEIGHT = 1280, 800


def first_screen_ratio_cells(page: Path) -> tuple[list[dict], list[tuple[str, str]]]:
    """Open ``page`` at exactly WIDTH × HEIGHT (CSS pixels), unscrolled; return every ratio
    cell of the page's summary (its row's target, text, rectangle, whether it is displayed) and
    every chart bar (group, series)."""
    with headless_chromium(WIDTH, HEIGHT) as browser:
        # the window's size includes the browser's own frame: pin the page's viewport instead
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        browser.get(page.resolve().as_uri())
        assert browser.execute_script("return [innerWidth, innerHeight, scrollY]") == [WIDTH, HEIGHT, 0]
        cells = []
        for cell in browser.find_elements(By.CSS_SELECTOR, "section.summary td.ratio"):
            rect = browser.execute_script(
                "const r = arguments[0].getBoundingClientRect();"
                "return {left: r.left, top: r.top, right: r.right, bottom: r.bottom};", cell)
            target = browser.execute_script("return arguments[0].parentElement.cells[0].textContent", cell)
            cells.append({"target": target, "text": cell.text, "rect": rect, "displayed": cell.is_displayed()})
        bars = [(bar.get_attribute("data-group"), bar.get_attribute("data-series"))
                for bar in browser.find_elements(By.CSS_SELECTOR, "svg.chart rect.bar")]
        return cells, bars


def assert_conclusion_on_first_screen(page: Path, targets: list[str]) -> list[tuple[str, str]]:
    """Each of ``targets`` has its ratio cells, and every ratio cell is displayed, non-empty and
    inside the first screen; returns the chart's bars."""
    cells, bars = first_screen_ratio_cells(page)
    per_row = 2 * len(RATIO_FIGURES)  # publish and consume, each throughput, p50 and p99
    assert cells, "the report has no ratio cells in a summary"
    for target in targets:
        mine = [cell for cell in cells if cell["target"] == target]
        assert len(mine) >= per_row, (target, len(mine))
    for cell in cells:
        rect = cell["rect"]
        assert cell["displayed"] and cell["text"].strip(), cell
        assert 0 <= rect["left"] < rect["right"] <= WIDTH, cell
        assert 0 <= rect["top"] < rect["bottom"] <= HEIGHT, cell
    return bars


def test_every_ratio_is_visible_without_scrolling_and_the_chart_has_a_bar_per_target(tmp_path):
    page = write_html(known_report(), tmp_path / "compare.html")
    peers = [NAMES[target] for target in TARGETS if target != "rill"]
    bars = assert_conclusion_on_first_screen(page, peers)

    groups: dict[str, list[str]] = {}
    for group, series in bars:
        groups.setdefault(group, []).append(series)
    assert len(groups) == 4  # publish and consume × fsync every second and always
    for series in groups.values():
        assert series == [NAMES[target] for target in TARGETS]  # rill included, one bar each


def test_the_conclusion_still_fits_with_a_target_missing(tmp_path):
    rows = known_rows()
    rows[1].update(status="not available", reason="nats-server binary not found at /nope",
                   publish=None, consume=None)
    page = write_html(known_report(rows=rows), tmp_path / "compare.html")
    assert_conclusion_on_first_screen(page, ["Redis Streams", "bare Python server"])
