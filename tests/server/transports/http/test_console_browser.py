"""The web console in a real headless Chromium against a real server: log in (password, token,
wrong password), the overview's figures and live chart, streams and topics created and deleted
from the page (with the confirmation naming what is lost), messages browsed as text, JSON and
hex, a test message sent, live messages followed while a TCP client sends, a read-only user's
view, consumers' lag moving as a group commits (Kafka groups beside Iggy's), users and tokens,
and no horizontal scrolling at a narrow width. One server and one browser for the module;
screenshots of every view go to test-artifacts/console/ at the repository's root."""

from __future__ import annotations

import base64
import struct
import threading
import time
from pathlib import Path

import httpx
import pytest
from http_helpers import assigned_kafka_member, bearer, start_with_kafka, unique
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from browser import headless_chromium
from rill.client import Client
from rill.protocol.iggy.primitives import Consumer

ARTIFACTS = Path(__file__).resolve().parents[4] / "test-artifacts" / "console"
WAIT = 30  # seconds: the most anything that must appear may take


@pytest.fixture(scope="module")
def http_server(tmp_path_factory):
    """This module's server: the HTTP tests' one, with the Kafka listener on (Consumers view)."""
    server = start_with_kafka(tmp_path_factory.mktemp("console") / "data")
    yield server
    server.kill()


@pytest.fixture(scope="module")
def browser():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with headless_chromium(1280, 800) as driver:
        yield driver


@pytest.fixture(scope="module")
def root(http_server):
    with httpx.Client(base_url=http_server.http_url, headers=bearer(http_server.http_url),
                      timeout=WAIT) as client:
        yield client


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def wait(browser, condition, message: str = ""):
    # (the views redraw: an element read a moment ago may be gone; the wait then tries again)
    return WebDriverWait(browser, WAIT, ignored_exceptions=(StaleElementReferenceException,)).until(
        condition, message)


def shot(browser, name: str) -> None:
    browser.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def find(browser, selector: str):
    return browser.find_element(By.CSS_SELECTOR, selector)


def visible(browser, selector: str):
    return wait(browser, lambda b: next((e for e in b.find_elements(By.CSS_SELECTOR, selector)
                                         if e.is_displayed()), False), f"{selector} never showed")


def button(browser, text: str):
    """The displayed button whose text is ``text``."""
    return wait(browser, lambda b: next((e for e in b.find_elements(By.TAG_NAME, "button")
                                         if e.is_displayed() and e.text == text), False),
                f"no button {text!r}")


def status_text(browser) -> str:
    return visible(browser, "#status").text


def go(browser, http_server, fragment: str) -> None:
    browser.get(f"{http_server.http_url}/console#{fragment}")


def log_out(browser, http_server) -> None:
    go(browser, http_server, "/overview")
    browser.execute_script("sessionStorage.clear()")
    browser.refresh()
    visible(browser, "#login-username")


def log_in(browser, http_server, username: str = "iggy", password: str = "iggy") -> None:
    log_out(browser, http_server)
    find(browser, "#login-username").send_keys(username)
    find(browser, "#login-password").send_keys(password + Keys.ENTER)
    wait(browser, lambda b: b.find_element(By.ID, "who-name").text == f"Logged in as {username}")


def fill(form, label: str, text: str) -> None:
    field = form.find_element(By.XPATH, f".//label[normalize-space()={label!r}]/following-sibling::*[1]")
    field.clear()
    field.send_keys(text)


def form(browser, name: str):
    return visible(browser, f'form[aria-label="{name}"]')


def make_topic(root: httpx.Client, partitions: int = 1) -> tuple[dict, str]:
    stream = root.post("/streams", json={"name": unique("console")}).json()
    topic = root.post(f"/streams/{stream['id']}/topics",
                      json={"name": "orders", "partitions_count": partitions})
    assert topic.status_code == 200, topic.text
    return stream, "orders"


def send(root: httpx.Client, stream: dict, topic: str, messages: list[dict], partition: int = 1) -> None:
    answer = root.post(f"/streams/{stream['id']}/topics/{topic}/messages", json={
        "partitioning": {"kind": "partition_id", "value": b64(struct.pack("<I", partition))},
        "messages": messages})
    assert answer.status_code == 201, answer.text


def rows(browser) -> list:
    """The message rows of the table, in the order shown."""
    return browser.find_elements(By.CSS_SELECTOR, "#results tr.message")


def offsets(browser) -> list[str]:
    return [row.get_attribute("data-offset") for row in rows(browser)]


def expand(browser, row):
    """Opens a message row (its button); the detail row below it."""
    toggle = row.find_element(By.CSS_SELECTOR, "button.expand")
    if toggle.get_attribute("aria-expanded") != "true":
        toggle.click()
    return find(browser, f"#{toggle.get_attribute('aria-controls')}")


def payload_of(browser, row) -> str:
    return expand(browser, row).find_element(By.CSS_SELECTOR, "pre.payload").text


def previews(browser) -> list[str]:
    return [row.find_element(By.CSS_SELECTOR, "td.preview").text for row in rows(browser)]


# -- logging in ---------------------------------------------------------------------------------


def test_a_wrong_password_shows_an_error_and_nothing_else(browser, http_server):
    log_out(browser, http_server)
    find(browser, "#login-username").send_keys("iggy")
    find(browser, "#login-password").send_keys("wrong password")
    find(browser, "#login-form button[type=submit]").click()
    error = visible(browser, "#login-error")
    assert error.text.startswith("Login failed:") and "invalid" in error.text.lower()
    assert not find(browser, "#nav").is_displayed()
    assert browser.execute_script("return sessionStorage.length") == 0
    shot(browser, "login-error")


