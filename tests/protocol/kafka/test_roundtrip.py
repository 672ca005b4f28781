"""Every advertised (API, version), request and response: generated values (nulls, empties,
tagged fields at and off their defaults, unknown tags) encode and decode back equal, and
encode again to the same bytes; whole frames with their headers round-trip too."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rill.protocol.kafka import apis
from rill.protocol.kafka.codec import (
    api_codec,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

from .strategies import message_strategy

CASES = [(api.key, api.name, version) for api in apis.APIS
         for version in range(api.min_version, api.max_version + 1)]
IDS = [f"{name}-v{version}" for _, name, version in CASES]
EXAMPLES = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_the_table_is_the_one_of_the_notes():
    assert len(apis.APIS) == 22  # and OffsetForLeaderEpoch, served in a cluster (issue 30)
    assert len(CASES) == sum(high - low + 1 for low, high in apis.SUPPORTED.values())


@pytest.mark.parametrize(("api_key", "name", "version"), CASES, ids=IDS)
@EXAMPLES
@given(data=st.data())
def test_request_round_trip(api_key, name, version, data):
    codec = api_codec(api_key, version).request
    value = data.draw(message_strategy(name + "Request", version))
    encoded = codec.encode(value)
    decoded = codec.decode(encoded)
    assert decoded == value
    assert codec.encode(decoded) == encoded
    client_id = data.draw(st.none() | st.text(max_size=8))
    frame = encode_request(api_key, version, 77, value, client_id=client_id)
    request = decode_request(frame[4:], strict=True)
    assert (request.api_key, request.api_version, request.correlation_id) == (api_key, version, 77)
    assert request.header.client_id == client_id
    assert request.body == value
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4


@pytest.mark.parametrize(("api_key", "name", "version"), CASES, ids=IDS)
@EXAMPLES
@given(data=st.data())
def test_response_round_trip(api_key, name, version, data):
    codec = api_codec(api_key, version).response
    value = data.draw(message_strategy(name + "Response", version))
    encoded = codec.encode(value)
    decoded = codec.decode(encoded)
    assert decoded == value
    assert codec.encode(decoded) == encoded
    frame = encode_response(api_key, version, -5, value)
    response = decode_response(api_key, version, frame[4:])
    assert response.correlation_id == -5 and response.body == value
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4


def test_null_and_empty_differ_on_the_wire():
    from rill.protocol.kafka.messages import MetadataRequest

    codec = api_codec(apis.METADATA, 12).request
    null, empty = MetadataRequest(topics=None), MetadataRequest(topics=())
    assert codec.encode(null) != codec.encode(empty)
    assert codec.decode(codec.encode(null)).topics is None
    assert codec.decode(codec.encode(empty)).topics == ()
    old = api_codec(apis.METADATA, 4).request  # int32 lengths: -1 vs 0
    assert old.encode(null)[:4] == b"\xff\xff\xff\xff"
    assert old.encode(empty)[:4] == b"\x00\x00\x00\x00"


class _Part:
    """A stand-in for a part the codec must not look into (a server's file region): only
    ``len()``."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)


@pytest.mark.parametrize("version", [4, 12])  # a length prefix int32, then a compact one
def test_records_given_as_parts_are_framed_uncopied(version):
    from rill.protocol.kafka import response_class
    from rill.protocol.kafka.codec import encode_response_parts

    Fetch = response_class(apis.FETCH)

    def response(records):
        partition = Fetch.FetchableTopicResponse.PartitionData(
            partition_index=0, error_code=0, high_watermark=9, last_stable_offset=9,
            log_start_offset=0, aborted_transactions=(), preferred_read_replica=-1,
            records=records)
        return Fetch(throttle_time_ms=0, error_code=0, session_id=0, responses=(
            Fetch.FetchableTopicResponse(topic="t", partitions=(partition,)),))

    pieces = [b"first batch ", b"x" * 300, b" last batch"]
    middle = _Part(pieces[1])
    parts = encode_response_parts(apis.FETCH, version, 3, response([pieces[0], middle,
                                                                    pieces[2]]))
    assert any(part is middle for part in parts)  # handed on as it is
    frame = b"".join(part.data if part is middle else part for part in parts)
    assert frame == encode_response(apis.FETCH, version, 3, response(b"".join(pieces)))
    body = decode_response(apis.FETCH, version, frame[4:]).body
    assert bytes(body.responses[0].partitions[0].records) == b"".join(pieces)
    assert encode_response(apis.FETCH, version, 3, response(tuple(pieces))) == frame
