"""SASL on the Kafka listener: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 as rill users, through
confluent-kafka (librdkafka 2.16), kafka-python, aiokafka and kcat, over plaintext and TLS, with
the right and a wrong password; the connection rules before a login (only ApiVersions and SASL;
anything else closes), the SASL state errors, logins that expire and are renewed on their
connection (KIP-368, ``[kafka] session_lifetime``), ``[kafka] anonymous_user`` (off by default), and
the SCRAM credentials in the metadata store (no clear password; they survive a restart; a user
stored without them gets them at its next password login)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError as AioKafkaError
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import KafkaError as KpKafkaError

from rill.protocol.kafka import ErrorCode, apis, encode_request, request_class
from rill.protocol.permissions import GlobalPermissions, Permissions
from rill.server.auth.certificates import generate_self_signed
from server_process import RillProcess, session
from kafka_link import Raw, bootstrap, consumed

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
USER, PASSWORD = "alice", "alice-secret-pw"
ENV = {"RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ADDRESS": "127.0.0.1:0",
       "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false",
       "RILL_ROOT_PASSWORD_HASH_COST": "4",
       # clients retry a refused login at once; these tests are not about the lock (one is)
       "RILL_LOGIN_THROTTLE_ENABLED": "false"}
EVERYTHING = Permissions(GlobalPermissions(*([True] * 10)))

ApiVersions = request_class(apis.API_VERSIONS)
Metadata = request_class(apis.METADATA)
CreateTopics = request_class(apis.CREATE_TOPICS)
Handshake = request_class(apis.SASL_HANDSHAKE)
FindCoordinator = request_class(apis.FIND_COORDINATOR)
Authenticate = request_class(apis.SASL_AUTHENTICATE)


def start(path, **env) -> RillProcess:
    server = RillProcess(path, env={**ENV, **env}).start()
    with session(server) as root:
        root.create_user(USER, PASSWORD, permissions=EVERYTHING)
        root.create_user("nobody", "nobody-pw")
    return server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = start(tmp_path_factory.mktemp("kafka-sasl") / "data")
    yield process
    process.kill()


def topic_name() -> str:
    return f"sasl-{uuid.uuid4().hex[:8]}"


# -- real clients ----------------------------------------------------------------------------


def librdkafka(server, mechanism: str, password: str = PASSWORD, **extra) -> dict:
    return {"bootstrap.servers": bootstrap(server), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": mechanism, "sasl.username": USER, "sasl.password": password,
            **extra}


def librdkafka_round_trip(config: dict) -> list[bytes]:
    topic = topic_name()
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1)])[topic].result(timeout=30)
    producer = Producer(config)
    for index in range(3):
        producer.produce(topic, f"v{index}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    try:
        while len(values) < 3:
            message = consumer.poll(30)
            assert message is not None and message.error() is None
            values.append(message.value())
    finally:
        consumer.close()
    return values


def librdkafka_refusal(config: dict) -> list[KafkaError]:
    """The errors librdkafka reports when it cannot log in (list_topics fails)."""
    reported: list[KafkaError] = []
    admin = AdminClient({**config, "error_cb": reported.append})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    admin.poll(0)
    return reported


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_logs_in_produces_and_consumes(server, mechanism):
    assert librdkafka_round_trip(librdkafka(server, mechanism)) == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_with_a_wrong_password_is_refused(server, mechanism):
    reported = librdkafka_refusal(librdkafka(server, mechanism, "not-the-password"))
    assert any(error.code() == KafkaError._AUTHENTICATION
               and "Authentication failed" in error.str() for error in reported), reported


def kafka_python(server, mechanism: str, password: str = PASSWORD) -> dict:
    return {"bootstrap_servers": bootstrap(server), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": USER,
            "sasl_plain_password": password, "request_timeout_ms": 10_000}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_logs_in_produces_and_consumes(server, mechanism):
    config = kafka_python(server, mechanism)
    topic = topic_name()
    admin = KafkaAdminClient(**config)
    try:
        admin.create_topics([KpNewTopic(topic, 1, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(**config, enable_idempotence=False)
    try:
        metadata = producer.send(topic, b"from-kafka-python").get(timeout=30)
    finally:
        producer.close()
    assert (metadata.partition, metadata.offset) == (0, 0)
    consumer = KafkaConsumer(**config)
    try:
        consumer.assign([KpTopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        assert consumed(consumer, 1) == [b"from-kafka-python"]
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_with_a_wrong_password_is_refused(server, mechanism, caplog):
    with pytest.raises(KpKafkaError):
        KafkaAdminClient(**kafka_python(server, mechanism, "not-the-password"),
                         bootstrap_timeout_ms=3_000).close()
    assert any("SaslAuthenticationFailedError" in record.getMessage()
               and "Authentication failed" in record.getMessage() for record in caplog.records)


def aiokafka_round_trip(server, mechanism: str, password: str) -> list[bytes]:
    async def main() -> list[bytes]:
        config = {"bootstrap_servers": bootstrap(server), "security_protocol": "SASL_PLAINTEXT",
                  "sasl_mechanism": mechanism, "sasl_plain_username": USER,
                  "sasl_plain_password": password, "request_timeout_ms": 10_000}
        topic = topic_name()
        producer = AIOKafkaProducer(**config)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"from-aiokafka", partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, **config, auto_offset_reset="earliest",
                                    group_id=f"g-{topic}")
        await consumer.start()
        try:
            return [(await consumer.getone()).value]
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(main(), 60))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_logs_in_produces_and_consumes_in_a_group(server, mechanism):
    assert aiokafka_round_trip(server, mechanism, PASSWORD) == [b"from-aiokafka"]


def test_aiokafka_with_a_wrong_password_is_refused(server, caplog):
    with pytest.raises(AioKafkaError):
        aiokafka_round_trip(server, "SCRAM-SHA-512", "not-the-password")
    assert any("Authentication failed" in record.getMessage() for record in caplog.records), [
        record.getMessage() for record in caplog.records]


def kcat(server, mechanism: str, password: str, *arguments: str, given: str = ""
         ) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", "-b", bootstrap(server),
                           "-X", "security.protocol=SASL_PLAINTEXT",
                           "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={USER}",
                           "-X", f"sasl.password={password}", *arguments],
                          input=given, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_kcat_logs_in_produces_and_consumes(server, mechanism):
    topic = topic_name()
    produced = kcat(server, mechanism, PASSWORD, "-P", "-t", topic, given="a\nb\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kcat(server, mechanism, PASSWORD, "-C", "-t", topic, "-o", "beginning", "-e")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["a", "b"]


def test_kcat_with_a_wrong_password_is_refused(server):
    listed = kcat(server, "SCRAM-SHA-512", "not-the-password", "-L", "-m", "5")
    assert listed.returncode != 0
    assert "Authentication failed" in listed.stderr


# -- the connection's rules, on the wire -----------------------------------------------------


def log_in_plain(raw: Raw, username: str, password: str):
    assert raw.call(apis.SASL_HANDSHAKE, 1, Handshake(mechanism="PLAIN")).error_code == 0
    token = b"\0" + username.encode() + b"\0" + password.encode()
    return raw.call(apis.SASL_AUTHENTICATE, 2, Authenticate(auth_bytes=token))


def test_before_a_login_only_api_versions_and_sasl_are_answered(raw):
    table = {entry.api_key: (entry.min_version, entry.max_version)
             for entry in raw.call(apis.API_VERSIONS, 3, ApiVersions()).api_keys}
    assert table[apis.SASL_HANDSHAKE] == (0, 1) and table[apis.SASL_AUTHENTICATE] == (0, 2)
    raw.send(encode_request(apis.METADATA, 12, 9, Metadata(topics=None)))
    assert raw.receive() is None  # closed, unanswered


def test_before_a_login_even_an_api_that_reads_nothing_closes(server):
    link = Raw(server)
    try:  # FindCoordinator touches no topic: only the login rule refuses it
        link.send(encode_request(apis.FIND_COORDINATOR, 3, 1, FindCoordinator(key="g", key_type=0)))
        assert link.receive() is None
    finally:
        link.close()
    link = Raw(server)
    try:
        log_in_plain(link, USER, PASSWORD)
        link.send(encode_request(apis.FIND_COORDINATOR, 3, 5, FindCoordinator(key="g", key_type=0)))
        assert link.receive() is not None
    finally:
        link.close()


def test_after_a_plain_login_requests_are_served(raw):
    answer = log_in_plain(raw, USER, PASSWORD)
    assert (answer.error_code, answer.error_message, answer.auth_bytes) == (0, None, b"")
    assert answer.session_lifetime_ms == 0  # a login lasts as long as its connection
    assert raw.call(apis.METADATA, 12, Metadata(topics=None)).brokers
    # one login per connection: a second handshake is a state error, and closes
    again = raw.call(apis.SASL_HANDSHAKE, 1, Handshake(mechanism="PLAIN"))
    assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert raw.receive() is None


def test_a_wrong_plain_password_answers_58_with_a_message_and_closes(raw):
    answer = log_in_plain(raw, USER, "not-the-password")
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "Authentication failed" in answer.error_message
    # the close follows a moment later; anything sent meanwhile is not answered
    raw.send(encode_request(apis.API_VERSIONS, 3, 99, ApiVersions()))
    assert raw.receive() is None


def test_an_unknown_mechanism_lists_the_enabled_ones_and_closes(raw):
    answer = raw.call(apis.SASL_HANDSHAKE, 1, Handshake(mechanism="GSSAPI"))
    assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert list(answer.mechanisms) == MECHANISMS
    assert raw.receive() is None


def test_authenticate_before_a_handshake_is_an_illegal_state(raw):
    answer = raw.call(apis.SASL_AUTHENTICATE, 1, Authenticate(auth_bytes=b"\0alice\0x"))
    assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE and answer.error_message
    assert raw.receive() is None


def test_a_failed_login_leaves_other_connections_alone(server, raw):
    other = Raw(server)
    try:
        log_in_plain(other, USER, PASSWORD)
        assert log_in_plain(raw, USER, "wrong").error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert other.call(apis.METADATA, 12, Metadata(topics=None)).brokers
    finally:
        other.close()


# -- logins that expire (KIP-368: [kafka] session_lifetime) ------------------------------------

LIFETIME_MS = 1500


@pytest.fixture(scope="module")
def expiring(tmp_path_factory):
    process = start(tmp_path_factory.mktemp("kafka-sasl-expiring") / "data",
                    RILL_KAFKA_SESSION_LIFETIME=f"{LIFETIME_MS} ms", RILL_LOGGING_LEVEL="info")
    yield process
    process.kill()


def metadata_answered(link: Raw) -> bool:
    link.send(encode_request(apis.METADATA, 12, 7, Metadata(topics=None)))
    return link.receive() is not None


def test_a_login_tells_its_lifetime_and_logging_in_again_renews_it(expiring):
    link = Raw(expiring)
    try:
        answer = log_in_plain(link, USER, PASSWORD)
        assert (answer.error_code, answer.session_lifetime_ms) == (0, LIFETIME_MS)
        time.sleep(0.6 * LIFETIME_MS / 1000)
        again = log_in_plain(link, USER, PASSWORD)  # on the same connection
        assert (again.error_code, again.session_lifetime_ms) == (0, LIFETIME_MS)
        time.sleep(0.6 * LIFETIME_MS / 1000)  # past the first login's end, within the second's
        assert metadata_answered(link)
        time.sleep(LIFETIME_MS / 1000)  # past the second's end: closed, unanswered
        assert not metadata_answered(link)
    finally:
        link.close()


def test_logging_in_again_as_another_user_or_by_another_mechanism_closes(expiring):
    link = Raw(expiring)
    try:
        log_in_plain(link, USER, PASSWORD)
        answer = log_in_plain(link, "nobody", "nobody-pw")
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "another user" in answer.error_message
        assert not metadata_answered(link)
    finally:
        link.close()
    link = Raw(expiring)
    try:
        log_in_plain(link, USER, PASSWORD)
        answer = link.call(apis.SASL_HANDSHAKE, 1, Handshake(mechanism="SCRAM-SHA-256"))
        assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert link.receive() is None
    finally:
        link.close()


def produce_for(producer: Producer, topic: str, seconds: float) -> int:
    """Produce one record every 0.2 s for ``seconds``, each flushed; how many were delivered."""
    delivered = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.produce(topic, b"x", on_delivery=lambda error, _: delivered.append(error))
        producer.flush(10)
        time.sleep(0.2)
    assert all(error is None for error in delivered), delivered
    return len(delivered)


def test_confluent_kafka_logs_in_again_on_its_connection_before_the_login_ends(expiring):
    topic = topic_name()
    config = librdkafka(expiring, "SCRAM-SHA-256")
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1)])[topic].result(timeout=30)
    before = sum("logged in again by SASL SCRAM-SHA-256" in line for line in expiring.output)
    producer = Producer(config)
    assert produce_for(producer, topic, 3.5 * LIFETIME_MS / 1000) >= 10
    renewals = sum("logged in again by SASL SCRAM-SHA-256" in line
                   for line in expiring.output) - before
    assert renewals >= 2, "".join(expiring.output[-20:])


def test_a_changed_password_reaches_a_connection_at_its_next_login(expiring):
    """With logins expiring, revoking a password ends the connections already logged in with
    it: the client's next login on its connection fails, and the connection closes."""
    with session(expiring) as root:
        root.create_user("carol", "carol-secret-pw", permissions=EVERYTHING)
    reported: list[KafkaError] = []
    producer = Producer({**librdkafka(expiring, "SCRAM-SHA-512"), "sasl.username": "carol",
                         "sasl.password": "carol-secret-pw", "error_cb": reported.append})
    topic = topic_name()
    assert produce_for(producer, topic, 0.5) >= 1
    with session(expiring, "carol", "carol-secret-pw") as carol:
        carol.change_password("carol", "carol-secret-pw", "carol-new-pw")
    deadline = time.monotonic() + 3 * LIFETIME_MS / 1000
    while time.monotonic() < deadline and not any(
            error.code() == KafkaError._AUTHENTICATION for error in reported):
        producer.poll(0.1)
    assert any(error.code() == KafkaError._AUTHENTICATION for error in reported), reported


