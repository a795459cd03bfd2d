"""One bounded HTTP/1.1 POST over asyncio streams, for the endpoint embedder.

The whole exchange (connect, send, answer) runs under one deadline, so a server that stalls
or trickles cannot hold a caller longer than the timeout, and no thread is left behind.  The
answer is read as RFC 9112 delimits it — ``Content-Length``, chunked transfer coding, or the
server closing (we send ``Connection: close``) — and refused once it passes ``max_body``.
Every failure is an ``EmbedderUnavailable`` naming the server, never the request's headers
(they may carry a key).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import SplitResult

from node.errors import EmbedderUnavailable

__all__ = ["Answer", "origin", "post"]

_MAX_HEADERS = 100
_READ = 1 << 16


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    reason: str
    body: bytes


def origin(url: SplitResult) -> str:
    """``scheme://host:port`` of ``url``, the port spelled out (80 or 443 when unsaid)."""
    return f"{url.scheme}://{_host_port(url)}"


async def post(
    url: SplitResult, body: bytes, headers: Mapping[str, str], *, within: float, max_body: int
) -> Answer:
    """POST ``body`` to ``url``; the answer, whatever its status, within ``within`` seconds."""
    where = origin(url)
    try:
        async with asyncio.timeout(within):
            return await _exchange(url, _request(url, body, headers), max_body)
    except TimeoutError:  # (before OSError: a socket timeout is one too)
        raise EmbedderUnavailable(f"{where} did not answer within {within:g} s") from None
    except OSError as exc:  # (refused, reset, no route, a TLS failure)
        raise EmbedderUnavailable(f"{where} is unreachable: {exc.strerror or exc}") from exc
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
        raise EmbedderUnavailable(f"{where} answered what is not HTTP/1.1: {exc}") from exc
    except _TooBig:
        raise EmbedderUnavailable(f"{where} answered more than {max_body} bytes") from None


class _TooBig(Exception):
    pass


async def _exchange(url: SplitResult, request: bytes, max_body: int) -> Answer:
    tls = ssl.create_default_context() if url.scheme == "https" else None
    reader, writer = await asyncio.open_connection(url.hostname, _port(url), ssl=tls)
    try:
        writer.write(request)
        await writer.drain()
        return await _answer(reader, max_body)
    finally:
        writer.close()


def _request(url: SplitResult, body: bytes, headers: Mapping[str, str]) -> bytes:
    path = url.path.rstrip("/") + "/v1/embeddings"
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {_host_port(url)}",
        "Content-Type: application/json",
        "Accept: application/json",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


async def _answer(reader: asyncio.StreamReader, max_body: int) -> Answer:
    status, reason = _status_line(await reader.readline())
    fields = await _fields(reader)
    if "chunked" in fields.get("transfer-encoding", "").lower():
        body = await _chunked(reader, max_body)
    elif "content-length" in fields:
        length = int(fields["content-length"])
        if not 0 <= length <= max_body:
            raise _TooBig
        body = await reader.readexactly(length)
    else:
        body = await _until_closed(reader, max_body)
    return Answer(status, reason, body)


def _status_line(line: bytes) -> tuple[int, str]:
    if not line:
        raise ValueError("the connection closed before an answer")
    version, _, rest = line.partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise ValueError(f"the status line {line[:80]!r}")
    return int(code), reason.strip().decode("latin-1")


async def _fields(reader: asyncio.StreamReader) -> dict[str, str]:
    fields: dict[str, str] = {}
    for _ in range(_MAX_HEADERS):
        line = await reader.readline()
        if line in (b"\r\n", b"\n"):
            return fields
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon or not line.endswith(b"\n"):
            raise ValueError(f"the header line {line[:80]!r}")
        fields[name.strip().lower()] = value.strip()
    raise ValueError(f"more than {_MAX_HEADERS} header lines")


async def _chunked(reader: asyncio.StreamReader, max_body: int) -> bytes:
    body = bytearray()
    while size := _chunk_size(await reader.readline()):
        if len(body) + size > max_body:
            raise _TooBig
        body += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("a chunk not ended by CRLF")
    await _fields(reader)  # the trailer section, read and dropped
    return bytes(body)


def _chunk_size(line: bytes) -> int:
    digits = line.split(b";")[0].strip()
    if not digits or digits.strip(b"0123456789abcdefABCDEF"):
        raise ValueError(f"the chunk size line {line[:80]!r}")
    return int(digits, 16)


async def _until_closed(reader: asyncio.StreamReader, max_body: int) -> bytes:
    body = bytearray()
    while chunk := await reader.read(_READ):
        body += chunk
        if len(body) > max_body:
            raise _TooBig
    return bytes(body)


def _port(url: SplitResult) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


def _host_port(url: SplitResult) -> str:
    host = url.hostname or ""
    return f"[{host}]:{_port(url)}" if ":" in host else f"{host}:{_port(url)}"