def test_logging_in_by_keyboard_shows_the_overview_and_logging_out_ends_it(browser, http_server):
    log_out(browser, http_server)
    username = find(browser, "#login-username")
    assert browser.switch_to.active_element == username  # focus starts in the form
    username.send_keys("iggy" + Keys.TAB)
    browser.switch_to.active_element.send_keys("iggy" + Keys.ENTER)  # Tab to the password, Enter
    wait(browser, lambda b: b.find_element(By.ID, "who-name").text == "Logged in as iggy")
    wait(browser, lambda b: b.switch_to.active_element.text == "Overview")  # focus on the new view
    streams = browser.find_element(By.CSS_SELECTOR, '#nav a[href="#/streams"]')
    streams.send_keys(Keys.ENTER)  # the sections are links: the keyboard reaches them
    wait(browser, lambda b: b.switch_to.active_element.text == "Streams"
         and b.switch_to.active_element.tag_name == "h1")
    token = browser.execute_script("return sessionStorage.getItem('rill.console.token')")
    assert httpx.get(f"{http_server.http_url}/stats", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    button(browser, "Log out").click()
    visible(browser, "#login-username")
    assert "Logged out" in status_text(browser)
    assert httpx.get(f"{http_server.http_url}/stats", headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_logging_in_with_a_personal_access_token(browser, http_server, root):
    created = root.post("/personal-access-tokens", json={"name": unique("console"), "expiry": 0})
    assert created.status_code == 200, created.text
    log_out(browser, http_server)
    find(browser, 'input[name="method"][value="token"]').click()
    assert not find(browser, "#login-username").is_displayed()
    visible(browser, "#login-token").send_keys(created.json()["token"] + Keys.ENTER)
    wait(browser, lambda b: b.find_element(By.ID, "who-name").text == "Logged in as iggy")


# -- overview -----------------------------------------------------------------------------------------


def test_the_overview_shows_the_server_and_charts_live_throughput(browser, http_server, root):
    stream, topic = make_topic(root)
    log_in(browser, http_server)
    facts = visible(browser, "#server-facts")
    assert "0.1.0" in facts.text or root.get("/server").json()["version"] in facts.text
    assert "fsync" in facts.text and "every 1 s" in facts.text
    host, port = http_server.http_address
    listeners = visible(browser, "table").text
    assert f"http {host}:{port}" in listeners and f"tcp {http_server.address}" in listeners
    sending = threading.Event()

    def traffic() -> None:  # until the chart shows it
        while not sending.is_set():
            send(root, stream, topic, [{"payload": b64(b"tick")}] * 20)
            sending.wait(0.2)

    thread = threading.Thread(target=traffic, daemon=True)
    thread.start()
    try:
        figure = browser.find_element(By.CSS_SELECTOR, ".chart-card output")
        wait(browser, lambda b: figure.text.endswith("msg/s") and figure.text != "0 msg/s",
             "the messages-in figure never moved")
    finally:
        sending.set()
        thread.join()
    assert find(browser, ".chart-card .line").get_attribute("d").startswith("M")
    shot(browser, "overview")


def axis_labels(chart, axis: str) -> list[str]:
    return [label.text for label in chart.find_elements(By.CSS_SELECTOR, f".{axis}-axis text")]


def test_the_overview_charts_have_axes_units_and_a_five_minute_window(browser, http_server, root):
    """Idle or busy, each chart has a y axis from 0 in its unit (SI prefixes) and an x axis of
    clock times across the last five minutes; an idle figure reads 0, not a dash."""
    log_in(browser, http_server)
    visible(browser, "#server-facts")
    charts = {c.find_element(By.TAG_NAME, "figcaption").text.split(":")[0]: c
              for c in browser.find_elements(By.CSS_SELECTOR, "#charts .chart-card")}
    assert set(charts) == {"Messages in", "Messages out", "Bytes in", "Bytes out"}
    units = {"Messages in": "msg/s", "Messages out": "msg/s", "Bytes in": "B/s", "Bytes out": "B/s"}
    for name, chart in charts.items():
        assert "last 5 min" in chart.find_element(By.TAG_NAME, "figcaption").text
        ticks = axis_labels(chart, "y")
        assert len(ticks) >= 3 and ticks[0] == f"0 {units[name]}", (name, ticks)
        assert all(t.endswith(units[name]) for t in ticks), ticks
        times = axis_labels(chart, "x")  # whole minutes, oldest first, spanning the window
        assert len(times) in (5, 6) and all(len(t) == 5 and t[2] == ":" for t in times), times
        minutes = [int(t[:2]) * 60 + int(t[3:]) for t in times]
        assert [(m - minutes[0]) % 1440 for m in minutes] == list(range(len(times)))
    # the quietest: no message read here, so "Messages out" idles at 0 with its axes
    wait(browser, lambda b: charts["Messages out"].find_element(By.TAG_NAME, "output").text == "0 msg/s")
    stream, topic = make_topic(root)
    send(root, stream, topic, [{"payload": b64(b"x" * 2000)}] * 500)  # 1 MB in one sample
    wait(browser, lambda b: any(t.endswith(" kB/s") or t.endswith(" MB/s") for t in axis_labels(charts["Bytes in"], "y")),
         "no SI prefix on the bytes axis")
    browser.execute_script("arguments[0].scrollIntoView()", find(browser, "#throughput-title"))
    shot(browser, "overview-charts")


# -- streams and topics ---------------------------------------------------------------------------------


def test_create_a_stream_and_a_topic_then_refuse_a_bad_setting(browser, http_server, root):
    log_in(browser, http_server)
    go(browser, http_server, "/streams")
    name = unique("made-in-console")
    fill(form(browser, "Create a stream"), "Name", name)
    button(browser, "Create stream").click()
    wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, "#view h1").text == f"Stream {name}")
    create = form(browser, "Create a topic")
    fill(create, "Name", "events")
    fill(create, "Partitions", "2")
    fill(create, "Message expiry", "7 d")
    fill(create, "Max size", "1 GB")
    button(browser, "Create topic").click()
    wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, "#view h1").text == "Topic events")
    summary = find(browser, ".summary").text
    assert "2 partitions" in summary and "retention 7 d" in summary and "max size 1.0 GB" in summary
    topic = root.get(f"/streams/{name}/topics/events").json()
    assert topic["partitions_count"] == 2 and topic["message_expiry"] == 7 * 86400 * 10**6
    assert topic["max_topic_size"] == 10**9
    shot(browser, "topic")

    edit = form(browser, "Edit the topic")
    fill(edit, "Message expiry", "soon")
    button(browser, "Save").click()
    wait(browser, lambda b: b.find_element(By.ID, "status").text.startswith('Message expiry "soon": use e.g.'))
    assert root.get(f"/streams/{name}/topics/events").json()["message_expiry"] == 7 * 86400 * 10**6
    go(browser, http_server, "/streams")
    wait(browser, lambda b: name in b.find_element(By.TAG_NAME, "table").text)
    shot(browser, "streams")


