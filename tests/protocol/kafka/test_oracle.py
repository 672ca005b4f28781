"""kafka-python 3.0.12 as an oracle (a test dependency; its schema-driven protocol classes,
called, not copied): requests it encodes decode with rill's codec to the same field values, and
rill's encoding of the same request or response is byte-identical to its own."""

from __future__ import annotations

import uuid

import pytest

from rill.protocol.kafka import apis
from rill.protocol.kafka.codec import decode_request, encode_request, encode_response, message_spec
from rill.protocol.kafka.schema import StructSpec

import kafka  # the test extra pins kafka-python 3.0.12 (./run test installs it)
from kafka.protocol import admin, consumer, metadata, producer, sasl

assert kafka.__version__.startswith("3."), f"the oracle needs kafka-python 3.x, not {kafka.__version__}"


KP = {}
for module in (admin, consumer, metadata, producer, sasl):
    for name in dir(module):
        if name.endswith(("Request", "Response")):
            KP[name] = getattr(module, name)

TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
BATCH = bytes(range(61)) * 3  # stands for a RecordBatch: carried, never parsed

REQUESTS = [
    (apis.METADATA, 0, {"topics": [{"name": "orders"}, {"name": "payments"}]}),
    (apis.METADATA, 4, {"topics": None, "allow_auto_topic_creation": False}),
    (apis.METADATA, 12, {"topics": [{"name": "orders", "topic_id": TOPIC_ID}],
                         "allow_auto_topic_creation": True,
                         "include_topic_authorized_operations": True}),
    (apis.API_VERSIONS, 3, {"client_software_name": "kafka-python",
                            "client_software_version": "3.0.12"}),
    (apis.API_VERSIONS, 4, {"client_software_name": "rill-test", "client_software_version": ""}),
    (apis.PRODUCE, 3, {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                       "topic_data": [{"name": "orders", "partition_data": [
                           {"index": 0, "records": BATCH}, {"index": 1, "records": None}]}]}),
    (apis.PRODUCE, 9, {"transactional_id": "tx-1", "acks": 1, "timeout_ms": 1500,
                       "topic_data": [{"name": "orders", "partition_data": [
                           {"index": 2, "records": BATCH}]}]}),
    (apis.FETCH, 4, {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
                     "isolation_level": 1, "topics": [{"topic": "orders", "partitions": [
                         {"partition": 0, "fetch_offset": 42, "partition_max_bytes": 1048576}]}]}),
    (apis.FETCH, 12, {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20,
                      "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                      "topics": [{"topic": "orders", "partitions": [
                          {"partition": 1, "current_leader_epoch": 0, "fetch_offset": 7,
                           "last_fetched_epoch": -1, "log_start_offset": -1,
                           "partition_max_bytes": 65536}]}],
                      "forgotten_topics_data": [{"topic": "old", "partitions": [3, 4]}],
                      "rack_id": "rack-a", "cluster_id": "cluster-1"}),
    (apis.JOIN_GROUP, 5, {"group_id": "g", "session_timeout_ms": 10000,
                          "rebalance_timeout_ms": 300000, "member_id": "",
                          "group_instance_id": None, "protocol_type": "consumer",
                          "protocols": [{"name": "range", "metadata": b"\x00\x01meta"},
                                        {"name": "roundrobin", "metadata": b""}]}),
    (apis.JOIN_GROUP, 7, {"group_id": "g", "session_timeout_ms": 45000,
                          "rebalance_timeout_ms": 300000, "member_id": "m-1",
                          "group_instance_id": "static-1", "protocol_type": "consumer",
                          "protocols": [{"name": "range", "metadata": b"\x00\x03abc"}]}),
    (apis.OFFSET_COMMIT, 8, {"group_id": "g", "generation_id_or_member_epoch": 3,
                             "member_id": "m-1", "group_instance_id": None,
                             "topics": [{"name": "orders", "partitions": [
                                 {"partition_index": 0, "committed_offset": 100,
                                  "committed_leader_epoch": -1, "committed_metadata": None},
                                 {"partition_index": 1, "committed_offset": 5,
                                  "committed_leader_epoch": 2, "committed_metadata": "meta"}]}]}),
    (apis.CREATE_TOPICS, 5, {"topics": [{"name": "new", "num_partitions": 3,
                                         "replication_factor": 1, "assignments": [],
                                         "configs": [{"name": "retention.ms", "value": "1000"},
                                                     {"name": "cleanup.policy", "value": None}]}],
                             "timeout_ms": 30000, "validate_only": False}),
    (apis.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "orders", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                           "timestamp": -3}]}]}),
    (apis.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": -1,
                                "producer_id": -1, "producer_epoch": -1}),
    (apis.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}),
    (apis.SYNC_GROUP, 5, {"group_id": "g", "generation_id": 1, "member_id": "m-1",
                          "group_instance_id": None, "protocol_type": "consumer",
                          "protocol_name": "range",
                          "assignments": [{"member_id": "m-1", "assignment": b"\x00\x01"}]}),
    (apis.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m-1",
                         "group_instance_id": None}),
    (apis.LEAVE_GROUP, 4, {"group_id": "g", "members": [{"member_id": "m-1",
                                                         "group_instance_id": None}]}),
    (apis.OFFSET_FETCH, 7, {"group_id": "g", "topics": None, "require_stable": True}),
    (apis.DELETE_TOPICS, 6, {"topics": [{"name": "old", "topic_id": uuid.UUID(int=0)}],
                             "timeout_ms": 1000}),
    (apis.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}),
    (apis.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00user\x00secret"}),
]


