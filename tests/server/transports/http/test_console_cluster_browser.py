"""The web console's Cluster page (console/cluster.js) in a real headless Chromium against an
in-process server: standalone it says so; as a node of a hand-set cluster view it shows the
members (controller and this node marked), the counters, and per partition the leader, epoch,
replicas, ISR, offline replicas and the follower lag (on the partitions it leads). A
screenshot goes to test-artifacts/console/cluster.png."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from http_helpers import bearer
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from browser import headless_chromium
from cluster_servers import ClusterServer, StatusView, create_topic
from rill.server.core.cluster_view import NodeInfo

ARTIFACTS = Path(__file__).resolve().parents[4] / "test-artifacts" / "console"
WAIT = 30


@pytest.fixture
def node(tmp_path):
    server = ClusterServer(tmp_path / "data", 1).start()
    yield server
    server.stop()


@pytest.fixture
def browser():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with headless_chromium(1280, 800) as driver:
        yield driver


def wait(browser, condition, message: str = ""):
    return WebDriverWait(browser, WAIT, ignored_exceptions=(StaleElementReferenceException,)).until(
        condition, message)


def text_of(browser, selector: str) -> str:
    return wait(browser, lambda b: next((e.text for e in b.find_elements(By.CSS_SELECTOR, selector)
                                         if e.is_displayed() and e.text), False),
                f"{selector} never showed")


def open_cluster_page(browser, node, username: str = "iggy", password: str = "iggy") -> None:
    browser.get(f"{node.http_url}/console#/overview")
    wait(browser, lambda b: b.find_element(By.ID, "login-username").is_displayed())
    browser.find_element(By.ID, "login-username").send_keys(username)
    browser.find_element(By.ID, "login-password").send_keys(password + Keys.ENTER)
    wait(browser, lambda b: b.find_element(By.ID, "who-name").text == f"Logged in as {username}")
    browser.find_element(By.CSS_SELECTOR, '#nav a[data-view="cluster"]').click()
    wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, "#view h1").text == "Cluster")


def cells(browser, caption: str) -> list[list[str]]:
    table = wait(browser, lambda b: next(
        (t for t in b.find_elements(By.TAG_NAME, "table")
         if t.find_element(By.TAG_NAME, "caption").text == caption), False), caption)
    return [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
            for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")]


def test_a_standalone_server_says_it_is_no_member(browser, node):
    open_cluster_page(browser, node)
    assert "runs standalone" in text_of(browser, "#standalone")


def test_a_user_without_the_server_read_permission_is_told_what_it_needs(browser, node):
    root = bearer(node.http_url)
    made = httpx.post(f"{node.http_url}/users", headers=root, json={
        "username": "reader", "password": "secret-1", "status": "active",
        "permissions": {"global": {"read_streams": True}}})
    assert made.status_code in (200, 201), made.text
    open_cluster_page(browser, node, "reader", "secret-1")
    assert "needs the read_servers" in text_of(browser, "#no-permission")
    assert not browser.find_elements(By.ID, "status") or not browser.find_element(
        By.ID, "status").is_displayed()  # no 403 said: the route was not called


def test_the_cluster_page_shows_members_and_partitions_with_leader_epoch_isr_and_lag(browser, node):
    create_topic(node, "orders", "eu", 2)
    view = node.join([node.node_info(),
                      NodeInfo(2, {"http": ("127.0.0.1", 9), "kafka": ("127.0.0.1", 19)})],
                     controller_id=2, name="prod", view=StatusView)
    node.place("orders", "eu", 1, 1, 4, (1, 2, 3), (1, 2))
    node.place("orders", "eu", 2, 2, 7, (2, 1))

    def lag_and_counters() -> None:
        view.followers[(1, 1, 1)] = [{"node_id": 2, "fetch_offset": 10, "lag_messages": 5,
                                      "lag_seconds": 1.5}]
        view.counters.update(under_replicated_partitions=1, isr_shrinks=2)

    node.call(lag_and_counters)
    open_cluster_page(browser, node)
    facts = text_of(browser, "#cluster-facts")
    for line in ("Cluster\nprod", "This node\n1", "Controller\nnode 2", "Live members\n2",
                 "Under-replicated partitions\n1", "ISR shrinks / expands\n2 / 0"):
        assert line in facts, facts
    members = cells(browser, "Live members")
    assert [row[0] for row in members] == ["1 (this node)", "2 (controller)"]
    assert members[0][1] == ", ".join(f"{name} {node.endpoint(listener)}" for name, listener in (
        ("kafka", "kafka"), ("tank", "tank"), ("iggy_tcp", "tcp"), ("http", "http")))
    assert members[1][1] == "http 127.0.0.1:9, kafka 127.0.0.1:19"
    assert cells(browser, "Partitions by leader") == [
        ["orders / eu / 1", "1", "4", "1, 2, 3", "1, 2", "3", "node 2: 5 messages, 1.5 s"],
        ["orders / eu / 2", "2", "7", "2, 1", "2, 1", "none", "known on node 2, its leader"],
    ]
    browser.save_screenshot(str(ARTIFACTS / "cluster.png"))
    browser.set_window_size(420, 800)  # a phone: the tables scroll in their own box
    browser.refresh()
    text_of(browser, "#cluster-facts")
    overflow = browser.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"{overflow} px of sideways scrolling"
    browser.save_screenshot(str(ARTIFACTS / "narrow-cluster.png"))
    severe = [entry["message"] for entry in browser.get_log("browser")
              if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]]
    assert severe == []
