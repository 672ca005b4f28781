"""SCRAM (RFC 5802) with SHA-256 and SHA-512 (RFC 7677): the credentials and the server's side
of one exchange, sans I/O (stdlib ``hashlib``/``hmac``/``secrets``).

Owns: what is stored for a password (per mechanism: salt, iterations, StoredKey, ServerKey; never
the password, never SaltedPassword), their text form in the metadata store (``encode`` /
``decode``), and the exchange ``ScramExchange``: client-first -> server-first, client-final ->
server-final, every malformed or wrong message raising ``ScramError`` with a message fit for
the client.

Rules: passwords are used as their UTF-8 bytes (no SASLprep, as Kafka); usernames in ``n=`` are
unescaped (``=2C`` ``,``, ``=3D`` ``=``); channel binding is refused (gs2 header ``n`` or ``y``
only); an authzid (``a=``), if given, must equal the username; extensions in client-first are
refused; client-final's nonce must be server-first's, or that nonce after the client's nonce
once more (librdkafka before 2.6.1 sends that; Kafka accepts it too, since 3.8.1); an unknown
user gets a made-up salt (stable per username) so that server-first does not
tell whether the user exists, and fails at client-final like a wrong password.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

SHA256 = "SCRAM-SHA-256"
SHA512 = "SCRAM-SHA-512"
MECHANISMS: dict[str, str] = {SHA256: "sha256", SHA512: "sha512"}  # mechanism -> hashlib name
MIN_ITERATIONS = 4096  # RFC 7677's minimum, also Kafka's
SALT_SIZE = 32
NONCE_SIZE = 24  # random bytes of the server's part of the nonce
_FAKE_SALT_KEY = secrets.token_bytes(32)  # per process: made-up salts of unknown users


class ScramError(Exception):
    """A SCRAM exchange failed; the message is what the client is told."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def _hmac(algorithm: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, algorithm).digest()


def derive(mechanism: str, password: str, salt: bytes | None = None,
           iterations: int = MIN_ITERATIONS) -> ScramCredential:
    """The credential of ``password`` for ``mechanism`` (a new random salt unless given)."""
    algorithm = MECHANISMS[mechanism]
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"SCRAM iterations must be at least {MIN_ITERATIONS}")
    salt = secrets.token_bytes(SALT_SIZE) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(algorithm, password.encode("utf-8"), salt, iterations)
    client_key = _hmac(algorithm, salted, b"Client Key")
    return ScramCredential(salt, iterations, hashlib.new(algorithm, client_key).digest(),
                           _hmac(algorithm, salted, b"Server Key"))


def derive_all(password: str, iterations: int = MIN_ITERATIONS) -> dict[str, ScramCredential]:
    """The credentials of ``password`` for every mechanism (some ms of CPU: run off the loop)."""
    return {mechanism: derive(mechanism, password, iterations=iterations)
            for mechanism in MECHANISMS}


def encode(credentials: dict[str, ScramCredential]) -> str:
    """The stored form: JSON, bytes as base64."""
    b64 = base64.b64encode
    return json.dumps({mechanism: {"salt": b64(c.salt).decode(), "iterations": c.iterations,
                                   "stored_key": b64(c.stored_key).decode(),
                                   "server_key": b64(c.server_key).decode()}
                       for mechanism, c in sorted(credentials.items())}, sort_keys=True)


def decode(text: str | None) -> dict[str, ScramCredential]:
    if not text:
        return {}
    b64 = base64.b64decode
    return {mechanism: ScramCredential(b64(c["salt"]), int(c["iterations"]), b64(c["stored_key"]),
                                       b64(c["server_key"]))
            for mechanism, c in json.loads(text).items() if mechanism in MECHANISMS}


# -- the exchange ----------------------------------------------------------------------------


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    pairs = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise ScramError(f"malformed SCRAM {what}")
        pairs.append((part[0], part[2:]))
    return pairs


