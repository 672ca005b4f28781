"""Access tokens over HTTP (wire §8.2): claims, expiry, refresh, logout, revocation that survives
a restart, personal-access-token login, and the signing secret kept in the data directory."""

from __future__ import annotations

import base64
import json
import os
import stat
import time

import httpx
import pytest
from http_helpers import bearer, error_of, unique


def _claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _login(base_url: str) -> dict:
    answer = httpx.post(f"{base_url}/users/login", json={"username": "iggy", "password": "iggy"})
    assert answer.status_code == 200
    return answer.json()


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_login_answers_identity_and_a_jwt_with_the_documented_claims(http_server):
    identity = _login(http_server.http_url)
    assert identity["user_id"] == 1
    token = identity["access_token"]["token"]
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header["alg"] == "HS256"
    claims = _claims(token)
    assert set(claims) == {"jti", "sub", "iss", "aud", "iat", "nbf", "exp"}
    assert claims["sub"] == 1 and claims["iss"] == "rill" and claims["aud"] == "rill"
    assert claims["exp"] == identity["access_token"]["expiry"] == claims["iat"] + 3600
    assert claims["nbf"] == claims["iat"]
    assert claims["jti"][14] == "7"  # a UUIDv7
    assert error_of(httpx.post(f"{http_server.http_url}/users/login",
                               json={"username": "iggy", "password": "nope"})) == (400, "invalid_credentials")


@pytest.mark.parametrize("header", [None, "Bearer", "Basic aWdneTppZ2d5", "Bearer not.a.jwt",
                                    "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOjF9.c2lnbmF0dXJl"])
def test_missing_or_invalid_tokens_are_401(http_server, header):
    headers = {"Authorization": header} if header else {}
    answer = httpx.get(f"{http_server.http_url}/streams", headers=headers)
    assert error_of(answer) == (401, "unauthenticated")
    assert answer.json()["id"] == 40
    assert answer.headers["www-authenticate"] == "Bearer"


def test_a_token_signed_with_another_secret_is_401(http_server):
    import jwt as pyjwt

    claims = _claims(_login(http_server.http_url)["access_token"]["token"])
    forged = pyjwt.encode(claims, b"x" * 64, algorithm="HS256")
    assert httpx.get(f"{http_server.http_url}/streams", headers=_auth(forged)).status_code == 401


def test_logout_revokes_the_token(http_server):
    token = _login(http_server.http_url)["access_token"]["token"]
    url = http_server.http_url
    assert httpx.get(f"{url}/streams", headers=_auth(token)).status_code == 200
    assert httpx.delete(f"{url}/users/logout", headers=_auth(token)).status_code == 204
    assert error_of(httpx.get(f"{url}/streams", headers=_auth(token))) == (401, "unauthenticated")
    assert httpx.delete(f"{url}/users/logout", headers=_auth(token)).status_code == 401


def test_refresh_revokes_the_old_token_and_only_once(http_server):
    url = http_server.http_url
    old = _login(url)["access_token"]["token"]
    refreshed = httpx.post(f"{url}/users/refresh-token", json={"token": old})
    assert refreshed.status_code == 200
    new = refreshed.json()["access_token"]["token"]
    assert refreshed.json()["user_id"] == 1 and new != old
    assert httpx.get(f"{url}/streams", headers=_auth(new)).status_code == 200
    assert httpx.get(f"{url}/streams", headers=_auth(old)).status_code == 401
    again = httpx.post(f"{url}/users/refresh-token", json={"token": old})
    assert error_of(again) == (400, "invalid_access_token") and again.json()["id"] == 78
    assert error_of(httpx.post(f"{url}/users/refresh-token", json={"token": "garbage"})) == (
        400, "invalid_access_token")


def test_a_deleted_or_deactivated_users_token_stops_working(http_server, api):
    url = http_server.http_url
    for change in ("delete", "deactivate"):
        name = unique("gone")
        uid = api.post("/users", json={"username": name, "password": "secret"}).json()["id"]
        headers = bearer(url, name, "secret")
        assert httpx.get(f"{url}/personal-access-tokens", headers=headers).status_code == 200
        if change == "delete":
            api.delete(f"/users/{uid}")
        else:
            api.put(f"/users/{uid}", json={"status": "inactive"})
        assert httpx.get(f"{url}/personal-access-tokens", headers=headers).status_code == 401


def test_personal_access_token_login_gives_a_working_jwt(http_server, api):
    raw = api.post("/personal-access-tokens", json={"name": unique("pat")}).json()["token"]
    identity = httpx.post(f"{http_server.http_url}/personal-access-tokens/login", json={"token": raw})
    assert identity.status_code == 200 and identity.json()["user_id"] == 1
    token = identity.json()["access_token"]["token"]
    assert httpx.get(f"{http_server.http_url}/streams", headers=_auth(token)).status_code == 200


def test_tokens_expire(rill_factory):
    server = rill_factory({"RILL_HTTP_JWT_ACCESS_TOKEN_EXPIRY": "2 s",
                           "RILL_HTTP_JWT_CLOCK_SKEW": "0 s"}).start()
    identity = _login(server.http_url)
    token = identity["access_token"]["token"]
    assert identity["access_token"]["expiry"] - _claims(token)["iat"] == 2
    assert httpx.get(f"{server.http_url}/streams", headers=_auth(token)).status_code == 200
    deadline = time.monotonic() + 20
    status = 200
    while status == 200 and time.monotonic() < deadline:
        time.sleep(0.25)
        status = httpx.get(f"{server.http_url}/streams", headers=_auth(token)).status_code
    assert status == 401
    assert error_of(httpx.post(f"{server.http_url}/users/refresh-token", json={"token": token})) == (
        400, "invalid_access_token")


def test_revocation_and_secret_survive_a_restart(rill_factory):
    server = rill_factory().start()
    url = server.http_url
    kept = _login(url)["access_token"]["token"]
    revoked = _login(url)["access_token"]["token"]
    assert httpx.delete(f"{url}/users/logout", headers=_auth(revoked)).status_code == 204
    secret = server.data_dir / "secrets" / "jwt_secret"
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(secret.parent).st_mode) == 0o700
    assert len(secret.read_bytes()) == 64
    before = secret.read_bytes()
    server.restart()
    url = server.http_url
    assert secret.read_bytes() == before  # reused, not regenerated
    assert httpx.get(f"{url}/streams", headers=_auth(kept)).status_code == 200
    assert httpx.get(f"{url}/streams", headers=_auth(revoked)).status_code == 401
