"""CORS (``[http.cors]``): off by default, so a page of another origin cannot use the API
through a visitor's browser; when enabled, only the origins named (never ``*``)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from browser import headless_chromium
from rill.server.config import ConfigError, load_config

FOREIGN = "https://example.org"


def test_by_default_no_origin_is_allowed(anonymous):
    preflight = anonymous.options("/users/login", headers={
        "Origin": FOREIGN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert "access-control-allow-origin" not in preflight.headers
    simple = anonymous.get("/ping", headers={"Origin": FOREIGN})
    assert simple.status_code == 200
    assert "access-control-allow-origin" not in simple.headers


def test_enabled_cors_allows_the_named_origins_only(rill_factory):
    server = rill_factory({"RILL_HTTP_CORS_ENABLED": "true",
                           "RILL_HTTP_CORS_ALLOWED_ORIGINS": "https://good.example",
                           "RILL_HTTP_CORS_ALLOWED_METHODS": "GET,POST"}).start()
    good = httpx.options(f"{server.http_url}/streams", headers={
        "Origin": "https://good.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,authorization"})
    assert good.status_code == 200
    assert good.headers["access-control-allow-origin"] == "https://good.example"
    assert "authorization" in good.headers["access-control-allow-headers"].lower()
    denied = httpx.get(f"{server.http_url}/users", headers={"Origin": "https://good.example"})
    assert denied.status_code == 401  # errors carry the header too: the page can read why
    assert denied.headers["access-control-allow-origin"] == "https://good.example"
    bad = httpx.options(f"{server.http_url}/streams", headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "GET"})
    assert bad.status_code == 400 and "access-control-allow-origin" not in bad.headers


@pytest.mark.parametrize("origins, message", [
    ("", "name the origins allowed"),
    ("*", "'\\*' is refused"),
    ("https://a.example, *", "'\\*' is refused"),
])
def test_enabled_cors_needs_named_origins(origins, message):
    environ = {"RILL_HTTP_CORS_ENABLED": "true", "RILL_HTTP_CORS_ALLOWED_ORIGINS": origins}
    with pytest.raises(ConfigError, match=f"http.cors.allowed_origins: {message}"):
        load_config(environ=environ)


# -- a real browser on a page of another origin --------------------------------------------

_PAGE = """<!doctype html><title>elsewhere</title><script>
async function attempt(base) {
  try {
    const login = await fetch(base + "/users/login", {method: "POST",
      headers: {"content-type": "application/json"},
      body: JSON.stringify({username: "iggy", password: "iggy"})});
    const token = (await login.json()).access_token.token;
    const users = await fetch(base + "/users", {headers: {authorization: "Bearer " + token}});
    return "read " + (await users.json()).length + " users";
  } catch (error) { return "blocked: " + error; }
}
</script>"""


@contextmanager
def foreign_site() -> Iterator[str]:
    """A page served from another origin (another port of 127.0.0.1)."""
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = _PAGE.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}"
    finally:
        site.shutdown()
        site.server_close()


def _attempt_from(origin_url: str, api_url: str) -> str:
    with headless_chromium() as browser:
        browser.get(origin_url + "/")
        browser.set_script_timeout(30)
        return browser.execute_async_script(
            "attempt(arguments[0]).then(arguments[arguments.length - 1]);", api_url)


def test_a_page_of_another_origin_cannot_log_in_and_read(rill_factory):
    with foreign_site() as origin:
        server = rill_factory().start()
        assert _attempt_from(origin, server.http_url).startswith("blocked: TypeError")
        # the same page reads once its origin is allowed: the browser is what stopped it above
        allowed = rill_factory({"RILL_HTTP_CORS_ENABLED": "true",
                                "RILL_HTTP_CORS_ALLOWED_ORIGINS": origin}).start()
        assert _attempt_from(origin, allowed.http_url) == "read 1 users"
