"""Helpers of the HTTP API tests (imported by the tests and by conftest.py)."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import httpx

from server_process import RillProcess

_names = itertools.count()


def start_with_kafka(data_dir: Path) -> RillProcess:
    """A server with the Kafka listener on too, Kafka connections acting as ``iggy`` (the
    console's Kafka group views)."""
    return RillProcess(data_dir, env={"RILL_KAFKA_ANONYMOUS_USER": "iggy"},
                       args=["--kafka-address", "127.0.0.1:0"]).start()


def assigned_kafka_member(bootstrap: str, topic: str, group: str, client_id: str,
                          wait: float = 30.0):
    """A kafka-python consumer of ``topic`` in ``group``, once the group assigned it partitions
    (the caller closes it)."""
    from kafka import KafkaConsumer

    reader = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                           client_id=client_id, enable_auto_commit=False)
    deadline = time.monotonic() + wait
    while not reader.assignment():
        if time.monotonic() >= deadline:
            reader.close()
            raise AssertionError(f"the Kafka consumer {client_id!r} was never assigned")
        reader.poll(timeout_ms=200)
    return reader


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def bearer(base_url: str, username: str = "iggy", password: str = "iggy") -> dict[str, str]:
    """Log in; the Authorization header for the token."""
    answer = httpx.post(f"{base_url}/users/login", json={"username": username, "password": password})
    assert answer.status_code == 200, answer.text
    return {"Authorization": f"Bearer {answer.json()['access_token']['token']}"}


def error_of(response: httpx.Response) -> tuple[int, str]:
    """(status, code) of an error answer, checking the body has the four fields."""
    body = response.json()
    assert set(body) == {"id", "code", "reason", "field"}, body
    assert isinstance(body["reason"], str) and body["reason"]
    return response.status_code, body["code"]
