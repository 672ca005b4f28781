"""The traps of kafka-notes §9 (and §2.1) a codec can hold: header versions, the ApiVersions
answers, Produce advertised from 0, Fetch capped below topic ids, acks=0 without response."""

from __future__ import annotations

import struct

import pytest

from rill.protocol.kafka import apis
from rill.protocol.kafka.api_versions import (
    api_versions_body,
    api_versions_response,
    api_versions_unsupported_response,
)
from rill.protocol.kafka.codec import (
    api_codec,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
    response_expected,
    response_header_version,
)
from rill.protocol.kafka.errors import ErrorCode, UnsupportedVersion
from rill.protocol.kafka.messages import (
    ApiVersionsRequest,
    HeartbeatResponse,
    ProduceRequest,
)

FLEXIBLE_FROM = {18: 3, 3: 9, 0: 9, 1: 12, 2: 6, 22: 2, 10: 3, 11: 6, 14: 4, 12: 4, 13: 4, 8: 8,
                 9: 6, 15: 5, 16: 3, 19: 5, 20: 4, 32: 4, 37: 2, 17: None, 36: 2,
                 23: 4}  # §2.4 (23, OffsetForLeaderEpoch: in a cluster)


def test_the_advertised_table():
    assert apis.SUPPORTED[apis.PRODUCE] == (0, 9)  # from 0: KAFKA-18659
    assert apis.SUPPORTED[apis.FETCH][1] == 12  # v13+ carries topic ids
    assert apis.SUPPORTED[apis.API_VERSIONS] == (0, 4)
    assert apis.SUPPORTED[apis.METADATA] == (0, 12)
    assert set(apis.SUPPORTED) == set(FLEXIBLE_FROM)


@pytest.mark.parametrize("api", apis.APIS, ids=lambda api: api.name)
def test_header_versions(api):
    flexible_from = FLEXIBLE_FROM[api.key]
    for version in range(api.min_version, api.max_version + 1):
        flexible = flexible_from is not None and version >= flexible_from
        assert api_codec(api.key, version).flexible == flexible
        assert request_header_version(api.key, version) == (2 if flexible else 1)
        expected = 1 if flexible and api.key != apis.API_VERSIONS else 0
        assert response_header_version(api.key, version) == expected


def test_request_header_v2_keeps_a_two_byte_client_id_then_tags():
    frame = encode_request(apis.HEARTBEAT, 4, 7, api_codec(12, 4).request.cls(), client_id="ab")
    assert frame[4:17] == struct.pack(">hhih", 12, 4, 7, 2) + b"ab" + b"\x00"
    v1 = encode_request(apis.HEARTBEAT, 3, 7, api_codec(12, 3).request.cls(), client_id=None)
    assert v1[4:14] == struct.pack(">hhih", 12, 3, 7, -1)  # null client id, no tags


def test_response_header_v1_has_tags_v0_not():
    assert encode_response(apis.HEARTBEAT, 4, 7, HeartbeatResponse())[4:9] == b"\x00\x00\x00\x07\x00"
    assert encode_response(apis.HEARTBEAT, 3, 7, HeartbeatResponse()) == \
        struct.pack(">iiih", 10, 7, 0, 0)  # size, correlation id, throttle, error


@pytest.mark.parametrize("version", range(5))
def test_api_versions_answer(version):
    frame = api_versions_response(version, 9)
    body = api_versions_body()
    entries = b"".join(struct.pack(">hhh", key, low, high) + (b"\x00" if version >= 3 else b"")
                       for key, (low, high) in sorted(apis.SUPPORTED.items()))
    count = len(apis.SUPPORTED)
    if version >= 3:  # compact array, throttle, and an EMPTY tagged-field section
        expected = b"\x00\x00" + bytes([count + 1]) + entries + b"\x00\x00\x00\x00" + b"\x00"
    else:
        expected = b"\x00\x00" + struct.pack(">i", count) + entries
        if version >= 1:
            expected += b"\x00\x00\x00\x00"
    # header v0 at every version: the correlation id, no tagged fields
    assert frame == struct.pack(">ii", 4 + len(expected), 9) + expected
    decoded = decode_response(apis.API_VERSIONS, version, frame[4:]).body
    assert decoded.api_keys == body.api_keys and decoded.tagged_fields is None


def test_an_unknown_api_versions_version_is_answered_in_v0():
    request = encode_request(apis.API_VERSIONS, 4, 31, ApiVersionsRequest(
        client_software_name="x", client_software_version="1"))
    future = request[:6] + struct.pack(">h", 9) + request[8:]  # a version rill does not know
    with pytest.raises(UnsupportedVersion) as caught:
        decode_request(future[4:])
    answer = api_versions_unsupported_response(caught.value.correlation_id)
    response = decode_response(apis.API_VERSIONS, 0, answer[4:])
    assert response.correlation_id == 31
    assert response.body.error_code == ErrorCode.UNSUPPORTED_VERSION == 35
    entries = {e.api_key: (e.min_version, e.max_version) for e in response.body.api_keys}
    assert entries == apis.SUPPORTED and entries[apis.API_VERSIONS] == (0, 4)
    # v0 layout: correlation id, error code, int32 count (no compact lengths, no throttle)
    assert answer[4:14] == struct.pack(">ihi", 31, 35, len(apis.SUPPORTED))
    assert len(answer) == 4 + 10 + 6 * len(apis.SUPPORTED)


def test_acks_zero_expects_no_response():
    assert not response_expected(apis.PRODUCE, ProduceRequest(acks=0))
    assert response_expected(apis.PRODUCE, ProduceRequest(acks=1))
    assert response_expected(apis.PRODUCE, ProduceRequest(acks=-1))
    assert response_expected(apis.METADATA, api_codec(3, 12).request.cls())
