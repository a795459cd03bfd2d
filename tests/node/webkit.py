"""Helpers for the tests of the web view (docs/web.md): a node's web app served by uvicorn on a
loopback socket, and a request to it answered as status, headers and body."""

from __future__ import annotations

import asyncio
import http.client
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import uvicorn

from node.node import Node
from node.web.app import web_app

__all__ = ["Answer", "ask", "served"]


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: str


@asynccontextmanager
async def served(node: Node) -> AsyncIterator[int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    config = uvicorn.Config(web_app(node), lifespan="off", log_config=None, access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[listener]))  # (it listens already)
    try:
        yield listener.getsockname()[1]
    finally:
        server.should_exit = True
        await task


async def ask(port: int, method: str, path: str, *, body: str = "", cookie: str = "") -> Answer:
    def go() -> Answer:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        headers = {"content-type": "application/x-www-form-urlencoded"} if body else {}
        if cookie:
            headers["cookie"] = cookie
        conn.request(method, path, body=body.encode() or None, headers=headers)
        r = conn.getresponse()
        answer = Answer(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode())
        conn.close()
        return answer

    return await asyncio.to_thread(go)