def test_deleting_a_topic_asks_first_naming_what_will_be_lost(browser, http_server, root):
    stream, topic = make_topic(root, partitions=2)
    send(root, stream, topic, [{"payload": b64(b"x" * 100)}] * 3)
    log_in(browser, http_server)
    go(browser, http_server, f"/streams/{stream['id']}")
    delete = visible(browser, f'button[aria-label="Delete topic {topic}"]')
    delete.click()
    dialog = visible(browser, "#confirm")
    text = find(browser, "#confirm-text").text
    size = root.get(f"/streams/{stream['id']}/topics/{topic}").json()["size"]
    assert text == f"Delete topic '{topic}' and its 2 partitions, 3 messages, {size}?", text
    shot(browser, "confirm-delete")
    button(browser, "Cancel").click()
    wait(browser, lambda b: not dialog.is_displayed())
    assert root.get(f"/streams/{stream['id']}/topics/{topic}").status_code == 200  # nothing changed
    delete.click()
    visible(browser, "#confirm")
    find(browser, "#confirm-ok").click()
    wait(browser, lambda b: "deleted" in b.find_element(By.ID, "status").text)
    assert root.get(f"/streams/{stream['id']}/topics/{topic}").status_code == 404


# -- messages ---------------------------------------------------------------------------------------------


def test_browse_messages_as_a_table_whose_rows_expand_to_text_json_and_hex(browser, http_server, root):
    stream, topic = make_topic(root)
    send(root, stream, topic, [
        {"payload": b64(b"hello world")},
        {"payload": b64(b'{"order": 42, "items": ["tea", "milk"]}'),
         "headers": {"rill.key": {"kind": "raw", "value": b64(b"customer-7")},
                     "source": {"kind": "string", "value": b64(b"shop")}}},
        {"payload": b64(b"\x00\xff\x10binary")},
    ])
    log_in(browser, http_server)
    go(browser, http_server, f"/messages?stream={stream['id']}&topic=1&partition=1")
    wait(browser, lambda b: len(rows(b)) == 3)
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#results thead th")][1:]
    assert headers == ["Offset", "Partition", "Time", "Key", "Value", "Size"]
    assert offsets(browser) == ["2", "1", "0"]  # newest first
    newest, json_row, text_row = rows(browser)
    cells = [td.text for td in json_row.find_elements(By.TAG_NAME, "td")][1:]
    assert cells[0] == "1" and cells[1] == "1 (Kafka 0)" and cells[3] == "customer-7"
    assert cells[4] == '{"order":42,"items":["tea","milk"]}' and cells[5] == "39 B"
    assert text_row.find_element(By.TAG_NAME, "time").get_attribute("title").endswith(" UTC")
    assert previews(browser)[0] == "00 ff 10 62 69 6e 61 72 79"  # not text: hex
    assert not browser.find_elements(By.CSS_SELECTOR, "#results tr.detail:not([hidden])")  # closed

    json_row.find_element(By.CSS_SELECTOR, "td.preview").click()  # a click on the row opens it
    detail = wait(browser, lambda b: next((d for d in b.find_elements(By.CSS_SELECTOR, "#results tr.detail")
                                           if d.is_displayed()), False))
    assert detail.find_element(By.TAG_NAME, "pre").text == (
        '{\n  "order": 42,\n  "items": [\n    "tea",\n    "milk"\n  ]\n}')
    assert detail.find_element(By.CSS_SELECTOR, ".key").text == "customer-7"
    assert "source" in detail.text and "shop" in detail.text and "shown as JSON" in detail.text
    assert "00 ff 10 62 69 6e" in payload_of(browser, newest)
    assert payload_of(browser, text_row) == "hello world"
    shot(browser, "messages")
    json_row.find_element(By.CSS_SELECTOR, "button.expand").click()  # closes again
    wait(browser, lambda b: not detail.is_displayed())

    browse = form(browser, "Browse")
    Select(browse.find_element(By.NAME, "view")).select_by_visible_text("Hex")
    wait(browser, lambda b: "68 65 6c 6c 6f 20 77 6f" in payload_of(b, rows(b)[2]))
    Select(browse.find_element(By.NAME, "view")).select_by_visible_text("Auto")
    Select(browse.find_element(By.NAME, "order")).select_by_visible_text("Oldest first")
    Select(browse.find_element(By.NAME, "from")).select_by_visible_text("an offset")
    fill(browse, "Offset", "1")
    fill(browse, "How many", "1")
    button(browser, "Show messages").click()
    wait(browser, lambda b: offsets(b) == ["1"])
    fill(browse, "How many", "5")
    fill(browse, "Offset", "0")
    button(browser, "Show messages").click()
    wait(browser, lambda b: offsets(b) == ["0", "1", "2"])
    fill(browse, "Filter by key or header", "customer")
    wait(browser, lambda b: offsets(b) == ["1"])


