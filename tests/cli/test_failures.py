"""Error lines and exit codes (in process: the wording is a table, test it as one)."""

from __future__ import annotations

import pytest

from rill import errors
from rill.cli.failures import EXIT_CONNECTION, EXIT_ERROR, describe, exit_code


@pytest.mark.parametrize("error, subject, line", [
    (errors.StreamIdNotFound(), {"stream": 99}, "stream with ID 99 was not found (1009 stream_id_not_found)"),
    (errors.StreamNameNotFound(), {"stream": "orders"},
     "stream with name orders was not found (1010 stream_name_not_found)"),
    (errors.TopicIdNotFound(), {"stream": 1, "topic": 2},
     "topic with ID 2 for stream with ID 1 was not found (2010 topic_id_not_found)"),
    (errors.PartitionNotFound(), {"stream": "s", "topic": "t", "partition": 3},
     "partition with ID 3 for topic with name t for stream with name s was not found (3007 partition_not_found)"),
    (errors.InvalidOffset(), {"offset": 5}, "invalid offset: 5 (4100 invalid_offset)"),
    (errors.ConsumerGroupMemberNotFound(), {"group": 5, "topic": 1},
     "consumer group member for group with ID 5 for topic with ID 1 was not found "
     "(5006 consumer_group_member_not_found)"),
    (errors.ResourceNotFound(), {"resource_label": "user bob"}, "user bob was not found (20 resource_not_found)"),
    (errors.InvalidJwtAlgorithm(), {}, "invalid JWT algorithm (73 invalid_jwt_algorithm)"),
    (errors.FeatureUnavailable(), {}, "this server does not implement the command yet (5 feature_unavailable)"),
])
def test_error_lines_fill_in_what_the_command_line_named(error, subject, line):
    assert describe(error, subject) == line


def test_connection_errors():
    refused = errors.CannotEstablishConnection()
    refused.__cause__ = ConnectionRefusedError(111, "Connect call failed")
    assert describe(refused, {"address": "127.0.0.1:8090"}) == "cannot connect to 127.0.0.1:8090 (connection refused)"
    assert exit_code(refused) == EXIT_CONNECTION
    assert exit_code(errors.Disconnected()) == EXIT_CONNECTION
    assert describe(errors.Disconnected(), {"address": "h:1"}) == "connection to h:1 lost (8 disconnected)"
    assert exit_code(errors.StreamIdNotFound()) == EXIT_ERROR


def test_reasons_built_by_the_sdk_are_kept():
    error = errors.InvalidCommand(reason="Invalid command: polled message header truncated")
    assert describe(error) == "invalid command: polled message header truncated (3 invalid_command)"
