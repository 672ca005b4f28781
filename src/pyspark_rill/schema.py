"""The read schema of the ``rill`` source, as a Spark DDL string and as the equal Arrow schema.

Columns: ``stream``, ``topic``, ``partition`` (Iggy partition ids are 1-based), ``offset``,
``id`` (the 16 id bytes as on the wire), ``timestamp`` (server time, µs, UTC), ``key``,
``value`` (the payload), ``headers``. Iggy messages have no key field: the connector's writer
stores a row's key in the header ``rill.key`` (kind raw), and the reader moves that header
back into ``key`` (null when absent).

``headersFormat=binary`` (default) gives ``MAP<STRING, BINARY>`` with each header's raw value
bytes; ``typed`` gives ``MAP<STRING, STRUCT<kind STRING, value BINARY>>`` with the Iggy kind
name (``string``, ``int32``, ...) so typed headers survive a round trip.

Invariant: the Arrow schema equals ``to_arrow_schema(StructType.fromDDL(ddl), timezone="UTC")``
exactly, nullability included (Spark refuses batches that differ); tests check it. It is built
by hand because ``StructType.fromDDL`` needs a SparkContext, which Python workers do not have.
"""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa

from rill.protocol.iggy.headers import KEY_HEADER  # noqa: F401 - the header that holds a message's key

_COMMON = (
    "stream STRING NOT NULL, topic STRING NOT NULL, partition INT NOT NULL, "
    "offset BIGINT NOT NULL, id BINARY NOT NULL, timestamp TIMESTAMP NOT NULL, key BINARY, "
    "value BINARY NOT NULL, "
)
BINARY_HEADERS_DDL = _COMMON + "headers MAP<STRING, BINARY>"
TYPED_HEADERS_DDL = _COMMON + "headers MAP<STRING, STRUCT<kind: STRING, value: BINARY>>"

TYPED_HEADER_VALUE = pa.struct([pa.field("kind", pa.string()), pa.field("value", pa.binary())])


def read_ddl(typed_headers: bool) -> str:
    return TYPED_HEADERS_DDL if typed_headers else BINARY_HEADERS_DDL


@lru_cache(maxsize=None)
def headers_type(typed_headers: bool) -> pa.MapType:
    return pa.map_(pa.string(), TYPED_HEADER_VALUE if typed_headers else pa.binary())


@lru_cache(maxsize=None)
def arrow_schema(typed_headers: bool) -> pa.Schema:
    return pa.schema([
        pa.field("stream", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("id", pa.binary(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary(), nullable=False),
        pa.field("headers", headers_type(typed_headers)),
    ])