def create_topic(raw: Raw, name: str) -> int:
    body = CreateTopics(topics=[CreateTopics.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10_000, validate_only=False)
    return raw.call(apis.CREATE_TOPICS, 7, body).topics[0].error_code


def test_anonymous_user_is_opt_in_and_acts_as_that_user(tmp_path):
    server = start(tmp_path / "data", RILL_KAFKA_ANONYMOUS_USER="nobody")
    try:
        link = Raw(server)
        try:
            assert link.call(apis.METADATA, 12, Metadata(topics=None)).brokers  # no login
            # acting as "nobody" (no permissions), not as root
            assert create_topic(link, topic_name()) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            assert log_in_plain(link, USER, PASSWORD).error_code == 0  # SASL still works
            assert create_topic(link, topic_name()) == ErrorCode.NONE
        finally:
            link.close()
    finally:
        server.kill()


# -- SCRAM credentials in the metadata store -------------------------------------------------


def stored_users(server) -> dict[str, tuple[str, str | None]]:
    with sqlite3.connect(server.data_dir / "metadata.sqlite3") as db:
        return {name: (password_hash, scram) for name, password_hash, scram in db.execute(
            "SELECT username, password_hash, scram_credentials FROM users")}


def scram_login(server, mechanism: str, password: str) -> subprocess.CompletedProcess:
    return kcat(server, mechanism, password, "-L", "-m", "10")


def test_scram_credentials_are_stored_without_the_password_and_survive_a_restart(tmp_path):
    server = start(tmp_path / "data")
    try:
        users = stored_users(server)
        assert set(json.loads(users["iggy"][1])) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}  # root's
        password_hash, stored = users[USER]
        credentials = json.loads(stored)
        assert set(credentials) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert all(c["iterations"] >= 4096 and set(c) == {"salt", "iterations", "stored_key",
                                                          "server_key"}
                   for c in credentials.values())
        assert password_hash.startswith("$2") and PASSWORD not in stored
        store = b"".join(path.read_bytes() for path in server.data_dir.glob("metadata.sqlite3*"))
        assert PASSWORD.encode() not in store
        server.restart()
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            assert scram_login(server, mechanism, PASSWORD).returncode == 0
    finally:
        server.kill()


