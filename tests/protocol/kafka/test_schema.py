"""The schema reader: comments, version ranges, names, defaults, and the types the vendored
schemas do not happen to use (uint16, float64, common structs) through a synthetic schema."""

from __future__ import annotations

import pytest

from rill.protocol.kafka.codec import _Compiler
from rill.protocol.kafka.schema import (
    INFINITE,
    SchemaError,
    load_schema,
    parse_schema,
    parse_versions,
    schema_names,
    snake_case,
    strip_comments,
)

SYNTHETIC = """
// Licensed to the Apache Software Foundation (ASF) ... http://www.apache.org/licenses/LICENSE-2.0
{
  "apiKey": 999, "type": "response", "name": "SyntheticResponse",
  "validVersions": "0-2", // trailing comment with "quotes"
  "flexibleVersions": "2+",
  "fields": [
    { "name": "Url", "type": "string", "versions": "0+", "default": "http://x//y" },
    { "name": "Port", "type": "uint16", "versions": "0+", "default": "9092" },
    { "name": "Ratio", "type": "float64", "versions": "1+", "default": "0.5" },
    { "name": "Ids", "type": "[]uuid", "versions": "0+" },
    { "name": "Node", "type": "Endpoint", "versions": "0+" },
    { "name": "Nodes", "type": "[]Endpoint", "versions": "1+", "nullableVersions": "1+" },
    { "name": "Extra", "type": "int32", "versions": "2+", "taggedVersions": "2+", "tag": 7,
      "default": "-1" }
  ],
  "commonStructs": [
    { "name": "Endpoint", "versions": "0+", "fields": [
      { "name": "Host", "type": "string", "versions": "0+" },
      { "name": "HTTPPort", "type": "int16", "versions": "0+" } ] }
  ]
}
"""


def test_comments_versions_and_names():
    assert strip_comments('{"a": "x//y"} // c\n') == '{"a": "x//y"} \n'
    assert parse_versions("3+") == (3, INFINITE)
    assert parse_versions("1-4") == (1, 4) and parse_versions("0") == (0, 0)
    assert parse_versions("none") is None
    assert snake_case("ThrottleTimeMs") == "throttle_time_ms"
    assert snake_case("HTTPPort") == "http_port" and snake_case("timeoutMs") == "timeout_ms"
    assert len(schema_names()) == 46  # 22 APIs x 2 + the 2 headers
    with pytest.raises(SchemaError):
        load_schema("DescribeClusterRequest")  # not vendored


def test_a_synthetic_schema_with_every_remaining_type():
    spec = parse_schema(SYNTHETIC)
    cls = spec.cls
    default = cls()
    assert (default.url, default.port, default.ratio, default.extra) == ("http://x//y", 9092, 0.5, -1)
    assert default.node == cls.Endpoint(host="", http_port=0)
    import uuid
    value = cls(url="u", port=65535, ratio=-2.25, ids=(uuid.UUID(int=5),),
                node=cls.Endpoint(host="h", http_port=-1),
                nodes=(cls.Endpoint(host="a", http_port=1),), extra=3)
    for version in (1, 2):
        compiler = _Compiler(spec, version)
        out: list = []
        compiler.struct_writer(spec.struct)(value if version == 2 else value._replace(extra=-1),
                                            out)
        data = b"".join(out)
        decoded, end = compiler.struct_decoder(spec.struct)(memoryview(data), 0)
        assert end == len(data)
        assert decoded == (value if version == 2 else value._replace(extra=-1))
    compiler = _Compiler(spec, 0)  # v0: no ratio, no nodes (not ignorable: must be default)
    out = []
    compiler.struct_writer(spec.struct)(value._replace(ratio=0.5, nodes=(), extra=-1), out)
    decoded, _ = compiler.struct_decoder(spec.struct)(memoryview(b"".join(out)), 0)
    assert decoded.ratio == 0.5 and decoded.nodes == ()
