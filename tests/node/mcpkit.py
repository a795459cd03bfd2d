"""Helpers for the tests of the MCP surface (docs/mcp.md): a node with tokens of every kind,
the SDK's answers read as the tool results they are, reading a served process's lines with a
timeout, ``memlane serve`` with MCP over streamable HTTP and the SDK's client of it, and a
self-signed certificate for loopback."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import selectors
import signal
import sqlite3
import ssl
import subprocess
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from node.node import Node
from tests.node.clikit import MEMLANE, run

__all__ = [
    "ACCEPT",
    "INITIALIZE",
    "READ_WRITE",
    "TIMEOUT",
    "TOKENS",
    "TOOLS",
    "Served",
    "Site",
    "answer",
    "ask",
    "decoded",
    "ids",
    "make_site",
    "read_line",
    "refusal",
    "refused",
    "self_signed",
    "serve",
    "session",
    "type_arrays",
]

TIMEOUT = 30  # seconds for any one exchange; a hang fails the test instead of stalling it
TOOLS = (
    "e_timeline",
    "e_audit",
    "work_episode_chain",
    "work_episodes",
    "work_record",
    "work_result",
    "work_forget",
    "e_write",
    "e_correct",
    "e_adjust",
    "e_delete",
    "e_undelete",
    "e_erase",
    "call_windows",
)
READ_WRITE = ("read:workspace", "write:workspace")
TOKENS = {  # name: (principal, workspace, scopes)
    "alice": ("alice", "team", READ_WRITE),
    "bob": ("bob", "team", ("read:workspace",)),
    "carol": ("carol", "lab", READ_WRITE),
    "revoked": ("dave", "team", READ_WRITE),
    "expired": ("erin", "team", READ_WRITE),
}


@dataclass(frozen=True)
class Site:
    """A node's data directory and the tokens issued on it (by name, as in ``TOKENS``)."""

    data: Path
    tokens: dict[str, str]
    token_ids: dict[str, str]

    def revoke(self, name: str) -> None:
        """With the command an operator would use, while the node may be serving (run
        in-process: tests/node/clikit.py)."""
        done = run("token", "revoke", "--data", str(self.data), self.token_ids[name])
        assert done.returncode == 0, done.stderr

    def expire(self, name: str) -> None:
        """Its expiry moved into the past, as if the time had come."""
        with closing(sqlite3.connect(self.data / "memlane.db")) as db, db:
            db.execute("UPDATE tokens SET expires = 1 WHERE token_id = ?", (self.token_ids[name],))


def make_site(path: Path) -> Site:
    async def setup() -> dict[str, tuple[str, str]]:
        await Node.init(path)
        async with Node.open(path) as node:
            issued = {n: await node.create_token(*spec) for n, spec in TOKENS.items()}
        return {n: (i.token, i.token_id) for n, i in issued.items()}

    # A loop of its own, in a thread: never the one pytest-asyncio gives the test.
    with ThreadPoolExecutor(1) as pool:
        issued = pool.submit(asyncio.run, setup()).result()
    return Site(
        path, {n: t for n, (t, _) in issued.items()}, {n: i for n, (_, i) in issued.items()}
    )


def decoded(result: CallToolResult) -> dict[str, Any]:
    """The answer as structured content, and the very same JSON as the one text block."""
    (block,) = result.content
    assert block.type == "text"
    data: dict[str, Any] = json.loads(block.text)
    assert data == result.structured_content
    return data


def answer(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    return decoded(result)


def refusal(result: CallToolResult) -> str:
    assert result.is_error, result.content
    data = decoded(result)
    assert list(data) == ["error"], data
    text: str = data["error"]
    return text


async def ask(client: Client, tool: str, /, **arguments: Any) -> dict[str, Any]:
    return answer(await client.call_tool(tool, arguments))


async def refused(client: Client, tool: str, /, **arguments: Any) -> str:
    return refusal(await client.call_tool(tool, arguments))


def ids(items: list[dict[str, Any]], key: str = "sr_id") -> list[str]:
    return [item[key] for item in items]


def type_arrays(schema: Any, where: str = "") -> list[str]:
    """Where in ``schema`` a ``type`` is a list (``["string", "null"]``)."""
    if isinstance(schema, dict):
        found = [where] if isinstance(schema.get("type"), list) else []
        return found + [p for k, v in schema.items() for p in type_arrays(v, f"{where}/{k}")]
    if isinstance(schema, list):
        return [p for i, v in enumerate(schema) for p in type_arrays(v, f"{where}/{i}")]
    return []


def read_line(stream: Any, timeout: float) -> str:
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        assert selector.select(timeout), "no answer in time"
    line: str = stream.readline()
    return line


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


ACCEPT = {"Accept": "application/json, text/event-stream"}


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=TIMEOUT)
        finally:
            self.proc.kill()
            _, err = self.proc.communicate()
        return code, err


def serve(site: Site, *args: str) -> Served:
    proc = subprocess.Popen(
        [str(MEMLANE), "serve", "--data", str(site.data), "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = read_line(proc.stdout, TIMEOUT)
    if not line:
        proc.kill()
        pytest.fail(f"memlane serve did not start: {proc.communicate()[1]}")
    return Served(proc, json.loads(line)["mcp_http"])


@asynccontextmanager
async def session(
    url: str, token: str, *, mode: str = "auto", verify: ssl.SSLContext | bool = True
) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP, sending ``token`` as a bearer on every request."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, verify=verify, timeout=TIMEOUT) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=TIMEOUT) as client:
            yield client


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, signed by its own key (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "memlane test")])
    now = datetime.now(UTC)
    names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file
