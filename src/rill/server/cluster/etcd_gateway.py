"""The Coordinator on etcd: its v3 JSON gateway (``/v3/...``) over asyncio, with httpx.

Owns: the JSON shapes of etcd's gateway (keys and values in base64, 64-bit numbers as strings,
fields left out when zero or empty), endpoint failover, the mapping of etcd's errors onto the
coordinator's, and the detection of a watch whose member stopped answering.

Why the gateway and httpx: the Python etcd clients are unmaintained or pull in gRPC
(``shared/spec/cluster-design.md`` §2.11); the gateway is part of every etcd 3.4+ and needs
plain HTTP/1.1 with streamed responses, which httpx (asyncio, maintained, already the suite's
HTTP client) does in a few lines each. It is a main dependency rather than an extra: a node
given ``[cluster] etcd_endpoints`` must not fail for a missing package.

Rules:
* Every request carries ``Grpc-Metadata-Hasleader: true`` (gRPC's ``WithRequireLeader``): a
  member cut off from its majority answers "no leader" at once instead of hanging (measured:
  a plain gateway watch there stays silent), and this client tries the next endpoint.
* Failover: a request goes to the current endpoint; on a refused connection, a member without
  a leader, or (for reads and keepalives) a timeout, the next endpoint is tried, each once. A
  write whose request was sent but not answered raises ``CoordinatorUnavailable`` (its outcome
  is unknown: the caller's compares make a retry safe).
* A watch waits for etcd's "created" answer before it counts as open, and while no change
  arrives it asks its member for its status every ``probe_interval``: a member that is paused
  or lost its leader ends the watch (``CoordinatorUnavailable`` / ``NoLeader``) instead of
  leaving it silent forever.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx

from rill.server.cluster.coordinator import (
    Compacted,
    Compare,
    Coordinator,
    CoordinatorError,
    CoordinatorUnavailable,
    Delete,
    Get,
    KeyValue,
    LeaseGrant,
    LeaseNotFound,
    NoLeader,
    Operation,
    OperationResult,
    Put,
    RangeResult,
    TxnResult,
    WatchBatch,
    WatchEvent,
    prefix_end,
)

REQUIRE_LEADER = {"Grpc-Metadata-Hasleader": "true"}
COMPARE_TARGETS = {"value": ("VALUE", "value"), "version": ("VERSION", "version"),
                   "create_revision": ("CREATE", "create_revision"),
                   "mod_revision": ("MOD", "mod_revision"), "lease": ("LEASE", "lease")}
COMPARE_RESULTS = {"==": "EQUAL", "!=": "NOT_EQUAL", "<": "LESS", ">": "GREATER"}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def _key_value(data: dict[str, Any]) -> KeyValue:
    return KeyValue(_unb64(data.get("key")), _unb64(data.get("value")),
                    int(data.get("create_revision", 0)), int(data.get("mod_revision", 0)),
                    int(data.get("version", 0)), int(data.get("lease", 0)))


def _revision(data: dict[str, Any]) -> int:
    return int(data.get("header", {}).get("revision", 0))


def _range_request(key: bytes, prefix: bool) -> dict[str, str]:
    request = {"key": _b64(key)}
    if prefix:
        request["range_end"] = _b64(prefix_end(key))
    return request


def _compare(compare: Compare) -> dict[str, str]:
    target, field = COMPARE_TARGETS[compare.target]
    operand = compare.operand
    return {"key": _b64(compare.key), "target": target,
            "result": COMPARE_RESULTS[compare.operator],
            field: _b64(operand) if isinstance(operand, bytes) else str(operand)}


def _operation(operation: Operation) -> dict[str, Any]:
    if isinstance(operation, Put):
        put = {"key": _b64(operation.key), "value": _b64(operation.value)}
        if operation.lease:
            put["lease"] = str(operation.lease)
        return {"request_put": put}
    if isinstance(operation, Get):
        return {"request_range": _range_request(operation.key, operation.prefix)}
    if isinstance(operation, Delete):
        return {"request_delete_range": _range_request(operation.key, operation.prefix)}
    raise TypeError(f"not a transaction operation: {operation!r}")


def _operation_result(response: dict[str, Any]) -> OperationResult:
    if "response_range" in response:
        return tuple(map(_key_value, response["response_range"].get("kvs", ())))
    if "response_delete_range" in response:
        return int(response["response_delete_range"].get("deleted", 0))
    return None


def _error(data: Any, endpoint: str) -> CoordinatorError:
    """The coordinator's error for an etcd error answer."""
    if isinstance(data, dict):
        detail = data.get("error")
        message = detail.get("message") if isinstance(detail, dict) else detail
        message = str(message or data.get("message") or data)
    else:
        message = str(data)
    if "no leader" in message:
        return NoLeader(f"etcd at {endpoint}: {message}")
    if "lease not found" in message:
        return LeaseNotFound(message)
    if "required revision has been compacted" in message:
        return Compacted(0)
    if "timed out" in message or "leader changed" in message or "stopped" in message:
        return CoordinatorUnavailable(f"etcd at {endpoint}: {message}")
    return CoordinatorError(f"etcd at {endpoint}: {message}")