def test_all_partitions_merged_by_time_with_kafka_numbers(browser, http_server, root):
    stream, topic = make_topic(root, partitions=2)
    for n in range(6):  # alternating partitions, one request each: times increase
        send(root, stream, topic, [{"payload": b64(b"m%d" % n)}], partition=1 + n % 2)
    log_in(browser, http_server)
    go(browser, http_server, f"/messages?stream={stream['id']}&topic={topic}")  # no partition: all
    wait(browser, lambda b: len(rows(b)) == 6)
    picker = Select(form(browser, "Partition").find_element(By.NAME, "partition"))
    assert picker.first_selected_option.text == "All 2 partitions"
    assert [o.text for o in picker.options][1:] == ["1 (Kafka 0) · 3 messages", "2 (Kafka 1) · 3 messages"]
    assert previews(browser) == ["m5", "m4", "m3", "m2", "m1", "m0"]  # newest first, across partitions
    parts = [row.find_element(By.CSS_SELECTOR, "td.partition").text for row in rows(browser)]
    assert parts == ["2 (Kafka 1)", "1 (Kafka 0)"] * 3
    assert offsets(browser) == ["2", "2", "1", "1", "0", "0"]
    assert "merged by time" in find(browser, "#results-summary").text
    shot(browser, "messages-all-partitions")
    browse = form(browser, "Browse")
    Select(browse.find_element(By.NAME, "order")).select_by_visible_text("Oldest first")
    fill(browse, "How many", "3")
    button(browser, "Show messages").click()
    wait(browser, lambda b: previews(b) == ["m0", "m1", "m2"])
    follow = button(browser, "Follow live")  # every partition's new messages, newest first
    follow.click()
    wait(browser, lambda b: b.find_element(By.ID, "follow-state").text.startswith("Following all 2 partitions"))
    with Client(http_server.address) as client:
        client.login_user("iggy", "iggy")
        client.send_messages(stream["id"], topic, [b"live in 2"], partitioning=2)
        wait(browser, lambda b: previews(b) == ["live in 2"])
        client.send_messages(stream["id"], topic, [b"live in 1"], partitioning=1)
        wait(browser, lambda b: previews(b) == ["live in 1", "live in 2"])
    assert [row.get_attribute("data-partition") for row in rows(browser)] == ["1", "2"]
    follow.click()
    wait(browser, lambda b: follow.get_attribute("aria-pressed") == "false")
    Select(form(browser, "Partition").find_element(By.NAME, "partition")).select_by_value("2")
    wait(browser, lambda b: previews(b) == ["live in 2", "m5", "m3", "m1"])


def test_search_a_range_by_key_or_header_reads_past_one_page(browser, http_server, root):
    stream, topic = make_topic(root)
    def message(number: int) -> dict:
        found = {"payload": b64(b"m%d" % number)}
        if number in (5, 1700, 2400):
            found["headers"] = {"rill.key": {"kind": "raw", "value": b64(b"vip-%d" % number)}}
        if number == 2100:
            found["headers"] = {"trace": {"kind": "string", "value": b64(b"vip-trace")}}
        return found
    for start in range(0, 2500, 500):  # 2,500 messages: a search reads three polls of 1,000
        send(root, stream, topic, [message(n) for n in range(start, start + 500)])
    log_in(browser, http_server)
    go(browser, http_server, f"/messages?stream={stream['id']}&topic=1&partition=1")
    wait(browser, lambda b: len(rows(b)) == 20)
    search = form(browser, "Search a range")
    fill(search, "From offset", "10")
    fill(search, "To offset", "2499")
    fill(search, "Key or header contains", "VIP")
    button(browser, "Search").click()
    wait(browser, lambda b: "3 matches" in find(b, "#search-state").text)
    assert offsets(browser) == ["1700", "2100", "2400"]
    assert "vip-1700" in rows(browser)[0].text and "vip-trace" in expand(browser, rows(browser)[1]).text
    fill(search, "To offset", "5")
    button(browser, "Search").click()
    wait(browser, lambda b: "From at most To" in status_text(b))


