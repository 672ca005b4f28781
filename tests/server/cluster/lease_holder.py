"""A lease holder in its own process (so a test can SIGSTOP it): keeps a lease on a real etcd
with ``LeaseKeeper``, puts ``KEY`` under it, prints ``{"lease": ID, "ttl": TTL}``, then answers
each line on stdin with its view once the keeper has given the lease up:
``{"valid", "lost_reason", "keepalives_sent"}``.

Usage: python lease_holder.py ENDPOINT[,ENDPOINT...] KEY
"""

from __future__ import annotations

import asyncio
import json
import sys

from rill.server.cluster.etcd_gateway import EtcdGateway
from rill.server.cluster.leases import LeaseKeeper


async def main(endpoints: str, key: str) -> None:
    coordinator = EtcdGateway(endpoints.split(","))
    keeper = LeaseKeeper(coordinator, 2)
    lease = await keeper.start()
    await coordinator.put(key.encode(), b"held", lease=lease)
    print(json.dumps({"lease": lease, "ttl": keeper.ttl}), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        await keeper.lost.wait()
        print(json.dumps({"valid": keeper.valid, "lost_reason": keeper.lost_reason,
                          "keepalives_sent": keeper.keepalives_sent}), flush=True)
    await keeper.stop()
    await coordinator.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
