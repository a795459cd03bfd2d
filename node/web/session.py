"""Signing in to the web view: a bearer token, entered once in a form, kept in a cookie the
page's scripts cannot read (``HttpOnly``), sent only by this site's own pages
(``SameSite=Strict``), and over TLS only where the view is served with it (``Secure``).  A
token never appears in a URL, a page or a log; a missing, wrong, expired or revoked one shows
the sign-in page and no data.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import Response

from node.access.callers import Caller
from node.errors import AuthError
from node.node import Node

__all__ = ["COOKIE", "MAX_FORM", "caller_of", "forget", "keep", "signed_in", "token_of_form"]

COOKIE = "memlane_token"
MAX_FORM = 4096  # a sign-in form holds one token: a longer body is refused unread


async def caller_of(node: Node, request: Request) -> Caller | None:
    """The caller the request's cookie names, or None (no cookie, or a token that does not
    authenticate)."""
    return await signed_in(node, request.cookies.get(COOKIE))


async def signed_in(node: Node, token: str | None) -> Caller | None:
    """The caller ``token`` names, or None."""
    if not token:
        return None
    try:
        return await node.authenticate(token)
    except AuthError:
        return None


async def token_of_form(request: Request) -> str | None:
    """The token of a posted sign-in form (``application/x-www-form-urlencoded``), or None."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            return None
    values = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4).get("token", [])
    token = values[0].strip() if values else ""
    return token or None


def keep(response: Response, token: str, *, secure: bool) -> None:
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=secure, path="/")


def forget(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
