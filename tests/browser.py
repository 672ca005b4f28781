"""Debian's chromium, headless, driven by Selenium through Debian's chromedriver: for tests of
pages a person looks at (``/docs``, the bench report).

``headless_chromium(width, height)`` yields a WebDriver with a window of that size. The flags
keep Chromium off the network (no background fetches, no component updates) and give it a fresh
profile; ``--no-sandbox`` because the tests may run as root. Selenium is given the driver's
path, so it never downloads one.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@contextmanager
def headless_chromium(width: int = 1280, height: int = 800) -> Iterator[webdriver.Chrome]:
    assert shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER), (
        "Debian's chromium and chromium-driver are needed: ./run test installs them")
    with tempfile.TemporaryDirectory(prefix="rill-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                     f"--user-data-dir={profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        try:
            driver.set_window_size(width, height)
            yield driver
        finally:
            driver.quit()