def _field(spec: StructSpec, attr: str):
    for f in spec.fields:
        if f.attr == attr:
            return f
    raise KeyError(attr)


def ours(spec: StructSpec, values: dict):
    kwargs = {}
    for attr, value in values.items():
        f = _field(spec, attr)
        if f.struct is not None and value is not None:
            value = (tuple(ours(f.struct, v) for v in value) if f.is_array
                     else ours(f.struct, value))
        elif f.is_array and value is not None:
            value = tuple(value)
        kwargs[attr] = value
    return spec.cls(**kwargs)


def theirs(cls, spec: StructSpec, values: dict, **extra):
    kwargs = {}
    for attr, value in values.items():
        f = _field(spec, attr)
        if f.struct is not None and value is not None:
            nested = getattr(cls, f.struct.name)
            value = ([theirs(nested, f.struct, v) for v in value] if f.is_array
                     else theirs(nested, f.struct, value))
        kwargs[attr] = value
    return cls(**kwargs, **extra)


def ids(cases):
    return [f"{apis.api_name(key)}-v{version}" for key, version, _ in cases]


@pytest.mark.parametrize(("api_key", "version", "values"), REQUESTS, ids=ids(REQUESTS))
def test_requests_of_kafka_python_decode_and_encode_identically(api_key, version, values):
    name = apis.api_name(api_key) + "Request"
    spec = message_spec(name).struct
    request = theirs(KP[name], spec, values, version=version)
    request.with_header(correlation_id=1234, client_id="oracle")
    frame = bytes(request.encode(header=True, framed=True))

    decoded = decode_request(frame[4:], strict=True)
    assert decoded.api_key == api_key and decoded.api_version == version
    assert decoded.correlation_id == 1234 and decoded.header.client_id == "oracle"
    assert decoded.body == ours(spec, values)
    for attr, value in values.items():  # the values themselves, not only our own defaults
        got = getattr(decoded.body, attr)
        if not isinstance(value, list):
            assert got == value, attr
    assert encode_request(api_key, version, 1234, ours(spec, values), client_id="oracle") == frame


RESPONSES = [
    (apis.API_VERSIONS, 0, {"error_code": 35, "api_keys": [
        {"api_key": 18, "min_version": 0, "max_version": 4}]}),
    (apis.API_VERSIONS, 3, {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
        {"api_key": 0, "min_version": 0, "max_version": 9},
        {"api_key": 18, "min_version": 0, "max_version": 4}]}),
    (apis.METADATA, 12, {"throttle_time_ms": 0, "brokers": [
        {"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "rill", "controller_id": 1, "topics": [
            {"error_code": 0, "name": "orders", "topic_id": TOPIC_ID, "is_internal": False,
             "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 1,
                             "leader_epoch": 0, "replica_nodes": [1], "isr_nodes": [1],
                             "offline_replicas": []}]}]}),  # authorized ops: the default
    (apis.PRODUCE, 9, {"throttle_time_ms": 0, "responses": [
        {"name": "orders", "partition_responses": [
            {"index": 0, "error_code": 0, "base_offset": 100, "log_append_time_ms": -1,
             "log_start_offset": 0, "record_errors": [], "error_message": None}]}]}),
    (apis.FETCH, 12, {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "orders", "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 10,
             "last_stable_offset": 10, "log_start_offset": 0, "aborted_transactions": None,
             "preferred_read_replica": -1, "records": BATCH}]}]}),
    (apis.JOIN_GROUP, 7, {"throttle_time_ms": 0, "error_code": 0, "generation_id": 1,
                          "protocol_type": "consumer", "protocol_name": "range",
                          "leader": "m-1", "member_id": "m-1", "members": [
                              {"member_id": "m-1", "group_instance_id": None,
                               "metadata": b"\x00\x01"}]}),
]


@pytest.mark.parametrize(("api_key", "version", "values"), RESPONSES, ids=ids(RESPONSES))
def test_responses_are_byte_identical_to_kafka_pythons(api_key, version, values):
    name = apis.api_name(api_key) + "Response"
    spec = message_spec(name).struct
    response = theirs(KP[name], spec, values, version=version)
    response.with_header(correlation_id=99)
    frame = bytes(response.encode(header=True, framed=True))
    assert encode_response(api_key, version, 99, ours(spec, values)) == frame
    decoded = KP[name].decode(frame[4:], version=version, header=True)
    assert decoded.header.correlation_id == 99
