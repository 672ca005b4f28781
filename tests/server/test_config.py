"""Configuration: defaults, TOML file, RILL_* environment overrides, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rill.server.config import (
    NEVER,
    ConfigError,
    load_config,
    parse_duration,
    parse_size,
)

REPOSITORY = Path(__file__).resolve().parents[2]


def test_embedded_defaults():
    config = load_config(environ={})
    assert config.tcp.address == "127.0.0.1:8090"
    assert config.system.path == "local_data"
    assert config.system.fsync == "interval" and config.system.fsync_interval == 1.0
    assert config.system.segment.size == 1_000_000_000
    assert config.system.segment.message_expiry == NEVER
    assert config.system.topic.max_size == 10_000_000_000
    assert config.tcp.max_frame_size == 64 * 1024 * 1024
    assert (config.root.username, config.root.password) == ("iggy", "iggy")


def test_kafka_defaults_and_environment():
    kafka = load_config(environ={}).kafka
    assert (kafka.enabled, kafka.address, kafka.advertised_address, kafka.stream) == (
        False, "127.0.0.1:9092", "", "kafka")
    assert kafka.auto_create_topics and not kafka.tls.enabled
    kafka = load_config(environ={"RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ADDRESS": "127.0.0.1:19092",
                                 "RILL_KAFKA_ADVERTISED_ADDRESS": "broker.example:9092",
                                 "RILL_KAFKA_STREAM": "legacy"}).kafka
    assert (kafka.enabled, kafka.address, kafka.advertised_address, kafka.stream) == (
        True, "127.0.0.1:19092", "broker.example:9092", "legacy")


def test_tank_defaults_and_environment():
    config = load_config(environ={})
    tank = config.tank
    assert (tank.enabled, tank.address, tank.user, tank.stream) == (
        False, "127.0.0.1:11011", "", "")
    assert not tank.tls.enabled and tank.idle_timeout == 16.0  # TANK's own idle rule
    assert config.tank_stream == "kafka"  # one flat namespace with Kafka by default
    assert load_config(environ={"RILL_KAFKA_STREAM": "legacy"}).tank_stream == "legacy"
    config = load_config(environ={"RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "0.0.0.0:11012",
                                  "RILL_TANK_USER": "tank-clients", "RILL_TANK_STREAM": "tank"})
    tank = config.tank
    assert (tank.enabled, tank.address, tank.user, tank.stream) == (
        True, "0.0.0.0:11012", "tank-clients", "tank")
    assert config.tank_stream == "tank"
    assert load_config(environ={"RILL_TANK_IDLE_TIMEOUT": "2 m"}).tank.idle_timeout == 120.0
    with pytest.raises(ConfigError, match="tank.idle_timeout"):
        load_config(environ={"RILL_TANK_IDLE_TIMEOUT": "0 s"})


def test_tank_max_frame_size_up_to_tanks_own_within_the_request_memory():
    assert load_config(environ={}).tank.max_frame_size == 64 << 20
    raised = {"RILL_TANK_ENABLED": "true", "RILL_TANK_MAX_FRAME_SIZE": "256 MiB"}
    assert load_config(environ=raised).tank.max_frame_size == 256 << 20
    with pytest.raises(ConfigError, match=r"tank.max_frame_size: must be 8 bytes to 256 MiB"):
        load_config(environ={"RILL_TANK_MAX_FRAME_SIZE": "257 MiB"})
    with pytest.raises(ConfigError, match="connections.request_memory: must hold"):
        load_config(environ={**raised, "RILL_CONNECTIONS_REQUEST_MEMORY": "128 MiB"})


def test_tank_address_flag_enables_the_listener():
    from rill.cli.server_config import effective_config

    config, sources = effective_config(None, None, None, None, None, None, "127.0.0.1:11099")
    assert config.tank.enabled and config.tank.address == "127.0.0.1:11099"
    assert sources["tank.address"] == sources["tank.enabled"] == "flag --tank-address"


def test_shipped_toml_matches_the_embedded_defaults():
    assert load_config(REPOSITORY / "config" / "server.toml", environ={}) == load_config(environ={})


def test_file_then_environment(tmp_path):
    path = tmp_path / "server.toml"
    path.write_text('[system]\nfsync = "never"\n[system.segment]\nsize = "512 MiB"\n'
                    '[tcp]\naddress = "0.0.0.0:9000"\n')
    config = load_config(path, environ={"RILL_TCP_ADDRESS": "127.0.0.1:9100",
                                        "RILL_SYSTEM_FSYNC": "always",
                                        "RILL_SYSTEM_PATH": "/data",
                                        "RILL_SYSTEM_SEGMENT_VALIDATE_CHECKSUM": "true",
                                        "RILL_ROOT_PASSWORD": "secret"})
    assert config.tcp.address == "127.0.0.1:9100"
    assert config.system.fsync == "always"
    assert config.system.path == "/data"
    assert config.system.segment.size == 512 * 2**20
    assert config.system.segment.validate_checksum is True
    assert config.root.password == "secret"


def test_append_threads_and_fsync_threads_come_from_the_environment():
    config = load_config(environ={"RILL_SYSTEM_APPEND_THREADS": "never",
                                  "RILL_SYSTEM_APPEND_THREAD_MIN_SIZE": "64 KiB",
                                  "RILL_SYSTEM_FSYNC_THREADS": "1"})
    assert config.system.append_threads == "never"
    assert config.system.append_thread_min_size == 64 * 1024
    assert config.system.fsync_threads == 1


def test_max_open_files_is_auto_or_a_number(tmp_path):
    assert load_config(environ={}).system.max_open_files == "auto"
    assert load_config(environ={"RILL_SYSTEM_MAX_OPEN_FILES": "300"}).system.max_open_files == 300
    path = tmp_path / "server.toml"
    path.write_text("[system]\nmax_open_files = 2000\n")
    assert load_config(path, environ={}).system.max_open_files == 2000
    path.write_text("[system]\nmax_open_files = -1\n")
    with pytest.raises(ConfigError, match="system.max_open_files"):
        load_config(path, environ={})


@pytest.mark.parametrize(
    "environ, message",
    [
        ({"RILL_SYSTEM_FSYNC": "sometimes"}, "system.fsync"),
        ({"RILL_TCP_ADDRESS": "nowhere"}, "tcp.address"),
        ({"RILL_SYSTEM_SEGMENT_SIZE": "lots"}, "RILL_SYSTEM_SEGMENT_SIZE"),
        ({"RILL_TCP_ENABLED": "maybe"}, "RILL_TCP_ENABLED"),
        ({"RILL_TCP_TLS_ENABLED": "true"}, "tcp.tls"),
        ({"RILL_QUIC_ADDRESS": "8080"}, "quic.address"),
        ({"RILL_QUIC_CERTIFICATE_SELF_SIGNED": "false"}, "quic.certificate"),
        ({"RILL_SYSTEM_APPEND_THREADS": "sometimes"}, "system.append_threads"),
        ({"RILL_SYSTEM_FSYNC_THREADS": "0"}, "system.fsync_threads"),
        ({"RILL_SYSTEM_MAX_OPEN_FILES": "many"}, "RILL_SYSTEM_MAX_OPEN_FILES: 'many' is neither"),
        ({"RILL_SYSTEM_MAX_OPEN_FILES": "8"}, "RILL_SYSTEM_MAX_OPEN_FILES: '8' is below"),
        ({"RILL_KAFKA_ADDRESS": "9092"}, "kafka.address"),
        ({"RILL_KAFKA_ADVERTISED_ADDRESS": "host"}, "kafka.advertised_address"),
        ({"RILL_KAFKA_ENABLED": "maybe"}, "RILL_KAFKA_ENABLED"),
        ({"RILL_KAFKA_STREAM": " "}, "kafka.stream"),
        ({"RILL_KAFKA_TLS_ENABLED": "true"}, "kafka.tls"),
        ({"RILL_TANK_ADDRESS": "11011"}, "tank.address"),
        ({"RILL_TANK_ENABLED": "maybe"}, "RILL_TANK_ENABLED"),
        ({"RILL_TANK_TLS_ENABLED": "true"}, "tank.tls"),
        ({"RILL_CONNECTIONS_MAX_CONNECTIONS_PER_ADDRESS": "0"}, "connections.max_connections_per_address"),
        ({"RILL_HTTP_MAX_POLL_SIZE": "100 B"}, "http.max_poll_size"),
        ({"RILL_HTTP_REPLY_MEMORY": "512 KiB"}, "http.reply_memory"),
    ],
)
def test_bad_values_name_the_key(environ, message):
    with pytest.raises(ConfigError, match=message):
        load_config(environ=environ)


def test_unknown_keys_in_the_file_are_refused(tmp_path):
    path = tmp_path / "server.toml"
    path.write_text("[tcp]\nadress = '1.2.3.4:5'\n")
    with pytest.raises(ConfigError, match="tcp.adress"):
        load_config(path, environ={})


def test_units():
    assert parse_size("1 GB") == 10**9 and parse_size("64 MiB") == 64 * 2**20
    assert parse_size(2000) == 2000
    assert parse_duration("500 ms") == 0.5 and parse_duration("1 m") == 60
    assert parse_duration("none") == NEVER


def test_cluster_defaults_environment_and_refusals():
    cluster = load_config(environ={}).cluster
    assert not cluster.enabled and cluster.endpoints == []  # standalone
    assert (cluster.node_id, cluster.peer_address, cluster.name) == (-1, "127.0.0.1:8093", "rill")
    assert (cluster.default_replication_factor, cluster.min_insync_replicas) == (3, 2)
    assert (cluster.member_lease_ttl, cluster.replica_lag_max) == (2.0, 10.0)
    cluster = load_config(environ={
        "RILL_CLUSTER_ETCD_ENDPOINTS": " http://127.0.0.1:2379 , http://etcd-2.example:2379/",
        "RILL_CLUSTER_NODE_ID": "3", "RILL_CLUSTER_PEER_ADDRESS": "10.0.0.3:9093",
        "RILL_CLUSTER_NAME": "prod-1", "RILL_CLUSTER_DEFAULT_REPLICATION_FACTOR": "5",
        "RILL_CLUSTER_MIN_INSYNC_REPLICAS": "3", "RILL_CLUSTER_MEMBER_LEASE_TTL": "3 s",
        "RILL_CLUSTER_REPLICA_LAG_MAX": "30 s"}).cluster
    assert cluster.enabled and cluster.endpoints == ["http://127.0.0.1:2379", "http://etcd-2.example:2379"]
    assert (cluster.node_id, cluster.peer_address, cluster.name) == (3, "10.0.0.3:9093", "prod-1")
    assert (cluster.default_replication_factor, cluster.min_insync_replicas) == (5, 3)
    assert (cluster.member_lease_ttl, cluster.replica_lag_max) == (3.0, 30.0)
    node = {"RILL_CLUSTER_ETCD_ENDPOINTS": "http://127.0.0.1:2379", "RILL_CLUSTER_NODE_ID": "1"}
    refusals = {
        "RILL_CLUSTER_ETCD_ENDPOINTS": ("https://127.0.0.1:2379", r"RILL_CLUSTER_ETCD_ENDPOINTS: "
                                        r"'https://127.0.0.1:2379' is not http://HOST:PORT"),
        "RILL_CLUSTER_NODE_ID": ("x", "RILL_CLUSTER_NODE_ID"),
        "RILL_CLUSTER_PEER_ADDRESS": ("8093", r"cluster.peer_address: '8093' is not HOST:PORT"),
        "RILL_CLUSTER_NAME": ("a/b", r"cluster.name: 'a/b' is not a name"),
        "RILL_CLUSTER_DEFAULT_REPLICATION_FACTOR": ("0", "cluster.default_replication_factor: "
                                                    "must be at least 1"),
        "RILL_CLUSTER_MIN_INSYNC_REPLICAS": ("4", r"cluster.min_insync_replicas: must be 1 to "
                                             r"cluster.default_replication_factor \(3\)"),
        "RILL_CLUSTER_MEMBER_LEASE_TTL": ("1500 ms", "RILL_CLUSTER_MEMBER_LEASE_TTL: '1500 ms': "
                                          "etcd leases count whole seconds"),
        "RILL_CLUSTER_REPLICA_LAG_MAX": ("none", "cluster.replica_lag_max: must be a positive"),
    }
    for name, (value, message) in refusals.items():
        with pytest.raises(ConfigError, match=message):
            load_config(environ={**node, name: value})
    with pytest.raises(ConfigError, match=r"cluster.node_id: a node with cluster.etcd_endpoints "
                                          r"needs a unique node id"):
        load_config(environ={"RILL_CLUSTER_ETCD_ENDPOINTS": "http://127.0.0.1:2379"})


def test_cluster_section_in_a_file(tmp_path):
    path = tmp_path / "server.toml"
    path.write_text('[cluster]\netcd_endpoints = "http://127.0.0.1:2379"\nnode_id = 0\n'
                    'member_lease_ttl = "5 s"\n')
    cluster = load_config(path, environ={}).cluster
    assert cluster.endpoints == ["http://127.0.0.1:2379"] and cluster.node_id == 0
    assert cluster.member_lease_ttl == 5.0
