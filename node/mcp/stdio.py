"""MCP over stdin/stdout for one principal (docs/mcp.md): ``memlane mcp --token T``.

While it serves, the process's stdout is the wire; file descriptor 1 points at stderr for
everything else, so logs and stray prints never corrupt a message.

When stdin is a pipe (or a socket), as an MCP client starts us, the lines are this module's to
read and write:

- stdin is read by the event loop rather than by the SDK's reader thread: a thread blocked in
  ``read()`` cannot be cancelled, so a SIGTERM arriving while the client keeps its end open
  would wait for the client's next line before the store could be closed;
- each line is parsed as the streamable HTTP transport parses a body — the standard library's
  JSON, then the SDK's message types — so an argument holding a lone surrogate escape
  (``"\\ud800"``, which the SDK's stdio parser refuses, answering nothing) reaches the tool as
  the string it spells and is answered with the tool's refusal (``check_unicode``), as over
  HTTP.

Otherwise (a file, a terminal) the SDK's stdio transport reads and writes them.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter
from pydantic import ValidationError

from node.mcp.server import build_server
from node.node import Node

__all__ = ["MAX_LINE", "serve_stdio"]

MAX_LINE = DEFAULT_MAX_REQUEST_BODY_SIZE  # one message, as the HTTP transport bounds a body


class _Lines:
    """stdin's lines as text (``async for line in lines``)."""

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


def _is_pipe(fd: int) -> bool:
    """Whether ``fd`` is a pipe or a socket (the loop reads those; a file or a terminal is the
    SDK's to read)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@asynccontextmanager
async def _stdin_lines() -> AsyncIterator[_Lines]:
    """stdin, a pipe or a socket, through the loop."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
    )
    try:
        yield _Lines(reader)
    finally:
        transport.close()


@contextmanager
def _stdout_wire() -> Iterator[int]:
    """stdout as the wire (a descriptor of its own); file descriptor 1 points at stderr until
    it is given back, so stray output (a print, a child's) never lands inside a message."""
    wire = os.dup(1)
    os.dup2(2, 1)
    try:
        yield wire
    finally:
        os.dup2(wire, 1)
        os.close(wire)


def _send(wire: int, data: bytes) -> None:
    view = memoryview(data)
    while view:  # a pipe may take a long message in parts
        view = view[os.write(wire, view) :]


def _message(line: str) -> SessionMessage | Exception:
    """One line's JSON-RPC message, parsed as the streamable HTTP transport parses a body, or
    the error that the server reports for it (as the SDK's own stdio transport does)."""
    try:
        parsed = jsonrpc_message_adapter.validate_python(json.loads(line), by_name=False)
    except (ValueError, ValidationError, RecursionError) as exc:
        return exc
    return SessionMessage(parsed)


async def _read(lines: _Lines, into: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
    async with into:
        async for line in lines:
            await into.send(_message(line))


async def _write(source: MemoryObjectReceiveStream[SessionMessage], wire: int) -> None:
    async with source:
        async for out in source:
            text = out.message.model_dump_json(by_alias=True, exclude_unset=True)
            await asyncio.to_thread(_send, wire, text.encode() + b"\n")


async def _serve_lines(server: Server[Any], lines: _Lines, wire: int) -> None:
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_read, lines, read_in)
        tasks.start_soon(_write, write_out, wire)
        await server.run(read_out, write_in, server.create_initialization_options())
        tasks.cancel_scope.cancel()


async def serve_stdio(node: Node, token: str) -> None:
    """Serve until the client closes stdin (or the task is cancelled); every call acts as
    ``token``'s principal, and is refused once the token is revoked or expires."""
    server = build_server(node, token=token, surface="stdio")
    if _is_pipe(sys.stdin.fileno()):
        async with _stdin_lines() as lines:
            with _stdout_wire() as wire:
                await _serve_lines(server, lines, wire)
        return
    async with stdio_server() as (read, write):  # the SDK reads and writes them its own way
        await server.run(read, write, server.create_initialization_options())
