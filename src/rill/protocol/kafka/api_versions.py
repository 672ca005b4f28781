"""Answers to ApiVersions (kafka-notes §2.1 and §9.2-3).

Owns: the ApiVersions response built from the one table (``apis.SUPPORTED``), and the answer to
an ApiVersions request at a version rill does not know: error 35 in the v0 layout (header v0,
body v0), still listing the table, so the client retries with a version it finds there (KIP-511).
The body never carries tagged fields (no SupportedFeatures / FinalizedFeatures: Debian's kcat
cannot parse them).
"""

from __future__ import annotations

from rill.protocol.kafka import apis
from rill.protocol.kafka.codec import encode_response, message_spec
from rill.protocol.kafka.errors import ErrorCode


def api_versions_body(error_code: int = ErrorCode.NONE, throttle_time_ms: int = 0,
                      supported: dict[int, tuple[int, int]] | None = None):
    """The ApiVersionsResponse (any version: v0 simply leaves out the throttle time)."""
    table = apis.SUPPORTED if supported is None else supported
    response = message_spec("ApiVersionsResponse").cls
    entry = response.ApiVersion
    return response(error_code=int(error_code),
                    api_keys=tuple(entry(api_key=key, min_version=low, max_version=high)
                                   for key, (low, high) in sorted(table.items())),
                    throttle_time_ms=throttle_time_ms)


def api_versions_response(version: int, correlation_id: int, throttle_time_ms: int = 0,
                          supported: dict[int, tuple[int, int]] | None = None) -> bytes:
    """The whole response frame to a supported ApiVersions request."""
    return encode_response(apis.API_VERSIONS, version, correlation_id,
                           api_versions_body(ErrorCode.NONE, throttle_time_ms, supported))


def api_versions_unsupported_response(correlation_id: int,
                                      supported: dict[int, tuple[int, int]] | None = None
                                      ) -> bytes:
    """The whole response frame to an ApiVersions request at an unknown version: v0 layout,
    UNSUPPORTED_VERSION, the table. The connection stays open."""
    return encode_response(apis.API_VERSIONS, 0, correlation_id,
                           api_versions_body(ErrorCode.UNSUPPORTED_VERSION, 0, supported))