def test_browse_by_time_in_either_order(browser, http_server, root):
    stream, topic = make_topic(root)
    send(root, stream, topic, [{"payload": b64(b"earlier")}])
    time.sleep(1.2)  # the time picker has whole seconds: the two messages need different ones
    send(root, stream, topic, [{"payload": b64(b"later")}])
    polled = root.get(f"/streams/{stream['id']}/topics/{topic}/messages",
                      params={"partition_id": 1, "kind": "offset", "value": 0, "count": 2}).json()
    later_us = polled["messages"][1]["timestamp"]
    log_in(browser, http_server)
    go(browser, http_server, f"/messages?stream={stream['id']}&topic=1&partition=1")
    wait(browser, lambda b: len(rows(b)) == 2)
    browse = form(browser, "Browse")
    Select(browse.find_element(By.NAME, "from")).select_by_visible_text("a time")
    time_input = visible(browser, 'input[name="time"]')
    # the later message's second, in the browser's local time (what a person would type)
    browser.execute_script("""
        const d = new Date(Math.floor(arguments[1] / 1e6) * 1000);
        const p = (n) => String(n).padStart(2, "0");
        arguments[0].value = `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
    """, time_input, later_us)
    Select(browse.find_element(By.NAME, "order")).select_by_visible_text("Oldest first")
    button(browser, "Show messages").click()
    wait(browser, lambda b: previews(b) == ["later"])
    Select(browse.find_element(By.NAME, "order")).select_by_visible_text("Newest first")
    button(browser, "Show messages").click()
    wait(browser, lambda b: previews(b) == ["earlier"])


def test_send_a_test_message_from_the_console(browser, http_server, root):
    stream, topic = make_topic(root)
    log_in(browser, http_server)
    go(browser, http_server, f"/messages?stream={stream['id']}&topic=1&partition=1")
    sender = form(browser, "Send a test message")
    fill(sender, "Payload (text)", "sent from the console")
    fill(sender, "Key (optional)", "k-1")
    fill(sender, "Headers (optional)", "trace=abc")
    button(browser, "Send").click()
    wait(browser, lambda b: len(rows(b)) == 1)
    assert previews(browser) == ["sent from the console"]
    assert "k-1" in rows(browser)[0].text and "trace" in expand(browser, rows(browser)[0]).text
    polled = root.get(f"/streams/{stream['id']}/topics/{topic}/messages",
                      params={"partition_id": 1, "kind": "offset", "value": 0, "count": 10}).json()
    [message] = polled["messages"]
    assert base64.b64decode(message["payload"]) == b"sent from the console"
    assert base64.b64decode(message["headers"]["trace"]["value"]) == b"abc"


def test_follow_shows_messages_as_a_client_sends_them(browser, http_server, root):
    stream, topic = make_topic(root)
    send(root, stream, topic, [{"payload": b64(b"before following")}])
    log_in(browser, http_server)
    go(browser, http_server, f"/messages?stream={stream['id']}&topic=1&partition=1")
    wait(browser, lambda b: len(rows(b)) == 1)
    follow = button(browser, "Follow live")
    follow.click()
    wait(browser, lambda b: b.find_element(By.ID, "follow-state").text.startswith("Following partition 1 from offset 1"))
    assert rows(browser) == []
    with Client(http_server.address) as client:
        client.login_user("iggy", "iggy")
        client.send_messages(stream["id"], topic, [b"live one"], partitioning=1)
        wait(browser, lambda b: previews(b) == ["live one"])
        client.send_messages(stream["id"], topic, [b"live two", b"live three"], partitioning=1)
        wait(browser, lambda b: previews(b) == ["live three", "live two", "live one"])
    assert follow.get_attribute("aria-pressed") == "true"
    shot(browser, "follow")
    follow.click()
    wait(browser, lambda b: follow.text == "Follow live" and follow.get_attribute("aria-pressed") == "false")


# -- consumers ----------------------------------------------------------------------------------------------


def lag_of(browser, consumer: str) -> list[str]:
    """The lag cells of ``consumer``'s rows in the lag table, by partition."""
    return [cell.text for cell in browser.find_elements(
        By.XPATH, f"//div[@id='lag']//tr[td[1]={consumer!r}]/td[6]")]


def test_consumers_show_lag_per_partition_moving_as_a_group_commits(browser, http_server, root):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic = unique("shipments")
    bootstrap = "%s:%d" % http_server.kafka_address
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for n in range(10):
        producer.send(topic, value=b"s%d" % n, partition=0)
    producer.flush()
    producer.close()
    kafka_group = KafkaConsumer(bootstrap_servers=bootstrap, group_id="shipping", enable_auto_commit=False)
    kafka_group.commit({TopicPartition(topic, 0): OffsetAndMetadata(4, "", -1)})
    kafka_group.close()
    assert root.post(f"/streams/kafka/topics/{topic}/consumer-groups", json={"name": "workers"}).status_code == 201
    with Client(http_server.address) as member:
        member.login_user("iggy", "iggy")
        member.join_consumer_group("kafka", topic, "workers")
        member.store_consumer_offset("kafka", topic, 3, consumer=Consumer.group("workers"), partition_id=1)
        log_in(browser, http_server)
        go(browser, http_server, f"/consumers?stream=kafka&topic={topic}")
        wait(browser, lambda b: lag_of(b, "workers") == ["6"], "the group's lag never showed")
        assert lag_of(browser, "shipping") == ["6"]  # the Kafka group: 10 - 4
        shipping = find(browser, "#lag").find_element(By.XPATH, ".//tr[td[1]='shipping']/td[3]")
        assert shipping.text == "1 (Kafka 0)"  # rill's partition 1 is Kafka's 0
        position = find(browser, "#lag").find_element(By.XPATH, ".//tr[td[1]='shipping']/td[4]")
        assert position.text == "Reads next 4"  # the wording of every view of a committed offset
        assert "Kafka group" in find(browser, "#lag").text and "Iggy group" in find(browser, "#lag").text
        members = visible(browser, "#groups table").text
        assert "1" in members.splitlines()[-1]  # the member is assigned partition 1
        member.store_consumer_offset("kafka", topic, 9, consumer=Consumer.group("workers"), partition_id=1)
        wait(browser, lambda b: lag_of(b, "workers") == ["0"], "the group's lag never moved")
    reader = assigned_kafka_member(bootstrap, topic, "pickers", "picker-app", WAIT)
    try:
        kafka_members = wait(browser, lambda b: "picker-app" in b.find_element(By.ID, "kafka-groups").text
                             and b.find_element(By.ID, "kafka-groups").text)
        assert "Kafka group pickers: 1 member reading this topic" in kafka_members
        assigned = find(browser, "#kafka-groups").find_element(By.XPATH, ".//tbody/tr[last()]/td[3]")
        assert assigned.text == "0" and "Kafka's numbers" in kafka_members  # the only partition
        shot(browser, "consumers-kafka-members")
    finally:
        reader.close()
    chart = find(browser, '[data-consumer="Iggy group workers"]')
    assert chart.find_element(By.TAG_NAME, "output").text == "0 msg"
    assert axis_labels(chart, "y")[0] == "0 msg" and len(axis_labels(chart, "x")) in (5, 6)
    assert chart.find_element(By.CSS_SELECTOR, ".line").get_attribute("d").count("L") >= 1  # 2+ samples
    shot(browser, "consumers")
    browser.execute_script("arguments[0].scrollIntoView()", find(browser, "#lag-chart-title"))
    shot(browser, "consumers-lag-charts")


