"""SaslHandshake v0 and its raw SASL tokens (issue 27 item 5; KIP-43's exchange, what Sarama
below its V1_0_0_0 setting sends for PLAIN): after the handshake each token is a raw frame
(int32 size, the token, no Kafka header) both ways; PLAIN's answer is an empty frame, SCRAM's
are its server messages; a failed login is told by closing the connection. Raw frames here,
and kafka-python pinned to Kafka 0.10.2 (which then speaks this exchange) for PLAIN and both
SCRAMs."""

from __future__ import annotations

import struct
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer

from rill.protocol.kafka import ErrorCode, apis, request_class

from kafka_link import Raw, bootstrap, consumed
from test_kafka_sasl import MECHANISMS, PASSWORD, USER, start

Handshake = request_class(apis.SASL_HANDSHAKE)
Metadata = request_class(apis.METADATA)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = start(tmp_path_factory.mktemp("kafka-sasl-v0") / "data")
    yield process
    process.kill()


@pytest.fixture
def raw(server):
    link = Raw(server)
    yield link
    link.close()


def raw_token(raw: Raw, token: bytes) -> bytes | None:
    raw.send(struct.pack(">i", len(token)) + token)
    return raw.receive()


def test_a_plain_login_by_raw_tokens(raw):
    answer = raw.call(apis.SASL_HANDSHAKE, 0, Handshake(mechanism="PLAIN"))
    assert (answer.error_code, list(answer.mechanisms)) == (0, MECHANISMS)
    assert raw_token(raw, b"\0" + USER.encode() + b"\0" + PASSWORD.encode()) == b""
    assert raw.call(apis.METADATA, 1, Metadata(topics=None)).brokers  # logged in


def test_a_wrong_password_closes_the_connection_unanswered(server, raw):
    assert raw.call(apis.SASL_HANDSHAKE, 0, Handshake(mechanism="PLAIN")).error_code == 0
    assert raw_token(raw, b"\0" + USER.encode() + b"\0wrong-password") is None
    other = Raw(server)  # others are untouched
    try:
        assert other.call(apis.SASL_HANDSHAKE, 0, Handshake(mechanism="PLAIN")).error_code == 0
        assert raw_token(other, b"\0" + USER.encode() + b"\0" + PASSWORD.encode()) == b""
    finally:
        other.close()


def test_a_scram_exchange_answers_raw_server_messages(raw):
    assert raw.call(apis.SASL_HANDSHAKE, 0, Handshake(mechanism="SCRAM-SHA-256")).error_code == 0
    first = raw_token(raw, b"n,,n=" + USER.encode() + b",r=clientnonce0123456789")
    assert first is not None and first.startswith(b"r=clientnonce0123456789")
    assert b",s=" in first and b",i=" in first
    assert raw_token(raw, b"c=biws,r=" + first[2:first.index(b",")] + b",p=AAAA") is None


def test_an_unknown_mechanism_is_refused_as_in_v1(raw):
    answer = raw.call(apis.SASL_HANDSHAKE, 0, Handshake(mechanism="GSSAPI"))
    assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert raw.receive() is None


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_pinned_to_0_10_2_logs_in_by_raw_tokens(server, mechanism):
    topic = f"sasl0-{uuid.uuid4().hex[:8]}"
    common = dict(bootstrap_servers=bootstrap(server), api_version=(0, 10, 2),
                  security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                  sasl_plain_username=USER, sasl_plain_password=PASSWORD)
    producer = KafkaProducer(**common)
    producer.send(topic, b"hello").get(timeout=20)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", group_id=None, **common)
    try:
        assert consumed(consumer, 1) == [b"hello"]
    finally:
        consumer.close()
