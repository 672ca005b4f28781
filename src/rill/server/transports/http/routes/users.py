"""User, session and personal-access-token routes (wire §8.2, §8.4).

Owns: login (password or personal access token: the Core checks the credentials, then an
access token is issued for the user), refresh (the presented token must still be valid; it is
revoked and a new one issued -- refreshing it again is 400 ``invalid_access_token``), logout
(revokes the presented token: 204, and 401 with it afterwards), and the user and token
administration routes, each one Core call. ``/users/logout`` is declared before
``/users/{user_id}`` so that DELETE on it logs out.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from rill.protocol.iggy import http_json
from rill.server.transports.http import schemas
from rill.server.transports.http.auth import access_token
from rill.server.transports.http.models import (
    ChangePasswordBody,
    CreateTokenBody,
    CreateUserBody,
    LoginBody,
    TokenBody,
    UpdatePermissionsBody,
    UpdateUserBody,
)
from rill.server.transports.http.routes.common import SECURED, context, execute, replies, run

public = APIRouter(tags=["users"])
router = APIRouter(tags=["users"], dependencies=SECURED)
tokens = APIRouter(tags=["personal access tokens"], dependencies=SECURED)

UserId = str  # a number (numeric id) or any other text (the username)


def _identity(request: Request, user_id: int) -> JSONResponse:
    issued = context(request).jwt.issue(user_id)
    return JSONResponse(http_json.encode_identity(user_id, issued.token, issued.expiry))


@public.post("/users/login", response_model=None, responses=replies(schemas.IdentityInfo, login=True),
             summary="Log in with a username and password; answers an access token")
async def login_user(request: Request, body: LoginBody) -> Response:
    identity = await execute(request, "login_user", body)
    return _identity(request, identity.user_id)


@public.post("/personal-access-tokens/login", tags=["personal access tokens"], response_model=None,
             responses=replies(schemas.IdentityInfo, login=True),
             summary="Log in with a personal access token")
async def login_with_personal_access_token(request: Request, body: TokenBody) -> Response:
    identity = await execute(request, "login_with_personal_access_token", body)
    return _identity(request, identity.user_id)


@public.post("/users/refresh-token", response_model=None, responses=replies(schemas.IdentityInfo),
             summary="Exchange a valid access token for a new one (the old one is revoked)")
async def refresh_token(request: Request, body: TokenBody) -> Response:
    issued = context(request).jwt.refresh(body.token)
    return JSONResponse(http_json.encode_identity(issued.user_id, issued.token, issued.expiry))


@router.delete("/users/logout", status_code=204, response_class=Response,
               responses=replies(status=204, body=False), summary="Revoke the presented access token")
async def logout_user(request: Request) -> Response:
    token = access_token(request)
    if token is not None:
        context(request).jwt.revoke(token)
    return await run(request, "logout_user")


@router.get("/users", response_model=None, responses=replies(list[schemas.UserInfo], body=False))
async def get_users(request: Request) -> Response:
    return await run(request, "get_users")


@router.get("/users/{user_id}", response_model=None, responses=replies(schemas.UserInfoDetails, body=False))
async def get_user(request: Request, user_id: UserId) -> Response:
    return await run(request, "get_user")


@router.post("/users", response_model=None, responses=replies(schemas.UserInfoDetails))
async def create_user(request: Request, body: CreateUserBody) -> Response:
    return await run(request, "create_user", body)


@router.put("/users/{user_id}", status_code=204, response_class=Response, responses=replies(status=204))
async def update_user(request: Request, user_id: UserId, body: UpdateUserBody) -> Response:
    return await run(request, "update_user", body)


@router.put("/users/{user_id}/permissions", status_code=204, response_class=Response,
            responses=replies(status=204))
async def update_permissions(request: Request, user_id: UserId, body: UpdatePermissionsBody) -> Response:
    return await run(request, "update_permissions", body)


@router.put("/users/{user_id}/password", status_code=204, response_class=Response,
            responses=replies(status=204))
async def change_password(request: Request, user_id: UserId, body: ChangePasswordBody) -> Response:
    return await run(request, "change_password", body)


@router.delete("/users/{user_id}", status_code=204, response_class=Response,
               responses=replies(status=204, body=False))
async def delete_user(request: Request, user_id: UserId) -> Response:
    return await run(request, "delete_user")


@router.post("/users/{user_id}/unlock", status_code=204, response_class=Response,
             responses=replies(status=204, body=False))
async def unlock_user(request: Request, user_id: UserId) -> Response:
    """Lift the login locks failed logins put on the user (manage_users)."""
    return await run(request, "unlock_user")


@tokens.get("/personal-access-tokens", response_model=None,
            responses=replies(list[schemas.PersonalAccessTokenInfo], body=False))
async def get_personal_access_tokens(request: Request) -> Response:
    return await run(request, "get_personal_access_tokens")


@tokens.post("/personal-access-tokens", response_model=None,
             responses=replies(schemas.RawPersonalAccessToken))
async def create_personal_access_token(request: Request, body: CreateTokenBody) -> Response:
    return await run(request, "create_personal_access_token", body)


@tokens.delete("/personal-access-tokens/{name}", status_code=204, response_class=Response,
               responses=replies(status=204, body=False))
async def delete_personal_access_token(request: Request, name: str) -> Response:
    return await run(request, "delete_personal_access_token")
