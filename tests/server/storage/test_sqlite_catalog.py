"""The Catalog port (``core.catalog``): one body of tests run on both implementations, the
SQLite catalog of the data directory (``storage.sqlite_catalog``) and its memory twin
(``core.memory_catalog``): the same confirmations, refusals, cascades and id blocks. The SQLite
runs add what only files have: a reopen keeps everything, a torn write-ahead log loses only
the torn commit, a damaged file is refused at open."""

from __future__ import annotations

import asyncio
import functools
import shutil
from pathlib import Path

import pytest

from rill.server.core.catalog import (
    CatalogConflict,
    ConsumerGroupRow,
    PartitionRow,
    PersonalAccessTokenRow,
    PositionRow,
    StreamRow,
    TopicRow,
    UserRow,
)
from rill.server.core.memory_catalog import MemoryCatalog
from rill.server.storage.sqlite_catalog import CatalogDamaged, SqliteCatalog

U64_MAX = (1 << 64) - 1


def run(test):
    """An ``async def`` test body, run to its end on a fresh event loop."""
    @functools.wraps(test)
    def synchronous(*args, **kwargs):
        asyncio.run(test(*args, **kwargs))
    return synchronous


@pytest.fixture(params=["sqlite", "memory"])
def catalog(request, tmp_path):
    made = (SqliteCatalog.open(tmp_path / "metadata.sqlite3", synchronous_full=False)
            if request.param == "sqlite" else MemoryCatalog())
    yield made
    made.close()


def topic(stream_id: int, topic_id: int, name: str, record_format: str = "kafka-v2") -> TopicRow:
    return TopicRow(stream_id, topic_id, name, 7, 1, U64_MAX, U64_MAX, 1, record_format)


def partitions(stream_id: int, topic_id: int, *ids: int) -> list[PartitionRow]:
    return [PartitionRow(stream_id, topic_id, pid, 9) for pid in ids]


async def populated(catalog) -> None:
    """Stream 1 ("s") with topics 1 ("t", 2 partitions) and 2 ("u", 1 partition); stream 2."""
    await catalog.create_stream(StreamRow(1, "s", 5))
    await catalog.create_stream(StreamRow(2, "other", 6))
    await catalog.create_topic(topic(1, 1, "t"), partitions(1, 1, 1, 2))
    await catalog.create_topic(topic(1, 2, "u", "iggy-v1"), partitions(1, 2, 1))


def contents(catalog) -> tuple:
    return (catalog.load_streams(), catalog.load_topics(), catalog.load_partitions(),
            sorted(catalog.load_positions(), key=repr), catalog.load_consumer_groups(),
            catalog.load_users(), catalog.load_personal_access_tokens())


@run
async def test_changes_confirm_what_they_hold_and_loads_answer_it(catalog):
    assert await catalog.create_stream(StreamRow(2, "b", 1)) == StreamRow(2, "b", 1)
    assert await catalog.create_stream(StreamRow(1, "a", 2)) == StreamRow(1, "a", 2)
    row, made = await catalog.create_topic(topic(2, 1, "t"), partitions(2, 1, 1, 2))
    assert row == topic(2, 1, "t") and made == partitions(2, 1, 1, 2)
    assert await catalog.create_partitions(partitions(2, 1, 3)) == partitions(2, 1, 3)
    assert [s.id for s in catalog.load_streams()] == [1, 2]  # by id
    assert catalog.load_topics() == [topic(2, 1, "t")]  # u64::MAX kept (never, unlimited)
    assert [p.id for p in catalog.load_partitions()] == [1, 2, 3]
    await catalog.update_stream(2, "renamed")
    updated = TopicRow(2, 1, "t2", 7, 2, 100, 200, 3, "kafka-v2")
    assert await catalog.update_topic(updated) == updated
    assert catalog.load_streams()[1].name == "renamed" and catalog.load_topics() == [updated]
    await catalog.delete_partitions(2, 1, [3])
    assert [p.id for p in catalog.load_partitions()] == [1, 2]


