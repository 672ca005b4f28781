"""Iggy consumer groups and personal access tokens across three cluster nodes in this process,
on the coordinator's memory twin (``cluster.group_members``, ``cluster.catalog``): a group made
on one node exists on every node with its id; members joined on different nodes are dealt
disjoint partitions covering the topic, the same on every node; a member whose node's lease
ends leaves everywhere; a token made on one node logs in on another, and a deleted one on none;
an HTTP access token verifies on every node, and one revoked on one node is refused by all.
The deal itself (``core.consumer_groups.deal``) is a pure function tested beside its module."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_node_twin import Link, node_config, three_nodes, until

from rill import errors
from rill.server.app import Server
from rill.server.cluster.memory_coordinator import MemoryCoordinator
from rill.server.core.types import TopicSpec


async def _cluster(tmp_path: Path) -> tuple[MemoryCoordinator, dict[int, Link], dict[int, Server]]:
    twin = MemoryCoordinator()
    links, servers = await three_nodes(tmp_path, twin)
    return twin, links, servers


async def _topic(server: Server, partitions: int):
    """Stream 1 "s" with topic 1 "t" of ``partitions`` (RF 1), made through ``server``;
    returns the root session it used."""
    admin = _session(server, 1)
    await server.core.broker.create_namespace(admin, "s")
    await server.core.broker.create_topic(admin, 1, TopicSpec("t", partitions_count=partitions,
                                                              replication_factor=1))
    return admin


def _session(server: Server, port: int):
    broker = server.core.broker
    session = broker.connect(f"127.0.0.1:{port}", "tcp")
    broker.authenticate_as(session, 1)
    return session


def _assigned(servers: dict[int, Server], group) -> dict[int, dict[tuple[int, int], list[int]]]:
    """Per node: (node, client) -> partitions of its own members."""
    found = {}
    for n, server in servers.items():
        members = server.core.consumer_groups.membership.members(group)
        found[n] = {(n, client): list(member.partitions) for client, member in members.items()}
    return found


def test_groups_are_made_on_every_node_and_members_anywhere_share_the_partitions(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        twin, links, servers = await _cluster(tmp_path)
        try:
            core = servers[1].core
            admin = await _topic(servers[1], 6)
            await until(lambda: all(1 in s.core.state.streams and 1 in
                                    s.core.state.streams[1].topics for s in servers.values()),
                        "the topic on every node")
            made = await core.consumer_groups.create_consumer_group(admin, 1, 1, "g")
            assert made.id == 1
            groups = {}
            for n, server in servers.items():
                topic = server.core.state.streams[1].topics[1]
                group = await until(lambda server=server, topic=topic: server.core.consumer_groups.groups_of(topic).get(1),
                                    f"the group on node {n}")
                assert group.name == "g" and group.partitions_count == 6
                groups[n] = group
            # the same name or id made on another node is refused there
            with pytest.raises(errors.ConsumerGroupNameAlreadyExists):
                await servers[3].core.consumer_groups.create_consumer_group(
                    _session(servers[3], 2), 1, 1, "g")

            sessions = {}
            for n in (1, 2, 3):
                sessions[n] = _session(servers[n], 10 + n)
                membership = servers[n].core.consumer_groups.membership
                await membership.join(sessions[n], groups[n])

            def settled():
                found = _assigned(servers, groups[1])
                dealt = [p for node in found.values() for ps in node.values() for p in ps]
                return found if sorted(dealt) == [1, 2, 3, 4, 5, 6] else None

            found = await until(settled, "the partitions dealt over the three nodes' members")
            assert all(len(ps) == 2 for node in found.values() for ps in node.values())
            # every node lists every member, with the same partitions
            listings = [servers[n].core.consumer_groups.membership.listing(groups[n])
                        for n in (1, 2, 3)]
            assert listings[0] == listings[1] == listings[2] and len(listings[0]) == 3

            # node 3 loses its lease (cut off from etcd): its member leaves everywhere
            links[3].set_cut(True)
            for _ in range(8):
                await twin.advance(0.5)

            def survivors():
                found = _assigned({n: servers[n] for n in (1, 2)}, groups[1])
                dealt = sorted(p for node in found.values() for ps in node.values() for p in ps)
                return found if dealt == [1, 2, 3, 4, 5, 6] else None

            found = await until(survivors, "nodes 1 and 2 taking node 3's partitions")
            assert all(len(ps) == 3 for node in found.values() for ps in node.values())
            assert len(servers[1].core.consumer_groups.membership.listing(groups[1])) == 2

            # a leave on node 2 is seen on node 1, which takes every partition
            await servers[2].core.consumer_groups.membership.leave(sessions[2], groups[2])
            await until(lambda: _assigned({1: servers[1]}, groups[1])[1].get(
                (1, sessions[1].client_id)) == [1, 2, 3, 4, 5, 6], "node 1 reading everything")

            # deleting the group on node 2 deletes it on node 1
            await servers[2].core.consumer_groups.delete_consumer_group(
                _session(servers[2], 3), 1, 1, 1)
            topic = servers[1].core.state.streams[1].topics[1]
            await until(lambda: not servers[1].core.consumer_groups.groups_of(topic),
                        "the group gone on node 1")
        finally:
            links[3].set_cut(False)
            for server in servers.values():
                await server.stop()

    asyncio.run(scenario())


def test_a_partition_moves_to_its_new_member_only_once_its_old_member_let_go(
        tmp_path: Path) -> None:
    """Claims: node 1 has not applied node 2's join yet (its watch is cut), so its member
    still holds every partition; node 2's new member is dealt half of them but reads none
    until node 1 applies the join and lets them go."""
    async def scenario() -> None:
        twin, links, servers = await _cluster(tmp_path)
        try:
            core = servers[1].core
            admin = await _topic(servers[1], 4)
            await core.consumer_groups.create_consumer_group(admin, 1, 1, "g")
            groups = {n: await until(lambda n=n: servers[n].core.consumer_groups.groups_of(
                servers[n].core.state.streams[1].topics[1]).get(1), f"the group on {n}")
                for n in (1, 2)}
            sessions = {n: _session(servers[n], 30 + n) for n in (1, 2)}

            def polls(n: int, times: int = 8) -> set[int]:
                return {servers[n].core.consumer_groups.member_partition(
                    sessions[n], 1, 1, 1, 0, advance=True)[0] for _ in range(times)}

            await servers[1].core.consumer_groups.membership.join(sessions[1], groups[1])
            await until(lambda: polls(1) == {1, 2, 3, 4}, "node 1's member reading everything")

            links[1].set_cut(True)  # node 1 applies nothing from now on
            await servers[2].core.consumer_groups.membership.join(sessions[2], groups[2])
            members = servers[2].core.consumer_groups.membership.members(groups[2])
            assert members[sessions[2].client_id].partitions == [2, 4]  # dealt, not claimed
            await asyncio.sleep(0.5)
            assert polls(2) == {0}  # nothing to read: node 1's member still holds them
            assert polls(1) == {1, 2, 3, 4}

            links[1].set_cut(False)  # node 1 applies the join: lets 2 and 4 go
            for _ in range(100):  # (its watch retries on the twin's clock)
                if polls(2) == {2, 4}:
                    break
                await twin.advance(0.2)
                await asyncio.sleep(0.05)
            assert polls(2) == {2, 4}
            assert polls(1) == {1, 3}
        finally:
            links[1].set_cut(False)
            for server in servers.values():
                await server.stop()

    asyncio.run(scenario())


def test_partitions_added_and_a_topic_deleted_elsewhere_reach_every_nodes_groups(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        _, _, servers = await _cluster(tmp_path)
        try:
            core = servers[1].core
            admin = await _topic(servers[1], 2)
            await core.consumer_groups.create_consumer_group(admin, 1, 1, "g")

            def group_on(n: int):
                stream = servers[n].core.state.streams.get(1)
                topic = stream.topics.get(1) if stream is not None else None
                return servers[n].core.consumer_groups.groups_of(topic).get(1) if topic else None

            group = await until(lambda: group_on(3), "the group on node 3")
            member = _session(servers[3], 20)
            await servers[3].core.consumer_groups.membership.join(member, group)
            await until(lambda: group_on(3).partitions_count == 2, "two partitions")
            await servers[2].core.partitions.create_partitions(_session(servers[2], 21), 1, 1, 2)
            await until(lambda: group_on(3).partitions_count == 4,
                        "node 3's group counting the partitions node 2 added")
            members = servers[3].core.consumer_groups.membership.members(group_on(3))
            await until(lambda: members[member.client_id].partitions == [1, 2, 3, 4],
                        "node 3's member dealt the new partitions")

            await core.topics.delete_topic(admin, 1, 1)
            await until(lambda: 1 not in servers[3].core.state.streams[1].topics,
                        "the topic gone on node 3")
            assert not servers[3].core.consumer_groups.topics.get((1, 1))
            assert member.consumer_groups == []  # its member let go
        finally:
            for server in servers.values():
                await server.stop()

    asyncio.run(scenario())


def test_tokens_made_on_one_node_log_in_on_the_others_until_deleted(tmp_path: Path) -> None:
    async def scenario() -> None:
        _, _, servers = await _cluster(tmp_path)
        try:
            tokens = {n: servers[n].core.tokens for n in servers}
            raw = await tokens[1].create_personal_access_token(_session(servers[1], 1), "ci-token", 0)

            def logs_in(n: int) -> bool:
                session = servers[n].core.broker.connect(f"127.0.0.1:{100 + n}", "tcp")
                try:
                    return tokens[n].login_with_personal_access_token(session, raw) == 1
                except errors.RillError:
                    return False

            for n in (2, 3):
                await until(lambda n=n: logs_in(n), f"the token logging in on node {n}")
            assert [t.name for t in tokens[3].get_personal_access_tokens(
                _session(servers[3], 2))] == ["ci-token"]
            with pytest.raises(errors.PersonalAccessTokenAlreadyExists):
                await tokens[2].create_personal_access_token(_session(servers[2], 3), "ci-token", 0)

            await tokens[3].delete_personal_access_token(_session(servers[3], 4), "ci-token")
            for n in (1, 2):
                await until(lambda n=n: not logs_in(n), f"the token refused on node {n}")
        finally:
            for server in servers.values():
                await server.stop()

    asyncio.run(scenario())


def test_http_access_tokens_verify_on_every_node_and_a_revocation_reaches_them_all(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        _, _, servers = await _cluster(tmp_path)
        try:
            jwts = {n: servers[n].core.access_tokens for n in servers}
            issued = jwts[1].issue(1)
            for n in (2, 3):  # one signing secret: the cluster's
                assert jwts[n].verify(issued.token).user_id == 1
            jwts[1].revoke(jwts[1].verify(issued.token))

            def refused(n: int) -> bool:
                try:
                    jwts[n].verify(issued.token)
                    return False
                except errors.InvalidAccessToken:
                    return True

            for n in (2, 3):
                await until(lambda n=n: refused(n), f"the revoked token refused on node {n}")
        finally:
            for server in servers.values():
                await server.stop()

    asyncio.run(scenario())


def test_a_node_back_from_a_stop_has_the_groups_and_tokens_changed_meanwhile(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        _, links, servers = await _cluster(tmp_path)
        try:
            core = servers[1].core
            admin = await _topic(servers[1], 1)
            await core.consumer_groups.create_consumer_group(admin, 1, 1, "old")
            raw = await core.tokens.create_personal_access_token(admin, "old-token", 0)

            def node3_groups() -> list[str]:
                stream = servers[3].core.state.streams.get(1)
                topic = stream.topics.get(1) if stream is not None else None
                return sorted(g.name for g in servers[3].core.consumer_groups.groups_of(
                    topic).values()) if topic else []

            await until(lambda: node3_groups() == ["old"], "the group on node 3")
            await until(lambda: servers[3].core.tokens.by_user.get(1), "the token on node 3")
            await servers[3].stop()

            await core.consumer_groups.delete_consumer_group(admin, 1, 1, 1)
            await core.consumer_groups.create_consumer_group(admin, 1, 1, "new")
            await core.tokens.delete_personal_access_token(admin, "old-token")

            servers[3] = Server(node_config(tmp_path, 3), coordinator=links[3])
            await servers[3].start()
            assert node3_groups() == ["new"]  # applied from etcd at start
            assert not servers[3].core.tokens.by_user.get(1)
            with pytest.raises(errors.ResourceNotFound):
                servers[3].core.tokens.login_with_personal_access_token(
                    servers[3].core.broker.connect("127.0.0.1:40", "tcp"), raw)
        finally:
            for server in servers.values():
                await server.stop()

    asyncio.run(scenario())
