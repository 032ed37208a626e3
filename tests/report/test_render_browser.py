"""Proof that reports and dashboards render: real headless Chromium, no network.

Screenshots are saved under each test's tmp dir (printed with ``-s``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _browser import chrome, open_page, screenshot
from _fleet_data import fleet_with
from _report_data import XSS, scenario

from proxydiag.report.api import report
from proxydiag.report.dashboard import dashboard_html

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    yield from chrome()


def _severe(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _assert_drawn(driver: Any, n_figures: int) -> None:
    plots = driver.find_elements("css selector", ".js-plotly-plot")
    assert len(plots) == n_figures
    for plot in plots:  # every figure has its SVG with drawn content
        assert plot.find_elements("css selector", "svg.main-svg")
        assert plot.find_elements("css selector", ".plot path, .plot text, .cartesianlayer path")
    assert len(driver.find_elements("css selector", "svg.main-svg")) >= n_figures


def test_report_renders_in_chromium(driver: Any, tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    path.write_text(report(fmt="html", **scenario(n_steps=5000)), encoding="utf-8")  # type: ignore[arg-type]
    n = open_page(driver, path)
    assert n == 6
    _assert_drawn(driver, n)
    assert _severe(driver) == []
    # self-contained: the page fetched nothing (no CDN, no fonts, no images)
    assert (
        driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        == []
    )
    # markers for NaN/+inf/-inf are drawn as points in the panels
    assert driver.find_elements("css selector", ".scatterlayer .points path")
    shot = screenshot(driver, tmp_path / "report.png")
    assert shot.stat().st_size > 50_000
    print(f"report screenshot: {shot}")


def test_xss_shows_as_text_and_never_runs(driver: Any, tmp_path: Path) -> None:
    path = tmp_path / "xss.html"
    path.write_text(report(fmt="html", **scenario(n_steps=800, xss=True)), encoding="utf-8")  # type: ignore[arg-type]
    # any alert() (or onerror handler) on the page would set this flag before it could fire
    driver.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument",
        {"source": "window.alert = function () { window.__alerted = true; };"},
    )
    n = open_page(driver, path)
    _assert_drawn(driver, n)
    assert driver.find_elements("css selector", "img") == []
    assert driver.execute_script("return window.__alerted === undefined")
    text = driver.execute_script("return document.body.innerText")
    assert f"{XSS}full-s0: loss_divergence from step 480" in text
    # inside plotly: the panel title of the metric named XSS is that literal text
    titles = [
        t.get_attribute("textContent") for t in driver.find_elements("css selector", "text.gtitle")
    ]
    assert XSS in titles
    ticks = driver.execute_script(
        "return Array.from(document.querySelectorAll('.ytick text')).map(t => t.textContent)"
    )
    assert any(t.startswith(XSS) for t in ticks)  # timeline rows name the runs
    assert _severe(driver) == []
    screenshot(driver, tmp_path / "xss.png")


def test_dashboard_renders_in_chromium(driver: Any, tmp_path: Path) -> None:
    path = tmp_path / "index.html"
    path.write_text(dashboard_html(fleet_with(name=XSS)), encoding="utf-8")
    n = open_page(driver, path)
    assert n == 2
    _assert_drawn(driver, n)
    assert driver.find_elements("css selector", "img") == []
    assert XSS in driver.execute_script("return document.body.innerText")
    points = driver.find_elements("css selector", ".scatterlayer .points path")
    assert len(points) == 2 * 4  # four proxies in each scatter
    assert _severe(driver) == []
    shot = screenshot(driver, tmp_path / "dashboard.png")
    print(f"dashboard screenshot: {shot}")
