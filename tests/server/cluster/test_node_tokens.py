"""Personal access tokens and HTTP access tokens across three real rill nodes over a real etcd
cluster: a token made on one node logs in on the others, a deleted one is refused everywhere,
an expired one too; etcd holds only its hash; a JWT one node's HTTP issued is accepted by
the others' (one signing secret per cluster, in etcd), and one logged out on one node is
refused by all."""

from __future__ import annotations


import httpx
import pytest
from rill_cluster import RillCluster
from test_node import wait_for

from rill import errors
from rill.client import Client
from rill.server.core.tokens import hash_token



def logs_in(cluster: RillCluster, node_id: int, token: str) -> bool | str:
    """True when ``token`` logs in on the node, else the refusal's error name."""
    with Client(cluster.nodes[node_id].address("tcp")) as client:
        try:
            client.login_with_personal_access_token(token)
            return True
        except errors.RillError as error:
            return error.name


def test_a_token_made_on_one_node_logs_in_on_every_node_until_deleted(cluster) -> None:
    with cluster.client(1) as client:
        token = client.create_personal_access_token("deploy-bot")
    for node_id in (2, 3):
        assert wait_for(lambda node_id=node_id: logs_in(cluster, node_id, token) is True,
                        what=f"the token logging in on node {node_id}")
    stored = cluster.read(cluster.keys.tokens)
    assert [value["row"]["token_hash"] for _, value in stored] == [hash_token(token)]
    assert token not in str(stored)  # the raw token is never stored
    with cluster.client(3) as client:
        assert [t.name for t in client.get_personal_access_tokens()] == ["deploy-bot"]
        with pytest.raises(errors.PersonalAccessTokenAlreadyExists):
            client.create_personal_access_token("deploy-bot")
    with cluster.client(2) as client:
        client.delete_personal_access_token("deploy-bot")
    for node_id in (1, 3):
        assert wait_for(lambda node_id=node_id: logs_in(cluster, node_id, token) == "resource_not_found",
                        what=f"the deleted token refused on node {node_id}")
    assert not cluster.read(cluster.keys.tokens)


def test_an_expired_token_is_refused_on_every_node(cluster) -> None:
    with cluster.client(1) as client:
        token = client.create_personal_access_token("short-lived", expiry=3_000_000)  # 3 s
    for node_id in (1, 2, 3):
        assert wait_for(lambda node_id=node_id: logs_in(cluster, node_id, token) in (
            True, "personal_access_token_expired"), what=f"the token known on {node_id}")
    for node_id in (1, 2, 3):
        assert wait_for(lambda node_id=node_id: logs_in(cluster, node_id, token) ==
                        "personal_access_token_expired", what=f"the token expired on {node_id}")


def test_an_http_access_token_issued_by_one_node_is_accepted_by_the_others(cluster) -> None:
    urls = {n: cluster.nodes[n].http_url for n in (1, 2, 3)}
    login = httpx.post(urls[1] + "/users/login", json={"username": "iggy", "password": "iggy"},
                       timeout=10)
    assert login.status_code == 200, login.text
    bearer = {"Authorization": f"Bearer {login.json()['access_token']['token']}"}
    for node_id in (1, 2, 3):
        answer = httpx.get(urls[node_id] + "/streams", headers=bearer, timeout=10)
        assert answer.status_code == 200, (node_id, answer.text)
    # logged out on node 2: refused by every node
    assert httpx.delete(urls[2] + "/users/logout", headers=bearer, timeout=10).status_code == 204
    for node_id in (1, 3):
        assert wait_for(lambda node_id=node_id: httpx.get(urls[node_id] + "/streams", headers=bearer,
                                          timeout=10).status_code == 401,
                        what=f"the logged-out token refused by node {node_id}")
