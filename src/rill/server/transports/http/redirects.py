"""HTTP in a cluster: a messages request for a partition another node leads is redirected
there (cluster-design §2.10).

Owns: ``leader_redirect``, the answer to the broker's ``NotLeaderForPartition`` on this
listener: ``307 Temporary Redirect`` to the same path and query on the leader's advertised
``http`` listener (the method and body are kept by a 307: clients resend the POST or PUT
there), with the error's JSON body. It covers every route that reaches a partition: sends
(POST .../messages: a balanced or keyed send is redirected to the leader of the partition
chosen here, which chooses again: by key the same one), polls (GET .../messages: redirected
too, not proxied, so the reader reads the leader's committed records itself), consumer offsets
(GET/PUT .../consumer-offsets) and flushes. A leader that advertises no ``http`` listener
leaves the error as it is (421, ``not_leader_for_partition``); no leader is 503
(``leader_not_available``). The bearer token must be valid on the leader too (the nodes share
the JWT settings).
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

from rill import errors

REDIRECT = 307


def leader_redirect(request: Request, error: errors.RillError) -> JSONResponse | None:
    """The 307 to the leader ``error`` names, or None (answer the error itself)."""
    if type(error) is not errors.NotLeaderForPartition:
        return None
    cluster = request.app.state.rill.core.broker.cluster
    values = error.args_values
    leader = values[2] if len(values) > 2 else None
    node = cluster.node(leader) if cluster is not None and isinstance(leader, int) else None
    address = node.address("http") if node is not None else None
    if address is None:
        return None
    host, port = address
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    url = request.url
    location = f"{url.scheme}://{host}:{port}{url.path}" + (f"?{url.query}" if url.query else "")
    body = {"id": error.code, "code": error.name, "reason": error.reason, "field": error.field}
    return JSONResponse(body, status_code=REDIRECT, headers={"Location": location})
