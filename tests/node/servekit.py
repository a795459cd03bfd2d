"""Helpers for tests that run ``memlane serve`` processes: a certified mesh of data
directories, starting and stopping served nodes, polling what they show, their health and
metrics endpoints, plain connections held open against their ports, and services advertised
by zeroconf on loopback."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from zeroconf import IPVersion
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

from node.members import certs
from node.mesh.discovery import SERVICE_TYPE
from node.mesh.service import CA_FILE, NODE_CERT_FILE
from node.node import Node, system_wall
from tests.node.clikit import MEMLANE, run
from tests.node.mcpkit import TIMEOUT, read_line
from tests.node.synckit import make_mesh

T = TypeVar("T")
CONVERGE = 20.0  # seconds for an SR or a connection to show up on the other node


def memlane(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A short command beside the served nodes (``peers``, ``mesh invite``, a listing), run
    in-process through the command line's entry point (tests/node/clikit.py): the served
    nodes are the processes these tests are about, and a poll of ``peers`` every 0.2 s need
    not start an interpreter each time."""
    done = run(*args)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def poll(what: str, probe: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + CONVERGE
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {CONVERGE} s")


def certified_mesh(root: Path, names: Sequence[str]) -> dict[str, Path]:
    """Nodes of one mesh in ``root``: the first is the authority, which admitted the others
    and issued each its certificate."""

    async def run() -> dict[str, Path]:
        dirs = await make_mesh(root, names, system_wall)
        keys = {}
        for name in names[1:]:
            async with Node.open(dirs[name]) as member:
                keys[name] = member.key.public
        async with Node.open(dirs[names[0]]) as authority:
            mesh = authority.membership
            for name, key in keys.items():
                (dirs[name] / CA_FILE).write_bytes(certs.pem(mesh.authority_certificate()))
                (dirs[name] / NODE_CERT_FILE).write_bytes(certs.pem(mesh.node_certificate(key)))
        return dirs

    return asyncio.run(run())


async def node_id_of(data: Path) -> str:
    async with Node.open(data) as node:
        return node.info.node_id


async def issue(data: Path, principal: str, scopes: Sequence[str]) -> str:
    async with Node.open(data) as node:
        return (await node.create_token(principal, "team", scopes)).token


def setup(root: Path) -> dict[str, Any]:
    """Two nodes of one mesh: ``one`` (the authority) and ``two`` (a member it admitted and
    certified); a writing token on one, a reading token on two."""
    dirs = certified_mesh(root, ["one", "two"])
    out: dict[str, Any] = dict(dirs)
    out["one_id"], out["two_id"] = (asyncio.run(node_id_of(dirs[n])) for n in ("one", "two"))
    out["writer"] = asyncio.run(issue(dirs["one"], "alice", ["read:workspace", "write:workspace"]))
    out["reader"] = asyncio.run(issue(dirs["two"], "bob", ["read:workspace"]))
    return out


def serve(data: Path, *args: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen(
        [str(MEMLANE), "serve", "--data", str(data), "--json", "--mcp-http", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = read_line(proc.stdout, TIMEOUT)
    if not line:
        proc.kill()
        pytest.fail(f"memlane serve did not start: {proc.communicate()[1]}")
    return proc, json.loads(line)


def stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=TIMEOUT)
    finally:
        proc.kill()
        _, err = proc.communicate()
    return code, err


def peers(data: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(memlane("peers", "--data", str(data), "--json").stdout)
    return found


def connected(data: Path, other: str) -> dict[str, Any] | None:
    for row in peers(data)["peers"]:
        if row["node_id"] == other and row["state"] in ("syncing", "live"):
            return row
    return None


_SAMPLE = re.compile(r"^([a-z_]+)(\{[^}]*\})? (\d+)$")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def metrics(base: str) -> dict[str, int]:
    status, text = get(base + "/metrics")
    assert status == 200
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            m = _SAMPLE.match(line)
            assert m, line
            out[m[1] + (m[2] or "")] = int(m[3])
    return out


def server_closed(conn: socket.socket, wait: float = 0.05) -> bool:
    """Whether the server closed ``conn`` (EOF or a reset), reading what it sent."""
    conn.settimeout(wait)
    try:
        while conn.recv(65536):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True
    return True


def count_closed(conns: list[socket.socket], expected: int, within: float) -> int:
    deadline = time.monotonic() + within
    while (n := sum(map(server_closed, conns))) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return n


def open_connections(address: str, n: int) -> list[socket.socket]:
    host, port = address.rsplit(":", 1)
    return [socket.create_connection((host, int(port)), timeout=5) for _ in range(n)]


def refusal_counts(health: str, *limits: str) -> list[int]:
    found = metrics(health)
    return [found[f'memlane_limit_refusals_total{{limit="{name}"}}'] for name in limits]


class Advertiser:
    """Services of ``_memlane._tcp.local.`` registered on loopback from the test's own zeroconf,
    on a loop in a thread of its own; all withdrawn by ``close``."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.zc = self._run(self._open())

    def _run(self, job: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(job, self.loop).result(TIMEOUT)

    @staticmethod
    async def _open() -> AsyncZeroconf:
        return AsyncZeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)

    def advertise(self, services: list[tuple[str, bytes, bytes, int]]) -> None:
        """``(name, mesh, key, port)`` each, at 127.0.0.1, registered at once."""

        async def register() -> None:
            infos = [
                AsyncServiceInfo(
                    SERVICE_TYPE,
                    f"{name}.{SERVICE_TYPE}",
                    port=port,
                    addresses=[socket.inet_aton("127.0.0.1")],
                    properties={"v": "1", "mesh": mesh.hex(), "node": key.hex()},
                )
                for name, mesh, key, port in services
            ]
            waits = await asyncio.gather(*(self.zc.async_register_service(i) for i in infos))
            await asyncio.gather(*waits)

        self._run(register())

    def close(self) -> None:
        async def withdraw() -> None:
            await self.zc.async_unregister_all_services()
            await self.zc.async_close()

        self._run(withdraw())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(TIMEOUT)
        self.loop.close()


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as held:
        port: int = held.getsockname()[1]
    return port
