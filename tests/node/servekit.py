"""Helpers for tests that run ``memlane serve`` processes: a certified mesh of data
directories, starting and stopping served nodes, polling what they show."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from node.members import certs
from node.mesh.service import CA_FILE, NODE_CERT_FILE
from node.node import Node, system_wall
from tests.node.clikit import run
from tests.node.synckit import make_mesh
from tests.node.test_mcp import MEMLANE, TIMEOUT, read_line

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