def test_a_consumers_link_selects_the_topic_it_names(browser, http_server, root):
    stream = root.post("/streams", json={"name": unique("linked")}).json()
    for name in ("alpha", "beta", "gamma"):
        assert root.post(f"/streams/{stream['id']}/topics", json={"name": name, "partitions_count": 1}).status_code == 200
    log_in(browser, http_server)
    for named, expected in (("beta", "beta"), ("3", "gamma")):  # by name, by ID
        go(browser, http_server, f"/consumers?stream={stream['name']}&topic={named}")
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#lag p, #lag table"))
        picker = Select(form(browser, "Topic").find_element(By.NAME, "topic"))
        assert picker.first_selected_option.text == expected
        assert Select(form(browser, "Topic").find_element(By.NAME, "stream")).first_selected_option.text == stream["name"]
    go(browser, http_server, f"/streams/{stream['id']}/topics/2")  # the topic page's link
    visible(browser, '#view a[href^="#/consumers?"]').click()
    wait(browser, lambda b: Select(b.find_element(By.NAME, "topic")).first_selected_option.text == "beta")
    go(browser, http_server, f"/consumers?stream={stream['id']}&topic=delta")  # no such topic: said
    assert "has no topic delta" in visible(browser, "#view .error").text


# -- permissions and narrow windows -----------------------------------------------------------------------


def test_a_read_only_user_sees_no_buttons_that_would_fail(browser, http_server, root):
    stream, topic = make_topic(root)
    send(root, stream, topic, [{"payload": b64(b"readable")}])
    name = unique("reader")
    created = root.post("/users", json={"username": name, "password": "secret1", "permissions": {
        "global": {"read_streams": True, "read_topics": True, "poll_messages": True}, "streams": None}})
    assert created.status_code == 200, created.text
    log_in(browser, http_server, name, "secret1")
    go(browser, http_server, "/streams")
    wait(browser, lambda b: stream["name"] in b.find_element(By.TAG_NAME, "table").text)
    shot(browser, "read-only-streams")

    def buttons(b) -> set[str]:
        return {e.text for e in b.find_elements(By.CSS_SELECTOR, "#view button:not(.expand)") if e.is_displayed()}

    assert buttons(browser) == set()
    assert not browser.find_elements(By.CSS_SELECTOR, "#view form")
    go(browser, http_server, f"/streams/{stream['id']}")
    wait(browser, lambda b: topic in b.find_element(By.TAG_NAME, "table").text)
    assert buttons(browser) == set() and not browser.find_elements(By.CSS_SELECTOR, "#view form")
    go(browser, http_server, f"/messages?stream={stream['id']}&topic=1&partition=1")
    wait(browser, lambda b: len(rows(b)) == 1)  # reading is allowed
    assert buttons(browser) == {"Show messages", "Search", "Follow live"}  # no "Send"
    assert not browser.find_elements(By.CSS_SELECTOR, 'form[aria-label="Send a test message"]')


def test_narrow_window_has_no_sideways_scrolling(browser, http_server, root):
    stream, topic = make_topic(root)
    send(root, stream, topic, [{"payload": b64(b'{"a_rather_long_field_name": "' + b"v" * 200 + b'"}')}])
    log_in(browser, http_server)
    browser.set_window_size(420, 800)
    try:
        for fragment, name in ((f"/messages?stream={stream['id']}&topic=1&partition=1", "narrow-messages"),
                               ("/overview", "narrow-overview"), (f"/streams/{stream['id']}/topics/1", "narrow-topic"),
                               (f"/consumers?stream={stream['id']}&topic=1", "narrow-consumers"),
                               ("/users", "narrow-users")):
            go(browser, http_server, fragment)
            visible(browser, "#view h1")
            wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#results tr.message, #server-facts, #view table, #lag p"))
            overflow = browser.execute_script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"{fragment}: {overflow} px of sideways scrolling"
            shot(browser, name)
    finally:
        browser.set_window_size(1280, 800)


