"""``/docs`` renders the API's operations in a real headless Chromium with no internet: every
asset the page loads comes from this server."""

from __future__ import annotations

from urllib.parse import urlsplit

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from browser import headless_chromium


def test_docs_renders_the_operations_from_local_assets(http_server) -> None:
    with headless_chromium() as browser:
        browser.get(http_server.http_url + "/docs")
        WebDriverWait(browser, 30).until(
            lambda b: len(b.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")) > 20)
        paths = {element.text.replace("\u200b", "")
                 for element in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
        loaded = browser.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)")
        errors = browser.execute_script(
            "return document.querySelectorAll('.errors-wrapper, .loading-container .errors').length")
    assert {"/streams", "/users/login", "/streams/{stream_id}/topics"} <= paths
    assert errors == 0
    origin = urlsplit(http_server.http_url).netloc
    assert loaded and all(urlsplit(url).netloc == origin for url in loaded), loaded


def test_docs_assets_are_public_and_only_the_named_files(anonymous) -> None:
    assert anonymous.get("/docs/assets/swagger-ui-bundle.js").status_code == 200
    assert anonymous.get("/docs/assets/swagger-ui.css").headers["content-type"].startswith("text/css")
    assert anonymous.get("/docs/assets/__init__.py").status_code == 404
    assert anonymous.get("/docs/assets/..%2Fcore.py").status_code == 404
