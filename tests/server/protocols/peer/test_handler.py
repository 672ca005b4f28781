"""The peer listener (``protocols.peer.handler``) of a one-node cluster on the coordinator's
memory twin, over real sockets: a link must prove the cluster's secret first; a stranger's
garbage, a request before HELLO or a wrong proof close that link and nothing else; a proven
link asking for a partition this node does not lead gets the error by name."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

from rill.protocol.peer import codec
from rill.protocol.peer.codec import Message
from rill.server.app import Server
from rill.server.cluster.memory_coordinator import MemoryCoordinator
from rill.server.cluster.peer_link import PeerLink, PeerRefused, proof
from rill.server.config import ServerConfig


def one_node(directory: Path) -> Server:
    config = ServerConfig()
    config.system.path = str(directory)
    config.root.password_hash_cost = 4
    config.tcp.address = config.http.address = "127.0.0.1:0"
    config.quic.enabled = False
    config.cluster.etcd_endpoints = "http://twin.invalid:1"
    config.cluster.node_id = 1
    config.cluster.peer_address = "127.0.0.1:0"
    config.cluster.min_insync_replicas = 1
    return Server(config, coordinator=MemoryCoordinator())


async def closed_after(address: tuple[str, int], data: bytes) -> bool:
    reader, writer = await asyncio.open_connection(*address)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(1024), 5) == b""
    finally:
        writer.close()


def test_only_a_link_that_proves_the_secret_is_served(tmp_path: Path) -> None:
    async def scenario() -> None:
        server = one_node(tmp_path)
        await server.start()
        try:
            address = server.addresses["cluster"]
            node = server.cluster
            fetch = b"".join(bytes(p) for p in codec.encode(
                Message(codec.FETCH, 1, {"stream_id": 1, "topic_id": 1, "partition_id": 1})))
            wrong = b"".join(bytes(p) for p in codec.encode(
                Message(codec.HELLO, 1, {"node_id": 2, "proof": proof(b"guess", 2)})))
            assert await closed_after(address, fetch)  # before HELLO
            assert await closed_after(address, wrong)  # without the secret
            assert await closed_after(address, struct.pack("<BI", 2, 3) + b"abc")  # garbage
            link = PeerLink(*address, 2, node.secret)
            await link.open()  # HELLO with the secret answers
            try:
                await link.request(codec.FETCH, {
                    "stream_id": 1, "topic_id": 1, "partition_id": 1, "incarnation": 1,
                    "leader_epoch": 1, "fetch_offset": 0, "replica_id": 2, "member_epoch": 1})
                raise AssertionError("a fetch of a partition it does not lead was answered")
            except PeerRefused as refused:
                assert refused.status == "not_leader_for_partition"
            assert node.counters["fenced_requests"] == 1
            # the rest of the server goes on serving
            reader, writer = await asyncio.open_connection(*server.addresses["tcp"])
            writer.close()
            link.close()
        finally:
            await server.stop()

    asyncio.run(scenario())