CLIPPED = """
// The controls on the page whose text does not fit them, or that a scrolling or clipping box
// (or the window) cuts: [what, why] pairs. Text widths are measured in the control's own font;
// a select must fit its widest choice (and its arrow), a button its label, an input its value
// or placeholder.
const ruler = document.createElement("canvas").getContext("2d");
const width = (text, style) => {
  ruler.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  return ruler.measureText(text).width;
};
const found = [];
const selector = "button, select, textarea, input:not([type=radio]):not([type=checkbox]):not([type=hidden])";
for (const el of document.querySelectorAll(selector)) {
  if (!el.getClientRects().length || el.closest("dialog:not([open])")) continue;
  const style = getComputedStyle(el);
  const box = el.getBoundingClientRect();
  const name = `${el.tagName.toLowerCase()} ${el.name || el.id || el.textContent.trim().slice(0, 30)}`;
  const inner = box.width - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)
    - parseFloat(style.borderLeftWidth) - parseFloat(style.borderRightWidth);
  let need = 0;
  if (el.tagName === "SELECT") need = Math.max(0, ...Array.from(el.options, (o) => width(o.text, style))) + 20;
  else if (el.tagName === "BUTTON") need = width(el.textContent.trim(), style);
  else if (el.tagName === "INPUT" && !["number", "datetime-local", "date", "time"].includes(el.type)) need = width(el.value || el.placeholder || "", style);
  if (need > inner + 0.5) found.push([name, `needs ${Math.ceil(need)} px, has ${Math.floor(inner)}`]);
  if (el.scrollWidth > el.clientWidth + 1 && el.tagName !== "TEXTAREA") found.push([name, "its content scrolls"]);
  if (box.left < 0 || box.right > document.documentElement.clientWidth) found.push([name, "outside the window"]);
  for (let up = el.parentElement; up; up = up.parentElement) {
    const s = getComputedStyle(up);
    if (s.overflowX === "visible" && s.overflowY === "visible") continue;
    const area = up.getBoundingClientRect();
    if (box.left < area.left - 0.5 || box.right > area.right + 0.5) found.push([name, `cut by ${up.tagName.toLowerCase()}.${up.className}`]);
  }
}
return found;
"""


@pytest.mark.parametrize("width", [1440, 1280])
def test_no_control_is_clipped_at_desktop_widths(browser, http_server, root, width):
    stream, topic = make_topic(root, partitions=2)
    send(root, stream, topic, [{"payload": b64(b"a message")}] * 3)
    log_in(browser, http_server)
    browser.set_window_size(width, 900)
    try:
        inner = browser.execute_script("return window.innerWidth")
        assert inner == width, inner
        views = {
            "overview": ("/overview", "#server-facts"),
            "streams": ("/streams", "#view table"),
            "stream": (f"/streams/{stream['id']}", "#view table"),
            "topic": (f"/streams/{stream['id']}/topics/1", "#view table"),
            "messages-one": (f"/messages?stream={stream['id']}&topic=1&partition=1", "#results tr.message"),
            "messages-all": (f"/messages?stream={stream['id']}&topic=1&partition=all", "#results tr.message"),
            "consumers": (f"/consumers?stream={stream['id']}&topic=1", "#lag p, #lag table"),
            "users": ("/users", "#view table"),
            "user": ("/users/1", "#view form"),
        }
        for name, (fragment, ready) in views.items():
            go(browser, http_server, fragment)
            wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ready), f"{name} never showed")
            if name.startswith("messages"):  # every control of the browse form shown once
                Select(form(browser, "Browse").find_element(By.NAME, "from")).select_by_visible_text("a time")
            clipped = browser.execute_script(CLIPPED)
            assert clipped == [], f"{name} at {width} px: {clipped}"
            if name.startswith("messages") or name in ("stream", "overview"):
                shot(browser, f"{name}-{width}")
    finally:
        browser.set_window_size(1280, 800)


# -- the record format of a new topic --------------------------------------------------------------------

RECORD_BODIES = r"""
window.topicBodies = [];
const original = window.fetch;
window.fetch = (url, init = {}) => {
  if (init.method === "POST" && /\/topics$/.test(String(url))) window.topicBodies.push(JSON.parse(init.body));
  return original(url, init);
};
"""

TOPIC_AS_KAFKA = r"""
const original = window.fetch;
window.fetch = async (url, init = {}) => {  // a topic's JSON as a server with record formats answers it
  const answer = await original(url, init);
  if ((init.method || "GET") !== "GET" || !/\/streams\/[^/]+\/topics\/[^/?]+$/.test(String(url))) return answer;
  const topic = await answer.json();
  return new Response(JSON.stringify({ ...topic, record_format: "kafka" }), { status: answer.status, headers: answer.headers });
};
"""


def test_create_a_topic_sends_the_record_format_only_when_picked(browser, http_server, root):
    stream = root.post("/streams", json={"name": unique("formats")}).json()
    log_in(browser, http_server)
    go(browser, http_server, f"/streams/{stream['id']}")
    create = form(browser, "Create a topic")
    picker = Select(create.find_element(By.NAME, "record_format"))
    assert [o.text for o in picker.options] == ["Server default", "Iggy", "Kafka"]
    assert picker.first_selected_option.text == "Server default"
    browser.execute_script("arguments[0].scrollIntoView()", create)
    shot(browser, "create-topic-form")
    browser.execute_script(RECORD_BODIES)
    fill(create, "Name", "plain")
    button(browser, "Create topic").click()
    wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, "#view h1").text == "Topic plain")
    go_back = f"#/streams/{stream['id']}"
    browser.execute_script("location.hash = arguments[0]", go_back)  # (no reload: the recorder stays)
    create = form(browser, "Create a topic")
    fill(create, "Name", "kafka-made")
    Select(create.find_element(By.NAME, "record_format")).select_by_visible_text("Kafka")
    button(browser, "Create topic").click()
    wait(browser, lambda b: len(b.execute_script("return window.topicBodies")) == 2)
    plain, kafka = browser.execute_script("return window.topicBodies")
    assert plain["name"] == "plain" and "record_format" not in plain  # the server's default
    assert kafka["name"] == "kafka-made" and kafka["record_format"] == "kafka"


