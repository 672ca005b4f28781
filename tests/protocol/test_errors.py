"""The error table: classes by code, HTTP statuses (wire §8.3), pickling."""

from __future__ import annotations

import pickle

from rill import errors


def test_error_class_by_code() -> None:
    assert errors.error_class(1009) is errors.StreamIdNotFound
    assert errors.error_class(3) is errors.InvalidCommand
    assert errors.error_by_name("topic_id_not_found") is errors.TopicIdNotFound
    assert errors.StreamIdNotFound.code == 1009 and errors.StreamIdNotFound.name == "stream_id_not_found"


def test_codes_and_names_are_unique() -> None:
    codes = [row[0] for row in errors.ERROR_TABLE]
    names = [row[1] for row in errors.ERROR_TABLE]
    assert len(set(codes)) == len(codes) and len(set(names)) == len(names)


def test_http_statuses() -> None:
    not_found = (
        "stream_id_not_found", "topic_id_not_found", "partition_not_found", "segment_not_found",
        "client_not_found", "consumer_group_id_not_found", "consumer_group_name_not_found",
        "consumer_group_member_not_found", "resource_not_found",
    )
    for name in not_found:
        assert errors.error_by_name(name).http_status == 404, name
    assert errors.Unauthenticated.http_status == 401
    assert errors.Unauthorized.http_status == 403
    assert errors.LoginThrottled.http_status == 429
    for name in ("stream_name_not_found", "topic_name_not_found", "invalid_command", "invalid_stream_name"):
        assert errors.error_by_name(name).http_status == 400, name
    cluster = {"not_leader_for_partition": 421, "leader_not_available": 503,
               "not_enough_replicas": 503, "replication_timed_out": 504,
               "cluster_unavailable": 503}
    for name, status in cluster.items():
        assert errors.error_by_name(name).http_status == status, name
    assert sum(1 for _, name, _ in errors.ERROR_TABLE
               if errors.error_by_name(name).http_status != 400) == 12 + len(cluster)


def test_message_template() -> None:
    error = errors.StreamIdNotFound(7)
    assert str(error) == "Stream with ID: 7 was not found."
    assert isinstance(error, errors.RillError)


def test_pickle_round_trip() -> None:
    error = errors.TopicIdNotFound(2, 1, field="topic_id")
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is errors.TopicIdNotFound
    assert clone.reason == error.reason and clone.field == "topic_id" and clone.code == 2010


def test_unknown_code() -> None:
    cls = errors.error_class(123456)
    assert cls.code == 123456 and issubclass(cls, errors.RillError)
    assert errors.from_status(1009).code == 1009


# a value for every subject key errors.PLACEHOLDERS uses (IDs and names alike)
_SUBJECT = {
    "stream": 1, "stream_id": 1, "stream_name": "orders", "topic": "eu", "topic_id": 2,
    "topic_name": "eu", "partition": 3, "group": 4, "group_id": 4, "group_name": "readers",
    "member": 5, "user": "bob", "token_name": "ci", "resource": "x", "client": 6, "offset": 7,
    "producer": "p", "batch": 8, "task": 9, "attempt": 0,
}


def _readable(text: str) -> bool:
    return bool(text.strip()) and "{" not in text and "}" not in text and "  " not in text


def test_every_error_built_from_the_bare_code_has_a_readable_message() -> None:
    for code, name, _ in errors.ERROR_TABLE:
        bare = errors.from_status(code)
        assert _readable(str(bare)), (code, str(bare))
        assert _readable(errors.from_status(code).about({}).reason), code
        filled = errors.from_status(code).about(_SUBJECT)
        assert _readable(str(filled)) and _readable(filled.reason), (code, str(filled))
        assert not filled.bare


def test_every_placeholder_of_a_filled_row_is_named_by_its_subject() -> None:
    for code, name, template in errors.ERROR_TABLE:
        keys = errors.PLACEHOLDERS.get(name, ())
        assert set(keys) <= set(_SUBJECT), name
        filled = str(errors.from_status(code).about(_SUBJECT))
        for index, key in enumerate(keys):
            if "{%d}" % index in template:
                assert str(_SUBJECT[key]) in filled, (name, filled)


def test_missing_values_drop_their_phrase() -> None:
    assert str(errors.StreamNameAlreadyExists()) == "Stream already exists."
    assert str(errors.PartitionNotFound()) == "Partition for topic for stream was not found."
    assert str(errors.ResourceNotFound()) == "Resource was not found."
    assert str(errors.CannotCreateBaseDirectory()) == "Cannot create base directory"
    assert str(errors.InvalidStateEntryChecksum()) == "Invalid state entry checksum"
    assert str(errors.PartitionNotFound().about({"partition": 3, "stream": "s"})) == (
        "Partition with ID 3 for topic for stream with name s was not found.")


def test_about_fills_a_bare_error_only() -> None:
    assert str(errors.StreamNameAlreadyExists().about({"stream_name": "orders"})) == (
        "Stream with name orders already exists.")
    assert str(errors.StreamIdNotFound(7).about({"stream": 8})) == "Stream with ID: 7 was not found."
    given = errors.InvalidCommand(reason="Invalid command: header truncated")
    assert given.about({"stream": 1}).reason == "Invalid command: header truncated"
    assert str(errors.InvalidOffset().about({"offset": 5})) == "Invalid offset: 5"
