"""The Kafka APIs rill speaks and the version ranges it advertises (kafka-notes §2.4).

Owns: the one table (key -> (min, max)) that ApiVersions advertises and the request decoder
enforces; widening a range is a one-line change here (the codec is generated from the schemas).

Two deliberate departures from a Kafka 4.0 broker, both from the notes:
* Produce is advertised from 0 (KAFKA-18659: librdkafka tests Produce 0..0 to decide whether
  compressed batches are allowed) and v0-2 are decoded too: they are the seed's dialect
  (legacy MessageSet). Kafka 4.0 advertises 0 but rejects 0-2.
* Fetch 0-3 and ListOffsets 0 are accepted and advertised for the seed's v0 requests (Fetch
  "4-12 (0-3 too, for the seed's dialect, down-converting)"; the seed's Offsets v0). Clients
  choose ``min(client max, broker max)``, so a lower minimum changes nothing for modern
  clients; Kafka before 4.0 advertised these minima as well.
* OffsetCommit 0-1 and OffsetFetch 0 (0.8's ZooKeeper-backed offsets; Kafka 4.0's schemas
  start at 2 and 1): the schemas still describe their fields (GroupId only in v0, v1's
  CommitTimestamp), so widening the table is all the codec needs.
* JoinGroup 0-1, CreateTopics 0-1, DeleteTopics 0 and DescribeConfigs 0 (Kafka 0.9-1.0's,
  removed by Kafka 4.0, KIP-896; what Sarama and kafka-go as Debian ships them send): the
  schemas still describe their fields (JoinGroup's RebalanceTimeoutMs from v1, CreateTopics'
  ValidateOnly from v1 and ErrorMessage from v1, DescribeConfigs v0's IsDefault), so every
  API is served from the lowest version Kafka ever defined for it.
Fetch stays capped at 12: v13+ carries topic ids instead of names (§2.2).
"""

from __future__ import annotations

from typing import NamedTuple

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
SASL_HANDSHAKE = 17
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23
DESCRIBE_CONFIGS = 32
SASL_AUTHENTICATE = 36
CREATE_PARTITIONS = 37


class Api(NamedTuple):
    key: int
    name: str  # the schema's name without Request/Response
    min_version: int
    max_version: int


APIS: tuple[Api, ...] = (
    Api(API_VERSIONS, "ApiVersions", 0, 4),
    Api(METADATA, "Metadata", 0, 12),
    Api(PRODUCE, "Produce", 0, 9),
    Api(FETCH, "Fetch", 0, 12),
    Api(LIST_OFFSETS, "ListOffsets", 0, 7),
    Api(INIT_PRODUCER_ID, "InitProducerId", 0, 4),
    Api(OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 2, 4),
    Api(FIND_COORDINATOR, "FindCoordinator", 0, 3),
    Api(JOIN_GROUP, "JoinGroup", 0, 7),
    Api(SYNC_GROUP, "SyncGroup", 0, 5),
    Api(HEARTBEAT, "Heartbeat", 0, 4),
    Api(LEAVE_GROUP, "LeaveGroup", 0, 4),
    Api(OFFSET_COMMIT, "OffsetCommit", 0, 8),
    Api(OFFSET_FETCH, "OffsetFetch", 0, 7),
    Api(DESCRIBE_GROUPS, "DescribeGroups", 0, 5),
    Api(LIST_GROUPS, "ListGroups", 0, 4),
    Api(CREATE_TOPICS, "CreateTopics", 0, 7),
    Api(DELETE_TOPICS, "DeleteTopics", 0, 6),
    Api(DESCRIBE_CONFIGS, "DescribeConfigs", 0, 4),
    Api(CREATE_PARTITIONS, "CreatePartitions", 0, 3),
    Api(SASL_HANDSHAKE, "SaslHandshake", 0, 1),
    Api(SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2),
)

BY_KEY: dict[int, Api] = {api.key: api for api in APIS}

# key -> (min, max): what ApiVersions advertises and what the request decoder accepts
SUPPORTED: dict[int, tuple[int, int]] = {api.key: (api.min_version, api.max_version)
                                         for api in APIS}


def api_name(api_key: int) -> str:
    return BY_KEY[api_key].name
