"""The one error table of rill: wire status code, snake_case name, HTTP status, message.

Owns: every error the server can send and the SDK can raise. The codes and names are those of
the Iggy 0.4.x dialect (wire reference §5); each row becomes an exception class named in
CamelCase (``stream_id_not_found`` -> ``StreamIdNotFound``), so the SDK raises exactly the class
the server raised. Invariant: one code, one class, one name, everywhere.

Also owns how a message is filled in, for everyone (server, SDK, CLI): positional arguments
fill the template's ``{0}``, ``{1}`` ...; an error built from the bare code (the binary protocol
carries only the status) drops each placeholder with its phrase (``Stream with ID: {0} was not
found.`` -> ``Stream was not found.``), and ``error.about(subject)`` fills it from what the
request named (``{"stream": 99}`` -> ``Stream with ID 99 was not found.``; ``PLACEHOLDERS``
says which subject key fills which placeholder). A message never shows a literal ``{0}``.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

# (wire status, snake_case name, message template). Templates take positional arguments.
ERROR_TABLE: tuple[tuple[int, str, str], ...] = (
    (1, 'error', 'Error'),
    (2, 'invalid_configuration', 'Invalid configuration'),
    (3, 'invalid_command', 'Invalid command'),
    (4, 'invalid_format', 'Invalid format'),
    (5, 'feature_unavailable', 'Feature is unavailable'),
    (6, 'invalid_identifier', 'Invalid identifier'),
    (7, 'invalid_version', 'Invalid version: {0}'),
    (8, 'disconnected', 'Disconnected'),
    (9, 'cannot_establish_connection', 'Cannot establish connection'),
    (10, 'cannot_create_base_directory', 'Cannot create base directory, Path: {0}'),
    (11, 'cannot_create_runtime_directory', 'Cannot create runtime directory, Path: {0}'),
    (12, 'cannot_remove_runtime_directory', 'Cannot remove runtime directory, Path: {0}'),
    (13, 'cannot_create_state_directory', 'Cannot create state directory, Path: {0}'),
    (14, 'state_file_not_found', 'State file not found'),
    (15, 'state_file_corrupted', 'State file corrupted'),
    (16, 'invalid_state_entry_checksum', 'Invalid state entry checksum: {0}, expected: {1}, for index: {2}'),
    (19, 'cannot_open_database', 'Cannot open database, Path: {0}'),
    (20, 'resource_not_found', 'Resource with key: {0} was not found.'),
    (30, 'stale_client', 'Stale client'),
    (31, 'tcp_error', 'TCP error'),
    (32, 'quic_error', 'QUIC error'),
    (33, 'invalid_server_address', 'Invalid server address'),
    (34, 'invalid_client_address', 'Invalid client address'),
    (40, 'unauthenticated', 'Unauthenticated'),
    (41, 'unauthorized', 'Unauthorized'),
    (42, 'invalid_credentials', 'Invalid credentials'),
    (43, 'invalid_username', 'Invalid username'),
    (44, 'invalid_password', 'Invalid password'),
    (45, 'invalid_user_status', 'Invalid user status'),
    (46, 'user_already_exists', 'User already exists'),
    (47, 'user_inactive', 'User inactive'),
    (48, 'cannot_delete_user', 'Cannot delete user with ID: {0}'),
    (49, 'cannot_change_permissions', 'Cannot change permissions for user with ID: {0}'),
    (50, 'invalid_personal_access_token_name', 'Invalid personal access token name'),
    (51, 'personal_access_token_already_exists', 'Personal access token: {0} for user with ID: {1} already exists'),
    (52, 'personal_access_tokens_limit_reached', 'User with ID: {0} has reached the maximum number of personal access tokens: {1}'),
    (53, 'invalid_personal_access_token', 'Invalid personal access token'),
    (54, 'personal_access_token_expired', 'Personal access token: {0} for user with ID: {1} has expired.'),
    (55, 'users_limit_reached', 'Users limit reached.'),
    (61, 'not_connected', 'Not connected'),
    (63, 'client_shutdown', 'Client shutdown'),
    (64, 'invalid_tls_domain', 'Invalid TLS domain'),
    (65, 'invalid_tls_certificate_path', 'Invalid TLS certificate path'),
    (66, 'invalid_tls_certificate', 'Invalid TLS certificate'),
    (67, 'failed_to_add_certificate', 'Failed to add certificate'),
    (70, 'invalid_encryption_key', 'Invalid encryption key'),
    (71, 'cannot_encrypt_data', 'Cannot encrypt data'),
    (72, 'cannot_decrypt_data', 'Cannot decrypt data'),
    (73, 'invalid_jwt_algorithm', 'Invalid JWT algorithm: {0}'),
    (74, 'invalid_jwt_secret', 'Invalid JWT secret'),
    (75, 'jwt_missing', 'JWT is missing'),
    (76, 'cannot_generate_jwt', 'Cannot generate JWT'),
    (77, 'access_token_missing', 'Access token is missing'),
    (78, 'invalid_access_token', 'Invalid access token'),
    (80, 'invalid_size_bytes', 'Invalid size bytes'),
    (81, 'invalid_utf8', 'Invalid UTF-8'),
    (82, 'invalid_number_encoding', 'Invalid number encoding'),
    (83, 'invalid_boolean_value', 'Invalid boolean value'),
    (84, 'invalid_number_value', 'Invalid number value'),
    (100, 'client_not_found', 'Client with ID: {0} was not found.'),
    (101, 'invalid_client_id', 'Invalid client ID'),
    (206, 'connection_closed', 'Connection closed'),
    (209, 'cannot_parse_header_kind', 'Cannot parse header kind from {0}'),
    (300, 'http_response_error', 'HTTP response error, status: {0}, body: {1}'),
    (301, 'invalid_http_request', 'Invalid HTTP request'),
    (302, 'invalid_json_response', 'Invalid JSON response'),
    (303, 'invalid_bytes_response', 'Invalid bytes response'),
    (304, 'empty_response', 'Empty response'),
    (305, 'cannot_create_endpoint', 'Cannot create endpoint'),
    (306, 'cannot_parse_url', 'Cannot parse URL'),
    (1000, 'cannot_create_streams_directory', 'Cannot create streams directory, Path: {0}'),
    (1001, 'cannot_create_stream_directory', 'Cannot create stream with ID: {0} directory, Path: {1}'),
    (1002, 'cannot_create_stream_info', 'Failed to create stream info file for stream with ID: {0}'),
    (1003, 'cannot_update_stream_info', 'Failed to update stream info for stream with ID: {0}'),
    (1004, 'cannot_open_stream_info', 'Failed to open stream info file for stream with ID: {0}'),
    (1005, 'cannot_read_stream_info', 'Failed to read stream info file for stream with ID: {0}'),
    (1006, 'cannot_create_stream', 'Failed to create stream with ID: {0}'),
    (1007, 'cannot_delete_stream', 'Failed to delete stream with ID: {0}'),
    (1008, 'cannot_delete_stream_directory', 'Failed to delete stream directory with ID: {0}'),
    (1009, 'stream_id_not_found', 'Stream with ID: {0} was not found.'),
    (1010, 'stream_name_not_found', 'Stream with name: {0} was not found.'),
    (1011, 'stream_id_already_exists', 'Stream with ID: {0} already exists.'),
    (1012, 'stream_name_already_exists', 'Stream with name: {0} already exists.'),
    (1013, 'invalid_stream_name', 'Invalid stream name'),
    (1014, 'invalid_stream_id', 'Invalid stream ID'),
    (1015, 'cannot_read_streams', 'Cannot read streams'),
    (1016, 'missing_streams', 'Missing streams'),
    (1017, 'missing_topics', 'Missing topics for stream with ID: {0}'),
    (1018, 'missing_partitions', 'Missing partitions for topic with ID: {0} for stream with ID: {1}.'),
    (1019, 'invalid_topic_size', 'Max topic size cannot be lower than segment size. Max topic size: {0} < segment size: {1}.'),
    (2000, 'cannot_create_topics_directory', 'Cannot create topics directory for stream with ID: {0}, Path: {1}'),
    (2001, 'cannot_create_topic_directory', 'Failed to create directory for topic with ID: {0} for stream with ID: {1}, Path: {2}'),
    (2002, 'cannot_create_topic_info', 'Failed to create topic info file for topic with ID: {0} for stream with ID: {1}.'),
    (2003, 'cannot_update_topic_info', 'Failed to update topic info for topic with ID: {0} for stream with ID: {1}.'),
    (2004, 'cannot_open_topic_info', 'Failed to open topic info file for topic with ID: {0} for stream with ID: {1}.'),
    (2005, 'cannot_read_topic_info', 'Failed to read topic info file for topic with ID: {0} for stream with ID: {1}.'),
    (2006, 'cannot_create_topic', 'Failed to create topic with ID: {0} for stream with ID: {1}.'),
    (2007, 'cannot_delete_topic', 'Failed to delete topic with ID: {0} for stream with ID: {1}.'),
    (2008, 'cannot_delete_topic_directory', 'Failed to delete topic directory with ID: {0} for stream with ID: {1}, Path: {2}'),
    (2009, 'cannot_poll_topic', 'Cannot poll topic'),
    (2010, 'topic_id_not_found', 'Topic with ID: {0} for stream with ID: {1} was not found.'),
    (2011, 'topic_name_not_found', 'Topic with name: {0} for stream with ID: {1} was not found.'),
    (2012, 'topic_id_already_exists', 'Topic with ID: {0} for stream with ID: {1} already exists.'),
    (2013, 'topic_name_already_exists', 'Topic with name: {0} for stream with ID: {1} already exists.'),
    (2014, 'invalid_topic_name', 'Invalid topic name'),
    (2015, 'too_many_partitions', 'Too many partitions'),
    (2016, 'invalid_topic_id', 'Invalid topic ID'),
    (2017, 'cannot_read_topics', 'Cannot read topics for stream with ID: {0}'),
    (2018, 'invalid_replication_factor', 'Invalid replication factor'),
    (3000, 'cannot_create_partition', 'Cannot create partition with ID: {0} for stream with ID: {1} and topic with ID: {2}'),
    (3001, 'cannot_create_partitions_directory', 'Failed to create directory for partitions for stream with ID: {0} and topic with ID: {1}'),
    (3002, 'cannot_create_partition_directory', 'Failed to create directory for partition with ID: {0} for stream with ID: {1} and topic with ID: {2}'),
    (3003, 'cannot_open_partition_log_file', 'Cannot open partition log file'),
    (3004, 'cannot_read_partitions', 'Cannot read partitions directories.'),
    (3005, 'cannot_delete_partition', 'Failed to delete partition with ID: {0} for stream with ID: {1} and topic with ID: {2}'),
    (3006, 'cannot_delete_partition_directory', 'Failed to delete partition directory with ID: {0} for stream with ID: {1} and topic with ID: {2}'),
    (3007, 'partition_not_found', 'Partition with ID: {0} for topic with ID: {1} for stream with ID: {2} was not found.'),
    (3008, 'no_partitions', 'Topic with ID: {0} for stream with ID: {1} has no partitions.'),
    (3009, 'topic_full', 'Topic with ID: {0} for stream with ID: {1} has reached its maximum size'),
    (3010, 'cannot_delete_consumer_offsets_directory', 'Failed to delete consumer offsets directory for path: {0}'),
    (3011, 'cannot_delete_consumer_offset_file', 'Failed to delete consumer offset file for path: {0}'),
    (3012, 'cannot_create_consumer_offsets_directory', 'Failed to create consumer offsets directory for path: {0}'),
    (3020, 'cannot_read_consumer_offsets', 'Failed to read consumers offsets from path: {0}'),
    (4000, 'segment_not_found', 'Segment not found'),
    (4001, 'segment_closed', 'Segment with start offset: {0} of partition with ID: {1} is closed'),
    (4002, 'invalid_segment_size', 'Segment size is invalid'),
    (4003, 'cannot_create_segment_log_file', 'Failed to create segment log file for Path: {0}.'),
    (4004, 'cannot_create_segment_index_file', 'Failed to create segment index file for Path: {0}.'),
    (4005, 'cannot_create_segment_time_index_file', 'Failed to create segment time index file for Path: {0}.'),
    (4006, 'cannot_save_messages_to_segment', 'Cannot save messages to segment.'),
    (4007, 'cannot_save_index_to_segment', 'Cannot save index to segment.'),
    (4008, 'cannot_save_time_index_to_segment', 'Cannot save time index to segment.'),
    (4009, 'invalid_messages_count', 'Invalid messages count'),
    (4010, 'cannot_append_message', 'Cannot append message'),
    (4011, 'cannot_read_message', 'Cannot read message'),
    (4012, 'cannot_read_message_id', 'Cannot read message ID'),
    (4013, 'cannot_read_message_state', 'Cannot read message state'),
    (4014, 'cannot_read_message_timestamp', 'Cannot read message timestamp'),
    (4015, 'cannot_read_headers_length', 'Cannot read headers length'),
    (4016, 'cannot_read_headers_payload', 'Cannot read headers payload'),
    (4017, 'too_big_headers_payload', 'Too big headers payload'),
    (4018, 'invalid_header_key', 'Invalid header key'),
    (4019, 'invalid_header_value', 'Invalid header value'),
    (4020, 'cannot_read_message_length', 'Cannot read message length'),
    (4021, 'cannot_read_message_payload', 'Cannot read message payload'),
    (4022, 'too_big_message_payload', 'Too big message payload'),
    (4023, 'too_many_messages', 'Too many messages'),
    (4024, 'empty_message_payload', 'Empty message payload'),
    (4025, 'invalid_message_payload_length', 'Invalid message payload length'),
    (4026, 'cannot_read_message_checksum', 'Cannot read message checksum'),
    (4027, 'invalid_message_checksum', 'Invalid message checksum: {0}, expected: {1}, for offset: {2}'),
    (4028, 'invalid_key_value_length', 'Invalid key value length'),
    (4029, 'command_length_error', 'Command length error: {0}'),
    (4100, 'invalid_offset', 'Invalid offset: {0}'),
    (5000, 'consumer_group_id_not_found', 'Consumer group with ID: {0} for topic with ID: {1} was not found.'),
    (5001, 'consumer_group_id_already_exists', 'Consumer group with ID: {0} for topic with ID: {1} already exists.'),
    (5002, 'invalid_consumer_group_id', 'Invalid consumer group ID'),
    (5003, 'consumer_group_name_not_found', 'Consumer group with name: {0} for topic with ID: {1} was not found.'),
    (5004, 'consumer_group_name_already_exists', 'Consumer group with name: {0} for topic with ID: {1} already exists.'),
    (5005, 'invalid_consumer_group_name', 'Invalid consumer group name'),
    (5006, 'consumer_group_member_not_found', 'Consumer group member with ID: {0} for group with ID: {1} for topic with ID: {2} was not found.'),
    (5007, 'cannot_create_consumer_group_info', 'Failed to create consumer group info file for ID: {0} for topic with ID: {1} for stream with ID: {2}.'),
    (5008, 'cannot_delete_consumer_group_info', 'Failed to delete consumer group info file for ID: {0} for topic with ID: {1} for stream with ID: {2}.'),
    (6000, 'missing_base_offset_retained_message_batch', 'Base offset is missing'),
    (6001, 'missing_last_offset_delta_retained_message_batch', 'Last offset delta is missing'),
    (6002, 'missing_max_timestamp_retained_message_batch', 'Max timestamp is missing'),
    (6003, 'missing_length_retained_message_batch', 'Length is missing'),
    (6004, 'missing_payload_retained_message_batch', 'Payload is missing'),
    (7000, 'cannot_read_batch_base_offset', 'Cannot read batch base offset'),
    (7001, 'cannot_read_batch_length', 'Cannot read batch length'),
    (7002, 'cannot_read_last_offset_delta', 'Cannot read batch last offset delta'),
    (7003, 'cannot_read_max_timestamp', 'Cannot read batch maximum timestamp'),
    (7004, 'cannot_read_batch_payload', 'Cannot read batch payload'),
    (8000, 'invalid_connection_string', 'Invalid connection string'),
    (9000, 'snapshot_file_completion_failed', 'Snapshot file completion failed'),
    (10000, 'cannot_serialize_resource', 'Cannot serialize resource'),
    (10001, 'cannot_deserialize_resource', 'Cannot deserialize resource'),
    (10002, 'cannot_read_file', 'Cannot read file'),
    (10003, 'cannot_read_file_metadata', 'Cannot read file metadata'),
    (10004, 'cannot_seek_file', 'Cannot seek file'),
    (10005, 'cannot_append_to_file', 'Cannot append to file'),
    (10006, 'cannot_write_to_file', 'Cannot write to file'),
    (10007, 'cannot_overwrite_file', 'Cannot overwrite file'),
    (10008, 'cannot_delete_file', 'Cannot delete file'),
    (10009, 'cannot_sync_file', 'Cannot sync file'),
    (10010, 'cannot_read_index_offset', 'Cannot read index offset'),
    (10011, 'cannot_read_index_position', 'Cannot read index position'),
    (10012, 'cannot_read_index_timestamp', 'Cannot read index timestamp'),
    # rill extensions (docs/extensions.md): staged appends
    (11000, 'staged_messages_not_found', 'Staged messages of producer: {0}, batch: {1}, task: {2}, attempt: {3} were not found'),
    (11001, 'staged_messages_count_mismatch', 'Staged messages count mismatch of producer: {0}, batch: {1}, task: {2}, attempt: {3}, staged: {4}, expected: {5}'),
    # (no placeholders: the wire carries only the code, and this is what an SDK user reads)
    (11002, 'producer_owner_mismatch', 'Producer belongs to another owner: its batches were committed by another writer (for Spark: another query or checkpoint); use a new producer id, or the original owner'),
    # rill: login throttling (auth/throttling.py)
    (11100, 'login_throttled', 'Too many failed logins: try again in {0} s'),
    # rill: a replicated cluster (server/cluster/, core/cluster_view.py)
    (11200, 'not_leader_for_partition', 'This node does not lead partition: {0} of topic: {1}; its leader is node: {2}'),
    (11201, 'leader_not_available', 'Partition: {0} of topic: {1} has no leader now (too few of its replicas are live)'),
    (11202, 'not_enough_replicas', 'Not enough in-sync replicas to acknowledge the write: {0} of the {1} required'),
    (11203, 'replication_timed_out', 'The records were written on the leader but not copied to every in-sync replica in time: they may still be committed'),
    (11204, 'fenced_leader_epoch', 'Leader epoch: {0} is older than the partition leader epoch: {1}'),
    (11205, 'unknown_leader_epoch', 'Leader epoch: {0} is newer than the partition leader epoch: {1} this node knows'),
    (11206, 'cluster_unavailable', 'The cluster cannot change its metadata now: {0}'),
)

# HTTP status for codes that are not 400 (wire reference §8.3).
_HTTP_STATUS: dict[str, int] = {
    "stream_id_not_found": 404,
    "topic_id_not_found": 404,
    "partition_not_found": 404,
    "segment_not_found": 404,
    "client_not_found": 404,
    "consumer_group_id_not_found": 404,
    "consumer_group_name_not_found": 404,
    "consumer_group_member_not_found": 404,
    "resource_not_found": 404,
    "unauthenticated": 401,
    "unauthorized": 403,
    "login_throttled": 429,
    "not_leader_for_partition": 421,
    "leader_not_available": 503,
    "not_enough_replicas": 503,
    "replication_timed_out": 504,
    "cluster_unavailable": 503,
}


# error name -> the subject key that fills each of its placeholders ({0}, {1}, ...). Subject keys
# name what a request is about: stream, topic, partition (an ID or a name, as the request gave
# it), stream_id/stream_name (the ones being created), group, user, token_name, ...
PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "stream_id_not_found": ("stream",),
    "stream_name_not_found": ("stream",),
    "stream_id_already_exists": ("stream_id",),
    "stream_name_already_exists": ("stream_name",),
    "cannot_create_stream": ("stream",),
    "cannot_delete_stream": ("stream",),
    "topic_id_not_found": ("topic", "stream"),
    "topic_name_not_found": ("topic", "stream"),
    "topic_id_already_exists": ("topic_id", "stream"),
    "topic_name_already_exists": ("topic_name", "stream"),
    "cannot_create_topic": ("topic", "stream"),
    "cannot_delete_topic": ("topic", "stream"),
    "cannot_read_topics": ("stream",),
    "missing_topics": ("stream",),
    "missing_partitions": ("topic", "stream"),
    "no_partitions": ("topic", "stream"),
    "topic_full": ("topic", "stream"),
    "partition_not_found": ("partition", "topic", "stream"),
    "cannot_create_partition": ("partition", "stream", "topic"),
    "cannot_delete_partition": ("partition", "stream", "topic"),
    "consumer_group_id_not_found": ("group", "topic"),
    "consumer_group_name_not_found": ("group", "topic"),
    "consumer_group_id_already_exists": ("group_id", "topic"),
    "consumer_group_name_already_exists": ("group_name", "topic"),
    "consumer_group_member_not_found": ("member", "group", "topic"),
    "cannot_delete_user": ("user",),
    "cannot_change_permissions": ("user",),
    "personal_access_token_already_exists": ("token_name", "user"),
    "personal_access_tokens_limit_reached": ("user",),
    "personal_access_token_expired": ("token_name", "user"),
    "resource_not_found": ("resource",),
    "client_not_found": ("client",),
    "invalid_offset": ("offset",),
    "staged_messages_not_found": ("producer", "batch", "task", "attempt"),
    "staged_messages_count_mismatch": ("producer", "batch", "task", "attempt"),
}

# A placeholder and the phrase that introduces it: " with ID: {0}", ", Path: {0}", ": {0}" ...
# Without a value the whole phrase goes; with one, "with ID"/"with name" follows the value.
_LABELS = (
    r"with (?:ID|name|key|start offset)|for (?:ID|index|offset)|(?:for |from )?[Pp]ath|"
    r"of producer|batch|task|attempt|staged|expected|status|body|Max topic size|< segment size|"
    r"from|in"
)
_PLACEHOLDER = re.compile(
    rf"(?P<lead>,\s*|\s+)?(?P<label>{_LABELS})?(?P<colon>:)?\s*\{{(?P<index>\d+)\}}(?P<unit>\s+s\b)?"
)
_TIDY = ((re.compile(r"\s+([.,:])"), r"\1"), (re.compile(r"\.\.+"), "."),
         (re.compile(r"\s{2,}"), " "), (re.compile(r"[,:]\s*$"), ""))


def fill(template: str, values: Sequence[Any]) -> str:
    """``template`` with ``values[n]`` in place of ``{n}``; a missing (None or "") value drops
    its placeholder together with the phrase that introduces it."""

    def replace(match: re.Match[str]) -> str:
        index = int(match.group("index"))
        value = values[index] if index < len(values) else None
        if value is None or value == "":
            if match.group("label") is None and match.group("lead"):
                return match.group("lead").rstrip(", ") and " "
            return ""
        lead, label = match.group("lead") or "", match.group("label")
        if label in ("with ID", "with name"):
            kind = "ID" if isinstance(value, int) or str(value).isdigit() else "name"
            return f" with {kind} {value}"
        if label == "with key":
            return f" with key {value}"
        return f"{lead}{label or ''}{match.group('colon') or ''} {value}{match.group('unit') or ''}"

    text = _PLACEHOLDER.sub(replace, template)
    for pattern, replacement in _TIDY:
        text = pattern.sub(replacement, text)
    return text.strip()


class RillError(Exception):
    """Base of every rill error. ``code`` is the wire status; ``name`` the snake_case name."""

    code: int = 1
    name: str = "error"
    template: str = "Error"
    http_status: int = 400

    def __init__(self, *args: Any, reason: str | None = None, field: str | None = None) -> None:
        self.args_values = args
        self.field = field
        #: True while the message comes from the bare code (nothing filled in yet)
        self.bare = reason is None and not args
        if reason is None:
            try:
                reason = self.template.format(*args) if args else fill(self.template, ())
            except IndexError:
                reason = fill(self.template, args)
        self.reason = reason
        super().__init__(reason)

    def about(self, subject: Mapping[str, Any]) -> RillError:
        """Fill a bare error's message from what the request named (``{"stream": 99}``); an
        error that already has its message is left as it is. Returns the error itself."""
        if self.bare:
            keys = PLACEHOLDERS.get(self.name, ())
            self.reason = fill(self.template, [subject.get(key) for key in keys])
            self.args = (self.reason,)
            self.bare = False
        return self

    def __reduce__(self):  # keep pickling (multiprocessing, Spark) faithful
        return (_rebuild, (self.code, self.reason, self.field))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, reason={self.reason!r})"


def _rebuild(code: int, reason: str, field: str | None) -> RillError:
    return error_class(code)(reason=reason, field=field)


def _class_name(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


_BY_CODE: dict[int, type[RillError]] = {}
_BY_NAME: dict[str, type[RillError]] = {}

for _code, _name, _template in ERROR_TABLE:
    _cls = type(
        _class_name(_name),
        (RillError,),
        {
            "code": _code,
            "name": _name,
            "template": _template,
            "http_status": _HTTP_STATUS.get(_name, 400),
            "__module__": __name__,
            "__doc__": f"Wire status {_code} ``{_name}``.",
        },
    )
    globals()[_cls.__name__] = _cls
    _BY_CODE[_code] = _cls
    _BY_NAME[_name] = _cls


class LeaderSteppedDown(_BY_NAME["replication_timed_out"]):  # type: ignore[misc]
    """An acks=all write appended on a leader that stopped leading before every in-sync replica
    held it: its outcome is unknown (a replica that copied it may lead now and keep it). On the
    wire it is ``replication_timed_out`` for Iggy and HTTP and REPLICA_ACK_TIMEOUT for TANK, so
    no proxy, redirect or client sends it again to the new leader; Kafka answers
    NOT_LEADER_OR_FOLLOWER, as Kafka does (an idempotent producer's retry is deduplicated)."""

    def __init__(self, node_id: int, partition_id: int, leader: int | None) -> None:
        super().__init__(reason=(
            f"node {node_id} stopped leading partition {partition_id} (its leader is now "
            f"{leader if leader is not None else 'none'}) while the records waited for the "
            f"in-sync replicas: they may still be committed"))


class LeaderAnswerLost(_BY_NAME["replication_timed_out"]):  # type: ignore[misc]
    """A request this node forwarded to a partition's leader (the Iggy proxy) was sent, but
    the leader's answer never came: a write may have been applied, so its outcome is unknown
    (``replication_timed_out`` on the wire), never "leader not available", which a client
    would take for "not written" and send again."""

    def __init__(self, node_id: int, cause: object) -> None:
        super().__init__(reason=(
            f"node {node_id}, the partition's leader, was sent the request but its answer was "
            f"lost ({cause}): it may have been applied"))


def error_class(code: int) -> type[RillError]:
    """The exception class for a wire status; unknown codes map to a plain RillError subclass."""
    cls = _BY_CODE.get(code)
    if cls is None:
        cls = type(f"UnknownError{code}", (RillError,), {"code": code, "name": f"error_{code}"})
        _BY_CODE[code] = cls
    return cls


def error_by_name(name: str) -> type[RillError]:
    return _BY_NAME[name]


def from_status(code: int, reason: str | None = None) -> RillError:
    """Build the exception the server meant by ``code`` (used by the SDK)."""
    return error_class(code)(reason=reason)


def __getattr__(name: str) -> type[RillError]:  # for type checkers / late lookups
    for cls in _BY_CODE.values():
        if cls.__name__ == name:
            return cls
    raise AttributeError(name)
