"""Headless Chromium for the render tests (skips visibly where Chromium is absent)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--window-size=1400,1000",
)


def chrome() -> Iterator[Any]:
    """A Chromium driver with the browser console log enabled; quits at the end."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("headless Chromium not installed (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ARGS:
        options.add_argument(arg)
    profile = tempfile.mkdtemp(prefix="proxydiag-chrome-")
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def open_page(driver: Any, path: Path, *, timeout_s: float = 30.0) -> int:
    """Load a proxydiag page and wait until every figure is drawn; return the figure count."""
    driver.get(path.resolve().as_uri())
    expected = driver.execute_script(
        "return JSON.parse(document.getElementById('proxydiag-figures').textContent).length"
    )
    deadline = time.monotonic() + timeout_s
    while driver.execute_script("return window.proxydiagPlotted") != expected:
        if time.monotonic() > deadline:
            raise AssertionError(f"{path}: figures not drawn within {timeout_s} s")
        time.sleep(0.05)
    return int(expected)


def screenshot(driver: Any, path: Path) -> Path:
    """A full-page screenshot (the window grows to the page's height)."""
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1400, min(int(height) + 40, 16000))
    driver.save_screenshot(str(path))
    return path
