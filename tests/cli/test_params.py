"""The command-line value parsers (in process: no server, no subprocess)."""

from __future__ import annotations

import pytest
import typer

from rill.cli import params
from rill.protocol.iggy.headers import HeaderKind, HeaderValue

U64_MAX = 2**64 - 1


def test_identifiers_are_ids_when_all_digits():
    assert params.identifier("7") == 7
    assert params.identifier("orders") == "orders"
    assert params.identifier("7a") == "7a"
    for bad in ("", "0", "4294967296", "x" * 256):
        with pytest.raises(typer.BadParameter):
            params.identifier(bad)


@pytest.mark.parametrize("text, micros", [
    ("90s", 90_000_000), ("15m", 900_000_000), ("1h 30m", 5_400_000_000), ("7d", 604_800_000_000),
    ("500ms", 500_000), ("2", 2_000_000), ("never", U64_MAX), ("default", 0),
])
def test_durations(text, micros):
    assert params.duration(text) == micros


@pytest.mark.parametrize("text, size", [
    ("10GB", 10_000_000_000), ("512MiB", 512 * 1024**2), ("2000000", 2_000_000), ("1.5 kb", 1500),
    ("unlimited", U64_MAX), ("default", 0),
])
def test_sizes(text, size):
    assert params.size(text) == size


@pytest.mark.parametrize("bad", ["5parsecs", "h", "1h x"])
def test_bad_durations_are_usage_errors(bad):
    with pytest.raises(typer.BadParameter):
        params.duration(bad)


def test_headers_take_a_kind_and_may_contain_colons():
    assert params.header("url:string:http://x:80") == ("url", HeaderValue.string("http://x:80"))
    assert params.header("n:uint32:7") == ("n", HeaderValue.int(HeaderKind.UINT32, 7))
    assert params.header("d:int:-2") == ("d", HeaderValue.int(HeaderKind.INT64, -2))
    assert params.header("ok:bool:false") == ("ok", HeaderValue.bool(False))
    assert params.header("b:raw:00ff") == ("b", HeaderValue.raw(b"\x00\xff"))
    assert params.header("f:float32:0.5")[1].to_python() == 0.5
    for bad in ("nokind", "k:nokind:1", "k:uint8:300", "k:bool:maybe", "k:string:"):
        with pytest.raises(typer.BadParameter):
            params.header(bad)


def test_header_json_and_text():
    value = HeaderValue.int(HeaderKind.UINT16, 9)
    assert params.header_json(value) == {"kind": "uint16", "value": 9}
    assert params.header_text({"a": value, "b": HeaderValue.raw(b"\x01")}) == "a=9, b=hex:01"


def test_timestamps():
    assert params.timestamp("1700000000000000") == 1_700_000_000_000_000
    assert params.timestamp("2024-01-01T00:00:00+00:00") == 1_704_067_200_000_000
    with pytest.raises(typer.BadParameter):
        params.timestamp("yesterday")