class EtcdGateway(Coordinator):
    def __init__(self, endpoints: Sequence[str], request_timeout: float = 2.0,
                 connect_timeout: float = 0.5, probe_interval: float = 1.0) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoint given")
        self.endpoints = [endpoint.rstrip("/") for endpoint in endpoints]
        self.request_timeout = request_timeout
        self.probe_interval = probe_interval
        self._current = 0
        self._timeout = httpx.Timeout(request_timeout, connect=connect_timeout)
        self._client = httpx.AsyncClient(headers=REQUIRE_LEADER, timeout=self._timeout)

    @property
    def endpoint(self) -> str:
        """The endpoint requests go to first."""
        return self.endpoints[self._current]

    def _rotate(self, failed: str) -> None:
        if self.endpoints[self._current] == failed:
            self._current = (self._current + 1) % len(self.endpoints)

    async def close(self) -> None:
        await self._client.aclose()

    async def _call(self, path: str, body: dict[str, Any], retry_sent: bool = True) -> dict[str, Any]:
        """POST ``body`` to ``path`` on the endpoints in turn; ``retry_sent``: a request sent
        but not answered may go to the next endpoint (reads, keepalives)."""
        failures: list[CoordinatorError] = []
        for _ in self.endpoints:
            endpoint = self.endpoint
            try:
                response = await self._client.post(endpoint + path, json=body)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as error:
                failures.append(CoordinatorUnavailable(f"etcd at {endpoint}: {error!r}"))
                self._rotate(endpoint)
                continue
            except httpx.HTTPError as error:
                self._rotate(endpoint)
                unavailable = CoordinatorUnavailable(f"etcd at {endpoint}: {error!r}")
                if not retry_sent:
                    raise CoordinatorUnavailable(f"{unavailable}; the outcome is unknown") from None
                failures.append(unavailable)
                continue
            try:
                data = response.json()
            except ValueError:
                data = response.text
            if response.status_code == 200 and isinstance(data, dict) and "error" not in data:
                return data
            error = _error(data, endpoint)
            if isinstance(error, NoLeader):
                failures.append(error)  # refused before it applied: another member may lead
                self._rotate(endpoint)
                continue
            if isinstance(error, CoordinatorUnavailable):
                self._rotate(endpoint)
                if retry_sent:
                    failures.append(error)
                    continue
            raise error
        if failures and all(isinstance(failure, NoLeader) for failure in failures):
            raise NoLeader("; ".join(map(str, failures)))
        raise CoordinatorUnavailable("no etcd endpoint answered: " + "; ".join(map(str, failures)))

    # -- key-value -------------------------------------------------------------------------

    async def range(self, key: bytes, prefix: bool = False) -> RangeResult:
        data = await self._call("/v3/kv/range", _range_request(key, prefix))
        return RangeResult(tuple(map(_key_value, data.get("kvs", ()))), _revision(data))

    async def txn(self, compares: Sequence[Compare], success: Sequence[Operation] = (),
                  failure: Sequence[Operation] = ()) -> TxnResult:
        body = {"compare": [_compare(compare) for compare in compares],
                "success": [_operation(operation) for operation in success],
                "failure": [_operation(operation) for operation in failure]}
        writes = any(not isinstance(operation, Get) for operation in (*success, *failure))
        data = await self._call("/v3/kv/txn", body, retry_sent=not writes)
        results = tuple(_operation_result(response) for response in data.get("responses", ()))
        return TxnResult(bool(data.get("succeeded", False)), _revision(data), results)

    async def compact(self, revision: int) -> None:
        await self._call("/v3/kv/compaction", {"revision": str(revision), "physical": True},
                         retry_sent=False)

    # -- leases ----------------------------------------------------------------------------

    async def grant_lease(self, ttl: int) -> LeaseGrant:
        data = await self._call("/v3/lease/grant", {"TTL": str(int(ttl))}, retry_sent=False)
        return LeaseGrant(int(data["ID"]), int(data["TTL"]))

    async def keepalive(self, lease: int) -> int:
        data = await self._call("/v3/lease/keepalive", {"ID": str(lease)})
        return int(data.get("result", {}).get("TTL", 0))

    async def revoke_lease(self, lease: int) -> None:
        await self._call("/v3/lease/revoke", {"ID": str(lease)})

    async def lease_time_to_live(self, lease: int) -> int:
        data = await self._call("/v3/lease/timetolive", {"ID": str(lease)})
        return int(data.get("TTL", -1))

    # -- watches ---------------------------------------------------------------------------

    def watch(self, key: bytes, start_revision: int = 0,
              prefix: bool = True) -> AsyncIterator[WatchBatch]:
        request = _range_request(key, prefix)
        if start_revision:
            request["start_revision"] = str(start_revision)
        return self._watch({"create_request": request})

    async def _open_watch(self, body: dict[str, Any]) -> tuple[str, httpx.Response, AsyncIterator[str], int]:
        """The watch opened on the first endpoint that answers "created"."""
        failures: list[CoordinatorError] = []
        for _ in self.endpoints:
            endpoint = self.endpoint
            request = self._client.build_request(
                "POST", endpoint + "/v3/watch", json=body,
                timeout=httpx.Timeout(self.request_timeout, connect=self._timeout.connect, read=None))
            response: httpx.Response | None = None
            try:
                response = await self._client.send(request, stream=True)
                lines = response.aiter_lines()
                async with asyncio.timeout(self.request_timeout):
                    first = await self._next_line(lines)
            except (TimeoutError, httpx.HTTPError, StopAsyncIteration) as error:
                failure: CoordinatorError = CoordinatorUnavailable(f"etcd at {endpoint}: {error!r}")
            else:
                result = first.get("result")
                if response.status_code == 200 and isinstance(result, dict) and result.get("created"):
                    return endpoint, response, lines, _revision(result)
                failure = _error(first, endpoint)
            if response is not None:
                await response.aclose()
            self._rotate(endpoint)
            if not isinstance(failure, (NoLeader, CoordinatorUnavailable)):
                raise failure
            failures.append(failure)
        if failures and all(isinstance(failure, NoLeader) for failure in failures):
            raise NoLeader("; ".join(map(str, failures)))
        raise CoordinatorUnavailable("no etcd endpoint opened the watch: " + "; ".join(map(str, failures)))

    @staticmethod
    async def _next_line(lines: AsyncIterator[str]) -> dict[str, Any]:
        while True:
            line = await lines.__anext__()
            if line.strip():
                return json.loads(line)

    async def _watch(self, body: dict[str, Any]) -> AsyncIterator[WatchBatch]:
        endpoint, response, lines, opened = await self._open_watch(body)
        pending: asyncio.Task[dict[str, Any]] | None = None
        try:
            yield WatchBatch((), opened)
            while True:
                pending = asyncio.ensure_future(self._next_line(lines))
                while not (await asyncio.wait({pending}, timeout=self.probe_interval))[0]:
                    await self._probe(endpoint)
                try:
                    message = pending.result()
                except (httpx.HTTPError, StopAsyncIteration, ValueError) as error:
                    raise CoordinatorUnavailable(f"etcd at {endpoint}: the watch broke: {error!r}") from None
                pending = None
                result = message.get("result")
                if not isinstance(result, dict):
                    raise _error(message, endpoint)
                if "compact_revision" in result:
                    raise Compacted(int(result["compact_revision"]))
                if result.get("canceled"):
                    raise _error(result.get("cancel_reason") or "watch canceled", endpoint)
                events = tuple(WatchEvent("delete" if event.get("type") == "DELETE" else "put",
                                          _key_value(event["kv"]))
                               for event in result.get("events", ()))
                if events:
                    yield WatchBatch(events, max(event.kv.mod_revision for event in events))
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
            await response.aclose()

    async def _probe(self, endpoint: str) -> None:
        """Raise when ``endpoint`` does not answer in time or has no leader."""
        try:
            response = await self._client.post(endpoint + "/v3/maintenance/status", json={})
            data = response.json()
        except (httpx.HTTPError, ValueError) as error:
            self._rotate(endpoint)
            raise CoordinatorUnavailable(f"etcd at {endpoint} does not answer: {error!r}") from None
        if response.status_code != 200 or "error" in data:
            self._rotate(endpoint)
            raise _error(data, endpoint)
        if not int(data.get("leader", 0)):
            self._rotate(endpoint)
            raise NoLeader(f"etcd at {endpoint}: no leader")
