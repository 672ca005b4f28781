"""Kafka's wire protocol, sans-I/O: the codec rill's Kafka listener and tests use.

Generated from Apache Kafka's JSON message schemas (``schemas/``, vendored data): per
(API key, version) a decoder and an encoder of the request, the response and their headers,
compiled once (codec.py). Nothing here does I/O or imports the server.

* ``apis``: the API keys and the version table rill advertises and accepts (kafka-notes §2.4);
* ``codec``: ``decode_request`` / ``encode_response`` (server), ``encode_request`` /
  ``decode_response`` (clients, tests), ``api_codec(key, version)`` for the pieces;
* ``api_versions``: the ApiVersions answers, including the v0 answer to an unknown version;
* ``framing``: the int32-size frame splitter; ``errors``: ``ErrorCode`` and the exceptions;
* ``messages``: the message classes by schema name;
* ``record_batch``: RecordBatch v2 record by record (varints, records, headers, the batch
  header and CRC-32C, decompression within a limit);
* ``message_sets``: legacy MessageSets (magic 0/1) to and from RecordBatch v2 (the seed's
  Produce v0-2 and Fetch v0-3).
"""

from rill.protocol.kafka.api_versions import (
    api_versions_body,
    api_versions_response,
    api_versions_unsupported_response,
)
from rill.protocol.kafka.apis import SUPPORTED
from rill.protocol.kafka.codec import (
    Request,
    Response,
    api_codec,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_parts,
    request_class,
    response_class,
    response_expected,
)
from rill.protocol.kafka.errors import (
    ErrorCode,
    KafkaDecodeError,
    KafkaEncodeError,
    KafkaProtocolError,
    UnknownApiKey,
    UnsupportedVersion,
)
from rill.protocol.kafka.framing import KafkaRequestFrameDecoder, KafkaResponseFrameDecoder

__all__ = [
    "SUPPORTED", "ErrorCode", "KafkaDecodeError", "KafkaEncodeError", "KafkaProtocolError",
    "KafkaRequestFrameDecoder", "KafkaResponseFrameDecoder", "Request", "Response",
    "UnknownApiKey", "UnsupportedVersion", "api_codec", "api_versions_body",
    "api_versions_response", "api_versions_unsupported_response", "decode_request",
    "decode_response", "encode_request", "encode_response", "encode_response_parts",
    "request_class", "response_class", "response_expected",
]
