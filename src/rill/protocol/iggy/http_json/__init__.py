"""The HTTP JSON API as data: command dataclass <-> method, path, query and body (wire §8.4).

Owns: ``ENDPOINTS``, one ``Endpoint`` per command that has an HTTP route: its method, path
template, success status, whether it is a get-single endpoint (any failure answers 404), how a
command becomes a request (``encode_request``: the SDK's HTTP transport) and how a request
becomes the command (``decode_request``: the server's routes); and how each command's result
travels as JSON (``encode_result`` / ``decode_result``). Both sides call this one table, so
one round-trip test covers them. Values live in ``.values``, reply records in ``.records``,
the longer request mappings in ``.requests``.

Conventions of the mapping (*choice* marks what the spec leaves open):
* path ids: all-digit text is a numeric Identifier, anything else a name (a name made only of
  digits cannot be addressed by name over HTTP);
* HTTP consumers are regular consumers (the ``id`` query/body field, default 1); commands for
  a consumer group, and commands without a route (GET_ME, JOIN/LEAVE group), raise
  ``errors.FeatureUnavailable``;
* *choice*: an absent ``partition_id`` (poll, offsets) means "not given", as 0 does on the
  binary wire (for a regular consumer that is partition 1, the spec's HTTP default);
* an explicit ``stream_id``/``topic_id``/``group_id`` of 0 or ``replication_factor`` of 0 in a
  create body is refused (1014/2016/5002/2018); absent means "the server chooses" (the wire 0);
* request readers refuse unknown fields and wrong JSON types (``errors.InvalidFormat``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import quote, urlencode

from rill import errors
from rill.protocol.iggy.commands import groups as g
from rill.protocol.iggy.commands import offsets as o
from rill.protocol.iggy.commands import partitions as p
from rill.protocol.iggy.commands import streams as s
from rill.protocol.iggy.commands import system as sy
from rill.protocol.iggy.commands import tokens as tk
from rill.protocol.iggy.commands import topics as t
from rill.protocol.iggy.commands import users as u
from rill.protocol.iggy.commands.base import Command
from rill.protocol.iggy.http_json import records as rec
from rill.protocol.iggy.http_json import requests as r
from rill.protocol.iggy.http_json import values as v
from rill.protocol.iggy.http_json.values import Params
from rill.protocol.iggy.responses.users import IdentityInfo

__all__ = [
    "ENDPOINTS", "Endpoint", "HttpRequest", "decode_request", "decode_result", "encode_identity",
    "encode_request", "encode_result", "endpoint",
]


@dataclass(frozen=True)
class HttpRequest:
    """One HTTP call: ``path`` is the template; ``path_params`` and ``query`` hold plain text."""

    method: str
    path: str
    path_params: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    body: Any = None  # a JSON value, or None for no body

    @property
    def target(self) -> str:
        """The request target: the path with percent-encoded parameters, then the query."""
        path = self.path.format(**{k: quote(val, safe="") for k, val in self.path_params.items()})
        return f"{path}?{urlencode(self.query)}" if self.query else path


ToHttp = Callable[[Any], "tuple[dict[str, str], dict[str, str], Any]"]
FromHttp = Callable[[Params, Params, Any], Command]


@dataclass(frozen=True)
class Endpoint:
    name: str  # the command's NAME
    method: str
    path: str
    status: int  # the success status
    to_http: ToHttp  # command -> (path params, query, JSON body)
    from_http: FromHttp  # (path params, query, JSON body) -> command
    get_single: bool = False


_NO_PARAMS: tuple[dict[str, str], dict[str, str], None] = ({}, {}, None)
_S = "/streams/{stream_id}"
_T = _S + "/topics/{topic_id}"
_G = _T + "/consumer-groups"


def _ids(*names: str) -> ToHttp:
    """A request with only Identifier path params."""
    return lambda c: (r.ids(c, *names), {}, None)


def _body(make: Callable[[Any], Any], *names: str) -> ToHttp:
    return lambda c: (r.ids(c, *names), {}, make(c))


def _present(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


_LIST = [
    # system and clients
    Endpoint("ping", "GET", "/ping", 200, lambda c: _NO_PARAMS, lambda pp, q, b: sy.Ping()),
    Endpoint("get_stats", "GET", "/stats", 200, lambda c: _NO_PARAMS, lambda pp, q, b: sy.GetStats()),
    Endpoint("get_snapshot", "POST", "/snapshot", 200, _body(lambda c: {
        "snapshot_types": [v.SNAPSHOT_TYPE.name(x) for x in c.types],
        "compression": v.SNAPSHOT_COMPRESSION.name(c.compression)}), lambda pp, q, b: r.snapshot(b)),
    Endpoint("get_clients", "GET", "/clients", 200, lambda c: _NO_PARAMS,
             lambda pp, q, b: sy.GetClients()),
    Endpoint("get_client", "GET", "/clients/{client_id}", 200,
             lambda c: ({"client_id": str(c.client_id)}, {}, None),
             lambda pp, q, b: r.client_id(pp), get_single=True),
    # users and sessions
    Endpoint("login_user", "POST", "/users/login", 200, _body(lambda c: _present(
        username=c.username, password=c.password, version=c.version, context=c.context)),
        lambda pp, q, b: r.login(b)),
    Endpoint("logout_user", "DELETE", "/users/logout", 204, lambda c: _NO_PARAMS,
             lambda pp, q, b: u.LogoutUser()),
    Endpoint("get_users", "GET", "/users", 200, lambda c: _NO_PARAMS, lambda pp, q, b: u.GetUsers()),
    Endpoint("get_user", "GET", "/users/{user_id}", 200, _ids("user_id"),
             lambda pp, q, b: u.GetUser(*r.path_ids(pp, "user_id")), get_single=True),
    Endpoint("create_user", "POST", "/users", 200, _body(lambda c: {
        "username": c.username, "password": c.password, "status": v.USER_STATUS.name(c.status),
        "permissions": v.permissions_json(c.permissions)}), lambda pp, q, b: r.create_user(b)),
    Endpoint("update_user", "PUT", "/users/{user_id}", 204, _body(lambda c: _present(
        username=c.username, status=None if c.status is None else v.USER_STATUS.name(c.status)),
        "user_id"), lambda pp, q, b: r.update_user(pp, b)),
    Endpoint("update_permissions", "PUT", "/users/{user_id}/permissions", 204,
             _body(lambda c: {"permissions": v.permissions_json(c.permissions)}, "user_id"),
             lambda pp, q, b: r.update_permissions(pp, b)),
    Endpoint("change_password", "PUT", "/users/{user_id}/password", 204, _body(lambda c: {
        "current_password": c.current_password, "new_password": c.new_password}, "user_id"),
        lambda pp, q, b: r.change_password(pp, b)),
    Endpoint("delete_user", "DELETE", "/users/{user_id}", 204, _ids("user_id"),
             lambda pp, q, b: u.DeleteUser(*r.path_ids(pp, "user_id"))),
    Endpoint("unlock_user", "POST", "/users/{user_id}/unlock", 204, _ids("user_id"),
             lambda pp, q, b: u.UnlockUser(*r.path_ids(pp, "user_id"))),
    # personal access tokens
    Endpoint("get_personal_access_tokens", "GET", "/personal-access-tokens", 200,
             lambda c: _NO_PARAMS, lambda pp, q, b: tk.GetPersonalAccessTokens()),
    Endpoint("create_personal_access_token", "POST", "/personal-access-tokens", 200,
             _body(lambda c: {"name": c.name, "expiry": c.expiry}), lambda pp, q, b: r.create_token(b)),
    Endpoint("delete_personal_access_token", "DELETE", "/personal-access-tokens/{name}", 204,
             lambda c: ({"name": c.name}, {}, None),
             lambda pp, q, b: tk.DeletePersonalAccessToken(pp.get("name", ""))),
    Endpoint("login_with_personal_access_token", "POST", "/personal-access-tokens/login", 200,
             _body(lambda c: {"token": c.token}), lambda pp, q, b: tk.LoginWithPersonalAccessToken(
                 v.read_str(v.body(b, ("token",))["token"], "token"))),
    # streams
    Endpoint("get_streams", "GET", "/streams", 200, lambda c: _NO_PARAMS, lambda pp, q, b: s.GetStreams()),
    Endpoint("get_stream", "GET", _S, 200, _ids("stream_id"),
             lambda pp, q, b: s.GetStream(*r.path_ids(pp, "stream_id")), get_single=True),
    Endpoint("create_stream", "POST", "/streams", 200,
             _body(lambda c: r.with_id("stream_id", c.stream_id, {"name": c.name})),
             lambda pp, q, b: r.create_stream(b)),
    Endpoint("update_stream", "PUT", _S, 204, _body(lambda c: {"name": c.name}, "stream_id"),
             lambda pp, q, b: s.UpdateStream(*r.path_ids(pp, "stream_id"),
                                             v.read_str(v.body(b, ("name",))["name"], "name"))),
    Endpoint("delete_stream", "DELETE", _S, 204, _ids("stream_id"),
             lambda pp, q, b: s.DeleteStream(*r.path_ids(pp, "stream_id"))),
    Endpoint("purge_stream", "DELETE", _S + "/purge", 204, _ids("stream_id"),
             lambda pp, q, b: s.PurgeStream(*r.path_ids(pp, "stream_id"))),
    # topics and partitions
    Endpoint("get_topics", "GET", _S + "/topics", 200, _ids("stream_id"),
             lambda pp, q, b: t.GetTopics(*r.path_ids(pp, "stream_id"))),
    Endpoint("get_topic", "GET", _T, 200, _ids("stream_id", "topic_id"),
             lambda pp, q, b: t.GetTopic(*r.path_ids(pp, "stream_id", "topic_id")), get_single=True),
    Endpoint("create_topic", "POST", _S + "/topics", 200, _body(lambda c: r.with_id(
        "topic_id", c.topic_id, {**r.topic_body(c), "partitions_count": c.partitions_count}),
        "stream_id"), lambda pp, q, b: r.create_topic(pp, b)),
    Endpoint("create_topic_with_format", "POST", _S + "/topics", 200, _body(lambda c: r.with_id(
        "topic_id", c.topic_id, {**r.topic_body(c), "partitions_count": c.partitions_count,
                                 "record_format": c.record_format}),
        "stream_id"), lambda pp, q, b: r.create_topic(pp, b)),
    Endpoint("get_topic_record_formats", "GET", _S + "/topic-record-formats", 200,
             _ids("stream_id"),
             lambda pp, q, b: t.GetTopicRecordFormats(*r.path_ids(pp, "stream_id"))),
    Endpoint("update_topic", "PUT", _T, 204, _body(r.topic_body, "stream_id", "topic_id"),
             lambda pp, q, b: r.update_topic(pp, b)),
    Endpoint("delete_topic", "DELETE", _T, 204, _ids("stream_id", "topic_id"),
             lambda pp, q, b: t.DeleteTopic(*r.path_ids(pp, "stream_id", "topic_id"))),
    Endpoint("purge_topic", "DELETE", _T + "/purge", 204, _ids("stream_id", "topic_id"),
             lambda pp, q, b: t.PurgeTopic(*r.path_ids(pp, "stream_id", "topic_id"))),
    Endpoint("create_partitions", "POST", _T + "/partitions", 201,
             _body(lambda c: {"partitions_count": c.partitions_count}, "stream_id", "topic_id"),
             lambda pp, q, b: p.CreatePartitions(*r.path_ids(pp, "stream_id", "topic_id"), v.read_int(
                 v.body(b, ("partitions_count",))["partitions_count"], "partitions_count", v.U32_MAX))),
    Endpoint("delete_partitions", "DELETE", _T + "/partitions", 204,
             lambda c: (r.ids(c, "stream_id", "topic_id"), {"partitions_count": str(c.partitions_count)}, None),
             lambda pp, q, b: p.DeletePartitions(*r.path_ids(pp, "stream_id", "topic_id"),
                                                 v.query_int(q, "partitions_count", 1, v.U32_MAX))),
    # messages and consumer offsets
    Endpoint("send_messages", "POST", _T + "/messages", 201,
             _body(r.send_body, "stream_id", "topic_id"), lambda pp, q, b: r.send(pp, b)),
    Endpoint("poll_messages", "GET", _T + "/messages", 200,
             lambda c: (r.ids(c, "stream_id", "topic_id"), r.poll_query(c), None),
             lambda pp, q, b: r.poll(pp, q)),
    Endpoint("flush_unsaved_buffer", "GET", _T + "/messages/flush/{partition_id}/{fsync}", 200,
             lambda c: ({**r.ids(c, "stream_id", "topic_id"), "partition_id": str(c.partition_id),
                         "fsync": "true" if c.fsync else "false"}, {}, None),
             lambda pp, q, b: r.flush(pp)),
    Endpoint("get_consumer_offset", "GET", _T + "/consumer-offsets", 200,
             lambda c: (r.ids(c, "stream_id", "topic_id"), r.offset_query(c), None),
             lambda pp, q, b: o.GetConsumerOffset(
                 v.read_consumer(q.get("id")), *r.path_ids(pp, "stream_id", "topic_id"),
                 v.query_int(q, "partition_id", 0, v.U32_MAX)), get_single=True),
    Endpoint("store_consumer_offset", "PUT", _T + "/consumer-offsets", 204,
             _body(r.store_offset_body, "stream_id", "topic_id"), lambda pp, q, b: r.store_offset(pp, b)),
    Endpoint("get_consumer_lag", "GET", _T + "/consumer-lag", 200, _ids("stream_id", "topic_id"),
             lambda pp, q, b: o.GetConsumerLag(*r.path_ids(pp, "stream_id", "topic_id"))),
    # consumer groups
    Endpoint("get_consumer_groups", "GET", _G, 200, _ids("stream_id", "topic_id"),
             lambda pp, q, b: g.GetConsumerGroups(*r.path_ids(pp, "stream_id", "topic_id"))),
    Endpoint("get_consumer_group", "GET", _G + "/{group_id}", 200, _ids("stream_id", "topic_id", "group_id"),
             lambda pp, q, b: g.GetConsumerGroup(*r.path_ids(pp, "stream_id", "topic_id", "group_id")),
             get_single=True),
    Endpoint("create_consumer_group", "POST", _G, 201,
             _body(lambda c: r.with_id("group_id", c.group_id, {"name": c.name}), "stream_id", "topic_id"),
             lambda pp, q, b: r.create_group(pp, b)),
    Endpoint("delete_consumer_group", "DELETE", _G + "/{group_id}", 204,
             _ids("stream_id", "topic_id", "group_id"),
             lambda pp, q, b: g.DeleteConsumerGroup(*r.path_ids(pp, "stream_id", "topic_id", "group_id"))),
]
ENDPOINTS: dict[str, Endpoint] = {spec.name: spec for spec in _LIST}


def endpoint(name: str) -> Endpoint:
    try:
        return ENDPOINTS[name]
    except KeyError:
        raise errors.FeatureUnavailable(
            reason=f"Feature is unavailable: {name} has no HTTP endpoint; use TCP or QUIC"
        ) from None


def encode_request(command: Command) -> HttpRequest:
    """The HTTP call for ``command`` (the SDK side); FeatureUnavailable when there is none."""
    spec = endpoint(command.NAME)
    path_params, query, data = spec.to_http(command)
    return HttpRequest(spec.method, spec.path, path_params, query, data)


def decode_request(name: str, path_params: Params, query: Params, data: Any) -> Command:
    """The command an HTTP call asks for (the server side); raises InvalidFormat & co."""
    return endpoint(name).from_http(path_params, query, data)


def encode_identity(user_id: int, token: str, expiry: int) -> dict[str, Any]:
    """IdentityInfo over HTTP: the user id and its access token (``expiry`` in unix seconds)."""
    return {"user_id": user_id, "access_token": {"token": token, "expiry": expiry}}


def _many(function: Callable[[Any], Any]) -> Callable[[Any], list[Any]]:
    return lambda items: [function(item) for item in items]


# command name -> (result -> JSON, JSON -> result); commands not listed answer no body
_RESULTS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {}
for _names, _codec in (
    ("get_stream create_stream", (rec.stream_details_json, rec.stream_details_from_json)),
    ("get_streams", (_many(rec.stream_json), _many(rec.stream_from_json))),
    ("get_topic create_topic create_topic_with_format",
     (rec.topic_details_json, rec.topic_details_from_json)),
    ("get_topic_record_formats", (_many(rec.record_format_json), _many(rec.record_format_from_json))),
    ("get_topics", (_many(rec.topic_json), _many(rec.topic_from_json))),
    ("get_consumer_group create_consumer_group", (rec.group_details_json, rec.group_details_from_json)),
    ("get_consumer_groups", (_many(rec.group_json), _many(rec.group_from_json))),
    ("get_consumer_offset", (rec.offset_json, rec.offset_from_json)),
    ("get_consumer_lag", (_many(rec.lag_json), _many(rec.lag_from_json))),
    ("get_user create_user", (rec.user_details_json, rec.user_details_from_json)),
    ("get_users", (_many(rec.user_json), _many(rec.user_from_json))),
    ("get_personal_access_tokens", (_many(rec.token_info_json), _many(rec.token_info_from_json))),
    ("create_personal_access_token",  # the Core answers the record, the SDK reads the text
     (lambda token: {"token": getattr(token, "token", token)}, lambda data: data["token"])),
    ("login_user login_with_personal_access_token",
     (lambda identity: {"user_id": identity.user_id}, lambda data: IdentityInfo(data["user_id"]))),
    ("get_stats", (rec.stats_json, rec.stats_from_json)),
    ("get_clients", (_many(rec.client_json), _many(rec.client_from_json))),
    ("get_client", (rec.client_details_json, rec.client_details_from_json)),
    ("poll_messages", (rec.polled_json, rec.polled_from_json)),
):
    for _name in _names.split():
        _RESULTS[_name] = _codec


def has_json_result(name: str) -> bool:
    return name in _RESULTS


def encode_result(name: str, result: Any) -> Any:
    """The JSON value of a command's result (None for commands that answer no body)."""
    codec = _RESULTS.get(name)
    return None if codec is None or result is None else codec[0](result)


def decode_result(name: str, data: Any) -> Any:
    """The result the binary ``decode_response`` would give, read from the JSON reply."""
    codec = _RESULTS.get(name)
    return None if codec is None or data is None else codec[1](data)
