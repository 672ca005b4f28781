"""DataPaths builds the data directory layout of wire reference §7.1 (with SQLite metadata)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rill.server.storage.paths import DataPaths, parse_segment_file_name


def test_layout_under_root(tmp_path: Path) -> None:
    paths = DataPaths(tmp_path)
    assert paths.metadata_db == tmp_path / "metadata.sqlite3"
    assert paths.streams_dir == tmp_path / "streams"
    assert paths.stream_dir(7) == tmp_path / "streams" / "7"
    assert paths.topic_dir(7, 3) == tmp_path / "streams" / "7" / "topics" / "3"
    assert paths.partition_dir(7, 3, 2) == tmp_path / "streams/7/topics/3/partitions/2"
    assert paths.clean_shutdown_marker.parent == tmp_path
    assert paths.logs_dir == tmp_path / "logs"
    assert paths.runtime_dir == tmp_path / "runtime"
    assert DataPaths(str(tmp_path)).root == tmp_path


def test_segment_files_are_named_by_start_offset_in_twenty_digits(tmp_path: Path) -> None:
    assert DataPaths.segment_log(tmp_path, 0).name == "00000000000000000000.log"
    assert DataPaths.segment_index(tmp_path, 5000).name == "00000000000000005000.index"
    assert DataPaths.segment_log(tmp_path, 2**64 - 1).name == "18446744073709551615.log"
    assert DataPaths.segment_log(tmp_path, 1).parent == tmp_path


def test_negative_start_offset_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        DataPaths.segment_log(tmp_path, -1)


def test_parse_is_the_inverse_of_the_builders(tmp_path: Path) -> None:
    for offset in (0, 1, 5000, 10**19):
        assert parse_segment_file_name(DataPaths.segment_log(tmp_path, offset).name) == (
            offset,
            ".log",
        )
        assert parse_segment_file_name(DataPaths.segment_index(tmp_path, offset).name) == (
            offset,
            ".index",
        )


@pytest.mark.parametrize(
    "name",
    [
        "0.log",
        "00000000000000000000.timeindex",
        "0000000000000000000a.log",
        "offsets",
        "000000000000000000000.log",
        "x.index",
    ],
)
def test_other_file_names_are_not_segments(name: str) -> None:
    assert parse_segment_file_name(name) is None
