"""The web view's ASGI application (docs/web.md): its routes, and the headers every answer
carries — a content security policy without inline script or style (``default-src 'none'``,
the one style sheet from this site), ``frame-ancestors 'none'``, ``nosniff``, no referrer, no
caching of a page that shows what a token reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from importlib.resources import files

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from node.access.callers import Caller
from node.node import Node
from node.web import activity, changes, episodes, mesh, pages, record, session

__all__ = ["HEADERS", "web_app"]

HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
Page = Callable[[Node, Caller, Mapping[str, str]], Awaitable[Response]]
_ENCODED = [(k.encode(), v.encode()) for k, v in HEADERS.items()]
_STYLE = files("node.web").joinpath("style.css").read_bytes()


class _Headers:
    """Adds ``HEADERS`` to every answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_ENCODED]
            await send(message)

        await self.app(scope, receive, with_headers)


def web_app(node: Node, *, secure: bool = False) -> ASGIApp:
    """The view of ``node``; ``secure``: it is served over TLS (the cookie says so)."""

    async def home(_request: Request) -> Response:
        return RedirectResponse("/timeline", status_code=303)

    async def sign_in(request: Request) -> Response:
        if request.method == "GET":
            return pages.sign_in()
        token = await session.token_of_form(request)
        if token is None or await session.signed_in(node, token) is None:
            return pages.sign_in("That token does not sign in.", status=401)
        answer = RedirectResponse("/timeline", status_code=303)
        session.keep(answer, token, secure=secure)
        return answer

    async def sign_out(_request: Request) -> Response:
        answer = RedirectResponse("/signin", status_code=303)
        session.forget(answer)
        return answer

    def signed(render: Page) -> Callable[[Request], Awaitable[Response]]:
        """A page for a signed-in caller; without one, the way to sign in."""

        async def page(request: Request) -> Response:
            caller = await session.caller_of(node, request)
            if caller is None:
                return RedirectResponse("/signin", status_code=303)
            return await render(node, caller, request.query_params)

        return page

    async def style(_request: Request) -> Response:
        return Response(_STYLE, media_type="text/css")

    routes = [
        Route("/", home),
        Route("/signin", sign_in, methods=["GET", "POST"]),
        Route("/signout", sign_out, methods=["POST"]),
        Route("/style.css", style),
        Route("/timeline", signed(pages.timeline)),
        Route("/search", signed(pages.search)),
        # (the other pages' routes, one a line)
        Route("/changes", signed(changes.changes)),
        Route("/episodes", signed(episodes.episodes)),
        Route("/mesh", signed(mesh.mesh)),
        Route("/activity", signed(activity.activity)),
        Route("/record", signed(record.record)),
    ]
    return _Headers(Starlette(routes=routes))
