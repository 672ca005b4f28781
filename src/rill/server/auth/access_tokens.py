"""HTTP access tokens (wire §8.2): the signing secret, issuing, verifying, revoking, refreshing.
Auth owns them; the HTTP transport only reads the bearer header and calls ``JwtManager``.

Owns: ``JwtManager``. Tokens are JWTs signed with HMAC (``[http.jwt] algorithm``: HS256 by
default; HS384/HS512 also work) and carry ``jti`` (a UUIDv7 string), ``sub`` (the user id, a
JSON number as in Iggy), ``iss``/``aud`` (config), ``iat``, ``nbf`` (= iat + ``not_before``)
and ``exp`` (= iat + ``access_token_expiry``; "never" = iat + 1,000,000,000 s), all in unix
seconds. Verification allows ``clock_skew`` of leeway and requires every claim.

The secret: 64 random bytes generated at the first start into ``paths.jwt_secret`` (file mode
0600 in a 0700 directory, written by ``storage.durability.write_private_file``, so a crash never
leaves a torn secret) and read back at every later start, so tokens survive a restart. No secret ships
with rill. A cluster node's secret is the cluster's instead (one per cluster, kept in etcd
beside the peer secret: ``cluster.node``): from ``await_secret`` (before the listeners start)
until ``use_secret``, issuing and verifying refuse with a clear line, so no token is ever
signed with a secret the other nodes do not hold.

Revocation (logout, refresh): the token id is written to the metadata store with the token's
expiry and kept in memory; every verification checks it. In a cluster every revocation is also
published (``share_revocations``: etcd's ``revoked/<token id>``, until the token's expiry) and
other nodes' arrive through ``apply_revoked``, so a token logged out on one node is refused by
all (once their watch delivered it: milliseconds). ``run_cleaner`` forgets revocations
of tokens that would have expired anyway.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jwt

from rill import errors
from rill.server.config import NEVER, JwtConfig
from rill.server.storage.durability import write_private_file
from rill.server.storage.metadata import MetadataStore

log = logging.getLogger(__name__)

SECRET_BYTES = 64
NEVER_EXPIRES_SECONDS = 1_000_000_000
SUPPORTED_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})
CLEANER_INTERVAL = 60.0
_REQUIRED_CLAIMS = ["jti", "sub", "iss", "aud", "iat", "nbf", "exp"]


@dataclass(frozen=True)
class AccessToken:
    token: str
    token_id: str
    user_id: int
    expiry: int  # unix seconds


def uuid7() -> str:
    """A UUIDv7 string: 48-bit unix milliseconds, version 7, variant 10, random bits."""
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(secrets.token_bytes(10), "big")
    value = value & ~(0xF << 76) | 0x7 << 76  # version
    value = value & ~(0x3 << 62) | 0x2 << 62  # variant
    return str(uuid.UUID(int=value))


def load_or_create_secret(path: Path) -> bytes:
    """The signing secret: read from ``path``, or generated there at the first start."""
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    try:
        secret = path.read_bytes()
    except FileNotFoundError:
        secret = secrets.token_bytes(SECRET_BYTES)
        write_private_file(path, secret)
        log.info("generated a new HTTP token signing secret in %s", path)
    if len(secret) < 32:
        raise errors.InvalidJwtSecret(reason=f"Invalid JWT secret: {path} holds fewer than 32 bytes")
    return secret


class JwtManager:
    def __init__(self, config: JwtConfig, secret: bytes, store: MetadataStore) -> None:
        if config.algorithm not in SUPPORTED_ALGORITHMS:
            raise errors.InvalidJwtAlgorithm(config.algorithm)
        self.config = config
        self._secret = secret
        self._waiting = False  # a cluster node before it has the cluster's secret
        self._store = store
        self._revoked: dict[str, int] = store.load_revoked_access_tokens()
        self._publish: Callable[[str, int], None] | None = None

    # -- the secret ------------------------------------------------------------------------

    def await_secret(self) -> None:
        """Refuse to issue or verify until ``use_secret`` (a cluster node's, from etcd)."""
        self._waiting = True

    def use_secret(self, secret: bytes) -> None:
        if len(secret) < 32:
            raise errors.InvalidJwtSecret(reason="Invalid JWT secret: fewer than 32 bytes")
        self._secret = secret
        self._waiting = False

    def _check_secret(self) -> None:
        if self._waiting:
            raise errors.ClusterUnavailable(reason=(
                "HTTP access tokens wait for the cluster's signing secret (this node has not "
                "joined the cluster yet)"))

    # -- issuing ---------------------------------------------------------------------------

    def issue(self, user_id: int) -> AccessToken:
        self._check_secret()
        config = self.config
        now = int(time.time())
        lifetime = config.access_token_expiry
        expiry = now + (NEVER_EXPIRES_SECONDS if lifetime == NEVER else int(lifetime))
        token_id = uuid7()
        claims = {
            "jti": token_id, "sub": user_id, "iss": config.issuer, "aud": config.audience,
            "iat": now, "nbf": now + int(config.not_before), "exp": expiry,
        }
        token = jwt.encode(claims, self._secret, algorithm=config.algorithm)
        return AccessToken(token, token_id, user_id, expiry)

    # -- verifying -------------------------------------------------------------------------

    def verify(self, token: str) -> AccessToken:
        """The token's claims; 78 ``invalid_access_token`` when it is bad, expired or revoked."""
        self._check_secret()
        config = self.config
        try:
            claims = jwt.decode(
                token, self._secret, algorithms=[config.algorithm], audience=config.audience,
                issuer=config.issuer, leeway=config.clock_skew,
                options={"require": _REQUIRED_CLAIMS, "verify_sub": False},
            )
        except jwt.PyJWTError as error:
            raise errors.InvalidAccessToken(reason=f"Invalid access token: {error}") from None
        token_id, user_id, expiry = claims["jti"], claims["sub"], claims["exp"]
        if not isinstance(token_id, str) or isinstance(user_id, bool) or not isinstance(user_id, int):
            raise errors.InvalidAccessToken()
        if token_id in self._revoked:
            raise errors.InvalidAccessToken(reason="Invalid access token: it was revoked")
        return AccessToken(token, token_id, user_id, int(expiry))

    # -- revoking --------------------------------------------------------------------------

    def revoke(self, token: AccessToken) -> None:
        self._store.revoke_access_token(token.token_id, token.expiry)
        self._revoked[token.token_id] = token.expiry
        if self._publish is not None:
            self._publish(token.token_id, token.expiry)

    def share_revocations(self, publish: Callable[[str, int], None]) -> None:
        """From now on every revocation here is also given to ``publish`` (token id, expiry in
        unix seconds): a cluster's other nodes learn of it."""
        self._publish = publish

    def apply_revoked(self, token_id: str, expiry: int) -> None:
        """Another node revoked ``token_id``."""
        if token_id not in self._revoked:
            self._store.revoke_access_token(token_id, expiry)
            self._revoked[token_id] = expiry

    def refresh(self, token: str) -> AccessToken:
        """Revoke a still-valid token and issue a new one for the same user."""
        current = self.verify(token)
        self.revoke(current)
        return self.issue(current.user_id)

    def forget_expired_revocations(self, now_seconds: int | None = None) -> None:
        now = int(time.time()) if now_seconds is None else now_seconds
        # + skew: a token that still verifies within the leeway must stay revoked
        limit = now - int(self.config.clock_skew) - 1
        self._store.delete_expired_revocations(limit)
        for token_id in [tid for tid, expiry in self._revoked.items() if expiry <= limit]:
            del self._revoked[token_id]

    async def run_cleaner(self, interval: float = CLEANER_INTERVAL) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                self.forget_expired_revocations()
            except Exception:  # noqa: BLE001 - keep cleaning next time
                log.exception("cannot forget expired token revocations")
