"""What the Kafka listener tests share: ``KAFKA_ENV`` (a server with the Kafka listener on port 0
and anonymous connections acting as the root user, so tests that are not about logging in need
no SASL), ``bootstrap`` (the address Kafka clients are given), ``Raw`` (one plain socket to
the listener, whole frames through rill's codec) and ``consumed`` (what a kafka-python consumer
polls, without waiting out its consumer timeout). The fixtures are in ``conftest.py``."""

from __future__ import annotations

import socket
import struct
import time

from rill.protocol.kafka import decode_response, encode_request

KAFKA_ENV = {"RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ADDRESS": "127.0.0.1:0",
             "RILL_KAFKA_ANONYMOUS_USER": "iggy",
             "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false"}


def bootstrap(server) -> str:
    return "%s:%d" % server.kafka_address


class Raw:
    """One plain socket to the Kafka listener: whole frames out, whole frames in."""

    def __init__(self, server) -> None:
        self.sock = socket.create_connection(server.kafka_address, timeout=10)
        self.correlation = 0

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def receive(self) -> bytes | None:
        """The payload of the next response frame; None when the server closed."""
        head = self._exactly(4)
        if head is None:
            return None
        payload = self._exactly(struct.unpack(">i", head)[0])
        assert payload is not None
        return payload

    def _exactly(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                assert not data, "the server closed in the middle of a frame"
                return None
            data += chunk
        return data

    def call(self, api_key: int, version: int, body):
        self.correlation += 1
        self.send(encode_request(api_key, version, self.correlation, body))
        payload = self.receive()
        assert payload is not None, "the server closed the connection"
        response = decode_response(api_key, version, payload)
        assert response.correlation_id == self.correlation
        return response.body

    def close(self) -> None:
        self.sock.close()


def consumed(consumer, count: int, timeout: float = 30.0, settle_ms: int = 300) -> list[bytes]:
    """The values a kafka-python ``consumer`` polls: the first ``count`` records and whatever
    follows within ``settle_ms`` (so that a test asserting the whole list still sees an extra
    record), without iterating the consumer until its ``consumer_timeout_ms`` runs out."""
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(values) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values += [record.value for record in records]
    for records in consumer.poll(timeout_ms=settle_ms).values():
        values += [record.value for record in records]
    return values