def test_a_changed_password_changes_the_scram_credentials(tmp_path):
    server = start(tmp_path / "data")
    try:
        with session(server, USER, PASSWORD) as alice:
            alice.change_password(USER, PASSWORD, "a-new-password")
        assert scram_login(server, "SCRAM-SHA-256", PASSWORD).returncode != 0
        assert scram_login(server, "SCRAM-SHA-256", "a-new-password").returncode == 0
    finally:
        server.kill()


def test_a_user_stored_without_scram_credentials_gets_them_at_its_next_password_login(tmp_path):
    server = start(tmp_path / "data")
    try:
        server.stop()
        # as an older rill left it
        with sqlite3.connect(server.data_dir / "metadata.sqlite3") as db:
            db.execute("UPDATE users SET scram_credentials = NULL WHERE username = ?", (USER,))
        server.restart()
        assert scram_login(server, "SCRAM-SHA-512", PASSWORD).returncode != 0
        assert kcat(server, "PLAIN", PASSWORD, "-L", "-m", "10").returncode == 0
        assert stored_users(server)[USER][1] is not None
        server.restart()
        assert scram_login(server, "SCRAM-SHA-512", PASSWORD).returncode == 0
    finally:
        server.kill()


# -- over TLS ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("kafka-sasl-tls")
    certificate, key = generate_self_signed("localhost")
    (directory / "cert.pem").write_bytes(certificate)
    (directory / "key.pem").write_bytes(key)
    process = start(directory / "data", RILL_KAFKA_TLS_ENABLED="true",
                    RILL_KAFKA_TLS_CERTIFICATE=str(directory / "cert.pem"),
                    RILL_KAFKA_TLS_KEY=str(directory / "key.pem"))
    process.ca_file = str(directory / "cert.pem")
    yield process
    process.kill()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_sasl_over_tls_with_confluent_kafka(tls_server, mechanism):
    tls = {"security.protocol": "SASL_SSL", "ssl.ca.location": tls_server.ca_file,
           "ssl.endpoint.identification.algorithm": "none"}
    config = librdkafka(tls_server, mechanism, **tls)
    assert librdkafka_round_trip(config) == [b"v0", b"v1", b"v2"]
    reported = librdkafka_refusal(librdkafka(tls_server, mechanism, "not-the-password", **tls))
    assert any(error.code() == KafkaError._AUTHENTICATION for error in reported), reported