def test_a_topic_shows_the_record_format_its_json_carries(browser, http_server, root):
    stream, topic = make_topic(root)
    log_in(browser, http_server)
    go(browser, http_server, f"/streams/{stream['id']}")
    visible(browser, "#view table")
    browser.execute_script(TOPIC_AS_KAFKA)
    browser.execute_script("location.hash = arguments[0]", f"#/streams/{stream['id']}/topics/1")
    wait(browser, lambda b: "Kafka record format" in b.find_element(By.CSS_SELECTOR, "#view .summary").text)
    shot(browser, "topic-record-format")


# -- users and tokens ----------------------------------------------------------------------------------


def test_create_change_and_delete_a_user(browser, http_server, root):
    stream, _ = make_topic(root)
    log_in(browser, http_server)
    go(browser, http_server, "/users")
    name = unique("operator")
    create = form(browser, "Create a user")
    fill(create, "Username", name)
    fill(create, "Password", "secret1")
    create.find_element(By.XPATH, ".//label[normalize-space()='Read streams']/input").click()
    button(browser, "Create user").click()
    wait(browser, lambda b: name in b.find_element(By.CSS_SELECTOR, "#view table").text)
    user = root.get(f"/users/{name}").json()
    assert user["permissions"]["global"]["read_streams"] is True
    assert user["permissions"]["global"]["manage_streams"] is False
    shot(browser, "users")

    visible(browser, f'a[aria-label="Edit permissions of {name}"]').click()
    change = form(browser, "Change permissions")
    change.find_element(By.XPATH, ".//label[normalize-space()='Send messages']/input").click()
    change.find_element(By.CSS_SELECTOR, f'input[aria-label="Poll on stream {stream["name"]}"]').click()
    button(browser, "Save permissions").click()
    wait(browser, lambda b: "saved" in b.find_element(By.ID, "status").text)
    permissions = root.get(f"/users/{name}").json()["permissions"]
    flags = permissions["global"]
    assert flags["read_streams"] is True and flags["send_messages"] is True
    on_stream = permissions["streams"][str(stream["id"])]
    assert on_stream["poll_messages"] is True and on_stream["manage_stream"] is False

    visible(browser, f'button[aria-label="Delete user {name}"]').click()
    assert find(browser, "#confirm-text").text.startswith(f"Delete user '{name}'?")
    find(browser, "#confirm-ok").click()
    wait(browser, lambda b: "deleted" in b.find_element(By.ID, "status").text)
    assert root.get(f"/users/{name}").status_code == 404


def test_a_personal_access_token_is_shown_once_and_logs_in(browser, http_server, root):
    log_in(browser, http_server)
    go(browser, http_server, "/users")
    name = unique("ci")
    create = form(browser, "Create a personal access token")
    fill(create, "Name", name)
    fill(create, "Expires after", "30 d")
    button(browser, "Create token").click()
    token = visible(browser, "#new-token code").text
    assert len(token) > 20
    assert name in find(browser, "#view").text
    login = httpx.post(f"{http_server.http_url}/personal-access-tokens/login", json={"token": token})
    assert login.status_code == 200 and login.json()["user_id"] == 1
    shot(browser, "token-created")
    go(browser, http_server, "/overview")
    go(browser, http_server, "/users")
    wait(browser, lambda b: name in b.find_element(By.ID, "view").text)
    assert token not in find(browser, "#view").text  # shown once


def test_the_pages_ran_without_script_errors_or_policy_violations(browser):
    """Last in the module: what the browser logged while the tests above used the console
    (a script error or a Content-Security-Policy violation is logged as SEVERE; refused API
    calls -- the wrong password's 401 -- are logged as failed loads, which are expected)."""
    severe = [entry["message"] for entry in browser.get_log("browser")
              if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]]
    assert severe == []


def test_newest_first_fills_the_page_across_offset_holes(browser, tmp_path):
    """TANK's explicit sequence numbers leave holes (records at offsets 0-4, then 1000-1004):
    the newest-first page shows the newest records, not only those in the last offsets."""
    import asyncio

    from rill.client.tank import TankClient
    from server_process import RillProcess

    server = RillProcess(tmp_path / "data", env={
        "RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "127.0.0.1:0",
        "RILL_QUIC_ENABLED": "false"}).start()
    try:
        async def write() -> None:
            async with TankClient(*server.tank_address) as client:
                assert await client.create_topic("sparse", 1) == 0
                await client.produce("sparse", 0, [b"old%d" % n for n in range(5)],
                                     seqs=[1, 2, 3, 4, 5])
                await client.produce("sparse", 0, [b"new%d" % n for n in range(5)],
                                     seqs=[1001, 1002, 1003, 1004, 1005])

        asyncio.run(write())
        with Client(server.address) as client:
            client.login_user("iggy", "iggy")
            stream = client.get_streams()[0].id
        log_in(browser, server)
        go(browser, server, f"/messages?stream={stream}&topic=sparse&partition=1")
        wait(browser, lambda b: len(rows(b)) == 10, "the ten records, newest first")
        assert previews(browser) == [f"new{n}" for n in range(4, -1, -1)] + [
            f"old{n}" for n in range(4, -1, -1)]
    finally:
        server.kill()