def _unescape_name(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("malformed SCRAM username")
    return name.replace("=2C", ",").replace("=3D", "=")


@dataclass(frozen=True, slots=True)
class ClientFirst:
    username: str
    nonce: str
    gs2_header: str
    bare: str  # client-first-message-bare, part of the AuthMessage


def parse_client_first(token: bytes) -> ClientFirst:
    try:
        message = token.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("SCRAM client-first message is not UTF-8") from None
    parts = message.split(",", 2)
    if len(parts) != 3:
        raise ScramError("malformed SCRAM client-first message")
    binding, authzid, bare = parts
    if binding.startswith("p="):
        raise ScramError("SCRAM channel binding is not supported")
    if binding not in ("n", "y") or (authzid and not authzid.startswith("a=")):
        raise ScramError("malformed SCRAM client-first message")
    attributes = _attributes(bare, "client-first message")
    if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
        raise ScramError("malformed SCRAM client-first message")
    if len(attributes) > 2:
        raise ScramError("SCRAM extensions are not supported")
    username = _unescape_name(attributes[0][1])
    nonce = attributes[1][1]
    if not username or not nonce:
        raise ScramError("malformed SCRAM client-first message")
    if authzid and _unescape_name(authzid[2:]) != username:
        raise ScramError("SCRAM authorization id differs from the username")
    return ClientFirst(username, nonce, f"{binding},{authzid},", bare)


def fake_credential(mechanism: str, username: str) -> ScramCredential:
    """A credential nobody can prove, with a salt that stays the same for ``username``."""
    salt = _hmac("sha256", _FAKE_SALT_KEY, f"{mechanism}/{username}".encode())
    return ScramCredential(salt, MIN_ITERATIONS, secrets.token_bytes(64), secrets.token_bytes(64))


class ScramExchange:
    """The server's side of one exchange, after client-first was parsed and the credential
    found (a ``fake_credential`` for an unknown user)."""

    def __init__(self, mechanism: str, first: ClientFirst, credential: ScramCredential,
                 server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.algorithm = MECHANISMS[mechanism]
        self.first = first
        self.credential = credential
        self.nonce = first.nonce + (server_nonce if server_nonce is not None else
                                    secrets.token_urlsafe(NONCE_SIZE))
        self.server_first = (f"r={self.nonce},s={base64.b64encode(credential.salt).decode()},"
                             f"i={credential.iterations}")

    @property
    def username(self) -> str:
        return self.first.username

    def server_first_message(self) -> bytes:
        return self.server_first.encode()

    def verify(self, token: bytes) -> bytes:
        """Check client-final; the server-final message (``v=``) when the proof is right."""
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("SCRAM client-final message is not UTF-8") from None
        attributes = _attributes(message, "client-final message")
        if (len(attributes) < 3 or attributes[0][0] != "c" or attributes[1][0] != "r"
                or attributes[-1][0] != "p"):
            raise ScramError("malformed SCRAM client-final message")
        channel, nonce, proof = attributes[0][1], attributes[1][1], attributes[-1][1]
        if channel != base64.b64encode(self.first.gs2_header.encode()).decode():
            raise ScramError("SCRAM channel binding does not match")
        if nonce != self.nonce and nonce != self.first.nonce + self.nonce:
            raise ScramError("SCRAM nonce does not match")
        without_proof = message[:message.rindex(",p=")]
        auth_message = f"{self.first.bare},{self.server_first},{without_proof}".encode()
        algorithm = self.algorithm
        credential = self.credential
        try:
            client_proof = base64.b64decode(proof, validate=True)
        except ValueError:
            raise ScramError("malformed SCRAM client proof") from None
        signature = _hmac(algorithm, credential.stored_key, auth_message)
        if len(client_proof) != len(signature):
            raise ScramError("Authentication failed: invalid credentials")
        client_key = bytes(a ^ b for a, b in zip(client_proof, signature))
        if not hmac.compare_digest(hashlib.new(algorithm, client_key).digest(),
                                   credential.stored_key):
            raise ScramError("Authentication failed: invalid credentials")
        server_signature = _hmac(algorithm, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