def test_sasl_over_tls_with_kafka_python(tls_server):
    import ssl

    context = ssl.create_default_context(cafile=tls_server.ca_file)
    context.check_hostname = False
    config = {**kafka_python(tls_server, "SCRAM-SHA-256"), "security_protocol": "SASL_SSL",
              "ssl_context": context}
    admin = KafkaAdminClient(**config)
    try:
        assert isinstance(admin.list_topics(), list)
    finally:
        admin.close()
    with pytest.raises(KpKafkaError):
        KafkaAdminClient(**{**config, "sasl_plain_password": "wrong"},
                         bootstrap_timeout_ms=10_000).close()


# -- throttling: the Iggy login's rules ---------------------------------------------------------


def test_failed_sasl_logins_are_throttled_as_iggy_logins(tmp_path):
    server = start(tmp_path / "data", RILL_LOGIN_THROTTLE_ENABLED="true",
                   RILL_LOGIN_THROTTLE_MAX_FAILURES="3")
    try:
        for _ in range(3):
            link = Raw(server)
            assert log_in_plain(link, USER, "wrong").error_code == 58
            link.close()
        link = Raw(server)
        try:
            refused = log_in_plain(link, USER, PASSWORD)  # the right password, too late
            assert refused.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert refused.error_message.startswith("Too many failed logins")
        finally:
            link.close()
        scram = kcat(server, "SCRAM-SHA-256", PASSWORD, "-L", "-m", "5")
        assert scram.returncode != 0 and "Too many failed logins" in scram.stderr
        with pytest.raises(Exception, match="(?i)too many failed logins|throttled"):
            with session(server, USER, PASSWORD):  # the Iggy login shares the lock
                pass
    finally:
        server.kill()