@run
async def test_taken_keys_and_names_and_missing_parents_are_refused_changing_nothing(catalog):
    await populated(catalog)
    await catalog.create_user(UserRow(1, "root", "h", 1, None, 1))
    await catalog.create_consumer_group(ConsumerGroupRow(1, 1, 1, "g"))
    await catalog.create_personal_access_token(PersonalAccessTokenRow(1, "p", "a" * 64, 0))
    before = contents(catalog)
    refused = [
        catalog.create_stream(StreamRow(1, "new", 1)),  # taken id
        catalog.create_stream(StreamRow(3, "s", 1)),  # taken name
        catalog.create_topic(topic(1, 1, "new"), []),
        catalog.create_topic(topic(1, 3, "t"), partitions(1, 3, 1)),
        catalog.create_topic(topic(9, 1, "x"), []),  # no stream 9
        catalog.create_topic(topic(2, 1, "x"), partitions(2, 1, 1, 1)),  # a partition twice
        catalog.create_partitions(partitions(1, 1, 2)),
        catalog.create_partitions(partitions(1, 9, 1)),  # no topic 9
        catalog.store_position(PositionRow(1, 1, 9, "c", 1)),  # no partition 9
        catalog.create_consumer_group(ConsumerGroupRow(1, 1, 1, "other")),
        catalog.create_consumer_group(ConsumerGroupRow(1, 1, 2, "g")),
        catalog.create_consumer_group(ConsumerGroupRow(1, 9, 1, "g")),
        catalog.create_user(UserRow(1, "new", "h", 1, None, 1)),
        catalog.create_user(UserRow(2, "root", "h", 1, None, 1)),
        catalog.create_personal_access_token(PersonalAccessTokenRow(1, "p", "b" * 64, 0)),
        catalog.create_personal_access_token(PersonalAccessTokenRow(1, "q", "a" * 64, 0)),
        catalog.create_personal_access_token(PersonalAccessTokenRow(9, "p", "c" * 64, 0)),
        catalog.update_stream(2, "s"),
        catalog.update_topic(topic(1, 2, "t")),
        catalog.update_user(1, "root", 1),  # its own name is fine: see below
    ]
    for change in refused[:-1]:
        with pytest.raises(CatalogConflict):
            await change
    await refused[-1]
    # the same name in another stream is free; other streams' topic 1 too
    await catalog.create_topic(topic(2, 1, "t"), partitions(2, 1, 1))
    assert contents(catalog)[0] == before[0] and contents(catalog)[3:] == before[3:]
    assert len(catalog.load_topics()) == len(before[1]) + 1


@run
async def test_changes_of_what_is_not_there_change_nothing(catalog):
    await populated(catalog)
    before = contents(catalog)
    await catalog.update_stream(9, "x")
    assert await catalog.update_topic(topic(1, 9, "x")) == topic(1, 9, "x")
    await catalog.delete_stream(9)
    await catalog.delete_topic(1, 9)
    await catalog.delete_partitions(1, 1, [9])
    await catalog.update_user(9, "x", 1)
    await catalog.update_permissions(9, b"x")
    await catalog.change_password(9, "h", "s")
    await catalog.delete_user(9)
    await catalog.delete_consumer_group(1, 1, 9, "nobody")
    await catalog.delete_personal_access_token(9, "x")
    assert contents(catalog) == before


