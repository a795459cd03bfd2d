"""MCP over stdin/stdout for one principal (docs/mcp.md): ``memlane mcp --token T``.

While it serves, the process's stdout is the wire; the SDK points file descriptor 1 at stderr
for everything else, so logs and stray prints never corrupt a message.

stdin is read by the event loop rather than by the SDK's reader thread: a thread blocked in
``read()`` cannot be cancelled, so a SIGTERM arriving while the client keeps its end open
would wait for the client's next line before the store could be closed.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

from mcp.server.stdio import stdio_server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

from node.mcp.server import build_server
from node.node import Node

__all__ = ["MAX_LINE", "serve_stdio"]

MAX_LINE = DEFAULT_MAX_REQUEST_BODY_SIZE  # one message, as the HTTP transport bounds a body


class _Lines:
    """stdin as the SDK's stdio transport consumes it (``async for line in stdin``)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self.reader.readline()
        except ValueError:  # longer than MAX_LINE: dropped, and answered as unparseable
            return ""
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


@asynccontextmanager
async def _stdin_lines() -> AsyncIterator[_Lines | None]:
    """stdin through the loop when it is a pipe or a socket (as an MCP client starts us);
    otherwise None, and the SDK reads it its own way."""
    mode = os.fstat(sys.stdin.fileno()).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        yield None
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
    )
    try:
        yield _Lines(reader)
    finally:
        transport.close()


async def serve_stdio(node: Node, token: str) -> None:
    """Serve until the client closes stdin (or the task is cancelled); every call acts as
    ``token``'s principal, and is refused once the token is revoked or expires."""
    server = build_server(node, token=token, surface="stdio")
    async with _stdin_lines() as lines:
        stdin = cast(Any, lines)  # the SDK types it as a file; it only iterates it
        async with stdio_server(stdin=stdin) as (read, write):
            await server.run(read, write, server.create_initialization_options())
