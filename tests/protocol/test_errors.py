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
    assert sum(1 for _, name, _ in errors.ERROR_TABLE if errors.error_by_name(name).http_status != 400) == 12


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