@run
async def test_deletions_take_what_belongs_to_them(catalog):
    await populated(catalog)
    for stream_id, topic_id, partition_id in ((1, 1, 1), (1, 1, 2), (1, 2, 1)):
        await catalog.store_position(PositionRow(stream_id, topic_id, partition_id, "c", 3))
    await catalog.store_position(PositionRow(1, 1, 1, "group:g", 4, "note", 2))
    await catalog.create_consumer_group(ConsumerGroupRow(1, 1, 1, "g"))
    await catalog.create_consumer_group(ConsumerGroupRow(1, 2, 1, "g"))
    await catalog.delete_partitions(1, 1, [2])
    assert sorted((p.topic_id, p.partition_id, p.consumer) for p in catalog.load_positions()) \
        == [(1, 1, "c"), (1, 1, "group:g"), (2, 1, "c")]
    await catalog.delete_consumer_group(1, 1, 1, "group:g")
    assert [(g.topic_id, g.id) for g in catalog.load_consumer_groups()] == [(2, 1)]
    assert sorted(p.consumer for p in catalog.load_positions()) == ["c", "c"]
    await catalog.delete_topic(1, 2)
    assert [(p.topic_id, p.id) for p in catalog.load_partitions()] == [(1, 1)]
    assert catalog.load_consumer_groups() == []
    await catalog.create_topic(topic(1, 2, "u"), partitions(1, 2, 1))  # its id is free again
    await catalog.create_consumer_group(ConsumerGroupRow(1, 2, 1, "g"))
    await catalog.delete_stream(1)
    assert [s.id for s in catalog.load_streams()] == [2]
    assert (catalog.load_topics(), catalog.load_partitions(), list(catalog.load_positions()),
            catalog.load_consumer_groups()) == ([], [], [], [])


@run
async def test_purges_forget_positions_only(catalog):
    await populated(catalog)
    await catalog.store_position(PositionRow(1, 1, 1, "c", 3))
    await catalog.store_position(PositionRow(1, 2, 1, "c", 3))
    await catalog.purge_topic(1, 1)
    assert [p.topic_id for p in catalog.load_positions()] == [2]
    await catalog.purge_stream(1)
    assert list(catalog.load_positions()) == [] and len(catalog.load_partitions()) == 3


@run
async def test_a_position_is_replaced_with_its_note_and_epoch(catalog):
    await populated(catalog)
    first = PositionRow(1, 1, 1, "kafka-group:g", U64_MAX, "meta", 4)
    assert await catalog.store_position(first) == first
    assert list(catalog.load_positions()) == [first]
    plain = PositionRow(1, 1, 1, "kafka-group:g", 12)
    await catalog.store_position(plain)
    assert list(catalog.load_positions()) == [plain]  # no note, no epoch any more


@run
async def test_users_and_their_tokens(catalog):
    root = UserRow(1, "root", "h1", 1, b"\x01", 3, "scram")
    assert await catalog.create_user(root) == root
    await catalog.create_user(UserRow(2, "u", "h2", 1, None, 4))
    await catalog.update_user(2, "renamed", 2)
    await catalog.update_permissions(2, b"\x02")
    await catalog.change_password(2, "h3")  # SCRAM credentials go with the old password
    await catalog.set_scram_credentials(1, "scram2")
    assert catalog.load_users() == [UserRow(1, "root", "h1", 1, b"\x01", 3, "scram2"),
                                    UserRow(2, "renamed", "h3", 2, b"\x02", 4, None)]
    tokens = [PersonalAccessTokenRow(2, "b", "b" * 64, U64_MAX),
              PersonalAccessTokenRow(2, "a", "a" * 64, 0),
              PersonalAccessTokenRow(1, "c", "c" * 64, 5)]
    for token in tokens:
        assert await catalog.create_personal_access_token(token) == token
    assert catalog.load_personal_access_tokens() == [tokens[2], tokens[1], tokens[0]]
    await catalog.delete_personal_access_tokens(["c" * 64])
    await catalog.delete_personal_access_token(2, "a")
    assert catalog.load_personal_access_tokens() == [tokens[0]]
    await catalog.delete_user(2)
    assert [u.id for u in catalog.load_users()] == [1]
    assert catalog.load_personal_access_tokens() == []