def retry_wrong_password(server, username: str, refusals: int) -> list[str]:
    """A confluent-kafka client logging in as ``username`` with a wrong password, retrying (as
    librdkafka does by itself) until its login was refused ``refusals`` times; the refusals."""
    reported: list[KafkaError] = []
    admin = AdminClient(librdkafka(server, "PLAIN", "not-the-password", **{
        "sasl.username": username, "error_cb": reported.append}))
    for _ in range(100):
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=1)
        admin.poll(0)
        refused = [error.str() for error in reported if "SASL authentication error" in error.str()]
        if len(refused) >= refusals:
            return refused
    raise AssertionError(f"{refusals} refused logins never reported: {reported}")


def test_a_client_retrying_a_wrong_password_locks_out_no_one_else(tmp_path):
    """On one address (loopback), a Kafka client retrying a wrong password earns a lock for its
    username there, and neither another user nor -- once logged in from there -- the same user
    with the right password is refused."""
    server = start(tmp_path / "data", RILL_LOGIN_THROTTLE_ENABLED="true",
                   RILL_LOGIN_THROTTLE_MAX_FAILURES="3")
    try:
        refused = retry_wrong_password(server, "nobody", refusals=4)
        assert "Too many failed logins" in refused[3]  # locked after 3
        assert "login as 'nobody' from 127.0.0.1 locked" in "".join(server.output)
        link = Raw(server)
        try:  # the locked pair itself is refused, even with its right password
            refused = log_in_plain(link, "nobody", "nobody-pw")
            assert refused.error_message.startswith("Too many failed logins")
        finally:
            link.close()
        # another user of the same address logs in, produces and consumes
        assert librdkafka_round_trip(librdkafka(server, "SCRAM-SHA-256")) == [b"v0", b"v1", b"v2"]
        # alice has logged in from here: her own stale client does not lock her out
        refused = retry_wrong_password(server, USER, refusals=6)
        assert not any("Too many failed logins" in error for error in refused), refused
        assert librdkafka_round_trip(librdkafka(server, "PLAIN")) == [b"v0", b"v1", b"v2"]
    finally:
        server.kill()
