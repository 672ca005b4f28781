"""The browsable API reference: ``/docs`` (Swagger UI) served entirely by this server.

Owns: ``/docs``, its OAuth2 redirect page and ``/docs/assets/<file>``. Swagger UI's script,
style sheet and icon come from the ``fastapi-offline`` package's copy of the Swagger UI 5
distribution, so the page renders without internet (FastAPI's default loads them from a CDN).
Only the files named in ``ASSETS`` are served; all of it is public, like ``/openapi.json``.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse

DOCS = "/docs"
OAUTH2_REDIRECT = f"{DOCS}/oauth2-redirect"
ASSETS_PREFIX = f"{DOCS}/assets/"
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon.png": "image/png",
}
PATHS = frozenset({DOCS, OAUTH2_REDIRECT} | {ASSETS_PREFIX + name for name in ASSETS})

router = APIRouter(include_in_schema=False)


def _asset_directory() -> resources.abc.Traversable:
    return resources.files("fastapi_offline") / "static"


@router.get(DOCS)
async def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json", title="rill API",
        swagger_js_url=ASSETS_PREFIX + "swagger-ui-bundle.js",
        swagger_css_url=ASSETS_PREFIX + "swagger-ui.css",
        swagger_favicon_url=ASSETS_PREFIX + "favicon.png",
        oauth2_redirect_url=OAUTH2_REDIRECT,
    )


@router.get(OAUTH2_REDIRECT)
async def oauth2_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


def _asset_route(name: str, media_type: str) -> None:
    async def asset() -> FileResponse:
        return FileResponse(str(_asset_directory() / name), media_type=media_type,
                            headers={"Cache-Control": "public, max-age=86400"})

    router.add_api_route(ASSETS_PREFIX + name, asset, methods=["GET"])


for _name, _media_type in ASSETS.items():  # one route per file: any other name is a 404
    _asset_route(_name, _media_type)