@run
async def test_id_blocks_are_never_handed_out_twice(catalog):
    assert catalog.reserved_ids("p") == 0
    assert await catalog.reserve_ids("p", 10) == 0
    assert await catalog.reserve_ids("p", 5) == 10
    assert await catalog.reserve_ids("q", 1) == 0
    assert (catalog.reserved_ids("p"), catalog.reserved_ids("q")) == (15, 1)
    with pytest.raises(ValueError):
        await catalog.reserve_ids("p", 0)


def test_trusted_logins_and_revoked_tokens(catalog):
    for address, until in (("a", 50), ("b", 30), ("c", 40)):
        catalog.trust_login("u", address, until, keep=2, now=10)
    catalog.trust_login("v", "a", 20, keep=2, now=10)
    assert catalog.load_trusted_logins(now=10) == [("v", "a", 20), ("u", "c", 40),
                                                   ("u", "a", 50)]
    assert catalog.load_trusted_logins(now=20) == [("u", "c", 40), ("u", "a", 50)]
    catalog.trust_login("w", "a", 60, keep=2, now=25)  # forgets what expired at 25
    assert [t[0] for t in catalog.load_trusted_logins(now=0)] == ["u", "u", "w"]
    catalog.forget_trusted_logins("u")
    assert catalog.load_trusted_logins(now=0) == [("w", "a", 60)]
    catalog.revoke_access_token("j1", 100)
    catalog.revoke_access_token("j2", 200)
    catalog.delete_expired_revocations(100)
    assert catalog.load_revoked_access_tokens() == {"j2": 200}


# -- the SQLite catalog: what only files have ---------------------------------------------


def fill(path: Path) -> SqliteCatalog:
    catalog = SqliteCatalog.open(path, synchronous_full=False)
    asyncio.run(populated(catalog))
    asyncio.run(catalog.create_user(UserRow(1, "root", "h", 1, None, 1)))
    asyncio.run(catalog.store_position(PositionRow(1, 1, 1, "c", U64_MAX, "n", 1)))
    asyncio.run(catalog.create_consumer_group(ConsumerGroupRow(1, 1, 1, "g")))
    asyncio.run(catalog.create_personal_access_token(PersonalAccessTokenRow(1, "p", "a" * 64, 0)))
    asyncio.run(catalog.reserve_ids("p", 3))
    return catalog


def test_a_reopened_catalog_holds_everything_it_confirmed(tmp_path):
    path = tmp_path / "metadata.sqlite3"
    catalog = fill(path)
    before = contents(catalog)
    catalog.close()
    reopened = SqliteCatalog.open(path, synchronous_full=True)
    assert contents(reopened) == before and reopened.reserved_ids("p") == 3
    reopened.close()


def test_a_torn_write_ahead_log_loses_only_the_torn_commit(tmp_path):
    path = tmp_path / "metadata.sqlite3"
    catalog = fill(path)
    kept = contents(catalog)
    asyncio.run(catalog.create_stream(StreamRow(3, "torn", 1)))  # the last commit of the log
    crashed = tmp_path / "crashed"  # the files as a kill -9 leaves them (no checkpoint)
    crashed.mkdir()
    for suffix in ("", "-wal"):
        shutil.copy(path.with_name(path.name + suffix), crashed / f"metadata.sqlite3{suffix}")
    catalog.close()
    wal = crashed / "metadata.sqlite3-wal"
    with wal.open("r+b") as torn:
        torn.truncate(wal.stat().st_size - 100)  # its last frame half written
    recovered = SqliteCatalog.open(crashed / "metadata.sqlite3", synchronous_full=False)
    assert contents(recovered) == kept
    recovered.close()


def test_a_damaged_catalog_is_refused_at_open_unchanged(tmp_path):
    path = tmp_path / "metadata.sqlite3"
    fill(path).close()
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the first page's b-tree: the schema table
    path.write_bytes(bytes(data))
    with pytest.raises(CatalogDamaged):
        SqliteCatalog.open(path, synchronous_full=False)
    assert path.read_bytes() == bytes(data)
