"""``auth.access_tokens.JwtManager`` in a cluster: the signing secret it waits for and then
takes from the cluster, and revocations shared with (and applied from) other nodes."""

from __future__ import annotations

import secrets

import pytest

from rill import errors
from rill.server.auth.access_tokens import JwtManager
from rill.server.config import JwtConfig
from rill.server.core.memory_catalog import MemoryCatalog


def manager(secret: bytes | None = None) -> JwtManager:
    return JwtManager(JwtConfig(), secret or secrets.token_bytes(64), MemoryCatalog())


def test_a_node_waiting_for_the_clusters_secret_neither_issues_nor_verifies() -> None:
    shared = secrets.token_bytes(64)
    issued = manager(shared).issue(1)
    waiting = manager()
    waiting.await_secret()
    with pytest.raises(errors.ClusterUnavailable):
        waiting.issue(1)
    with pytest.raises(errors.ClusterUnavailable):
        waiting.verify(issued.token)
    waiting.use_secret(shared)
    assert waiting.verify(issued.token).user_id == 1  # the other node's token
    assert manager(shared).verify(waiting.issue(2).token).user_id == 2
    with pytest.raises(errors.InvalidJwtSecret):
        waiting.use_secret(b"short")


def test_revocations_are_published_and_applied() -> None:
    shared = secrets.token_bytes(64)
    here, there = manager(shared), manager(shared)
    published: list[tuple[str, int]] = []
    here.share_revocations(lambda token_id, expiry: published.append((token_id, expiry)))
    token = here.issue(1)
    here.revoke(here.verify(token.token))
    assert published == [(token.token_id, token.expiry)]
    assert there.verify(token.token).user_id == 1  # not yet told
    there.apply_revoked(*published[0])
    with pytest.raises(errors.InvalidAccessToken):
        there.verify(token.token)
