"""A node whose disk is full says so — ``/healthz`` answers 503 with SQLite's reason while
writes the size of the one refused cannot commit, a sync link ends with it and backs off
(docs/operations.md §A full disk) — and catches up by itself once space returns: its data
directory on a real tmpfs, too small for what it is sent, then grown with ``mount -o
remount``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from node.errors import DiskRefused, NodeError
from node.mcp.server import build_server
from node.node import Node
from node.serve.health import health
from tests.node.mcpkit import refused as refused_by
from tests.node.servekit import certified_mesh, get, issue, memlane, peers, poll, serve, stop

SMALL, GROWN = "3m", "64m"
TEXT = 25_000  # characters of each SR written
BIG = 160  # SRs of TEXT on the node a full one catches up from: 4 MB
FULL = "database or disk is full"


def _refused(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the full-disk check: {reason}")
    print(f"skipped: {reason}")
    pytest.skip(reason)


@contextlib.contextmanager
def _small_disk(at: Path) -> Iterator[Path]:
    """A tmpfs of ``SMALL`` at ``at`` (a skip where this process may not mount one)."""
    if os.geteuid() != 0:
        _refused("mounting a tmpfs needs root")
    at.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SMALL}", "tmpfs", str(at)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        _refused(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield at
    finally:
        subprocess.run(["umount", "-l", str(at)], check=False)


async def _fill_then_grow(data: Path, disk: Path, token: str) -> None:
    async with Node.open(data) as node:
        caller = await node.authenticate(token)
        healthy, body = await health(node, None)
        assert healthy, body
        refused = None
        for i in range(400):  # 10 MB into 3 MiB
            try:
                await node.e_write(caller, title=f"big {i}", text=(f"w{i} " * TEXT)[:TEXT])
            except NodeError as exc:
                refused = exc
                break
        assert isinstance(refused, DiskRefused), refused
        assert "database or disk is full" in str(refused)
        async with Client(build_server(node, token=token)) as client:  # told, not "internal"
            big = ("mcp " * TEXT)[:TEXT]
            said = await refused_by(client, "e_write", title="over MCP", text=big)
        assert said == f"the write transaction failed and was rolled back: {FULL}"
        healthy, body = await health(node, None)
        assert not healthy
        assert "database or disk is full" in body["store"]
        assert not (await health(node, None))[0]  # its own probe begins a transaction: not enough

        grow = ["mount", "-o", f"remount,size={GROWN}", str(disk)]
        await asyncio.to_thread(subprocess.run, grow, check=True)
        await node.e_write(caller, title="big again", text=("again " * TEXT)[:TEXT])
        healthy, body = await health(node, None)
        assert healthy, body


def test_healthz_says_the_disk_is_full_until_a_write_as_large_commits(tmp_path):
    dirs = certified_mesh(tmp_path, ["one"])
    token = asyncio.run(issue(dirs["one"], "alice", ["read:workspace", "write:workspace"]))
    with _small_disk(tmp_path / "disk") as disk:
        shutil.copytree(dirs["one"], disk / "one")
        asyncio.run(_fill_then_grow(disk / "one", disk, token))


async def _big_srs(data: Path, token: str) -> None:
    async with Node.open(data) as node:
        caller = await node.authenticate(token)
        for i in range(BIG):
            await node.e_write(caller, title=f"big {i}", text=(f"w{i} " * TEXT)[:TEXT])


def _row(data: Path) -> dict[str, Any]:
    (row,) = peers(data)["peers"]
    return dict(row)


def _listed(data: Path, token: str) -> int:
    """How many SRs ``token`` lists on the node at ``data``."""
    count, page = 0, 1
    while True:
        found = memlane(
            "timeline", "list", "--data", str(data), "--token", token,
            "--page", str(page), "--page-size", "100", "--json",
        )  # fmt: skip
        results = json.loads(found.stdout)["results"]
        count, page = count + len(results), page + 1
        if len(results) < 100:
            return count


def test_a_catch_up_onto_a_full_disk_says_so_backs_off_and_resumes_by_itself(tmp_path):
    """Node two, its directory on a 3 MiB tmpfs, dials one, which holds 4 MB of SRs: the
    link reports the full disk (peers, /healthz), backs off, and once the tmpfs is grown
    catches up with no restart."""
    dirs = certified_mesh(tmp_path, ["one", "two"])
    writer = asyncio.run(issue(dirs["one"], "alice", ["read:workspace", "write:workspace"]))
    reader = asyncio.run(issue(dirs["two"], "bob", ["read:workspace"]))
    asyncio.run(_big_srs(dirs["one"], writer))
    with _small_disk(tmp_path / "disk") as disk:
        two = disk / "two"
        shutil.copytree(dirs["two"], two)
        (two / "config.toml").write_text('[mesh]\nbackoff_max = "4s"\n')  # waits of 4 s at most
        loopback = "127.0.0.1:0"
        first, shown = serve(dirs["one"], "--sync-listen", loopback, "--health-listen", loopback)
        running = [first]
        try:
            second, there = serve(two, "--peer", shown["sync"], "--health-listen", loopback)
            running.append(second)
            poll("the full disk in peers", lambda: FULL in str(_row(two)["last_error"]))
            status, text = get(there["health"] + "/healthz")
            assert status == 503
            assert FULL in json.loads(text)["store"]
            tries = _row(two)["connections"]
            time.sleep(2)
            assert _row(two)["connections"] - tries <= 3  # backing off, not redialling at once

            subprocess.run(["mount", "-o", f"remount,size={GROWN}", str(disk)], check=True)
            poll("the catch-up", lambda: _row(two)["lag_in"] == 0 and _row(two)["state"] == "live")
            assert _listed(two, reader) == BIG
            poll("a healthy node", lambda: get(there["health"] + "/healthz")[0] == 200)
        finally:
            codes = [stop(proc) for proc in reversed(running)]
        assert memlane("log", "verify", "--data", str(two)).returncode == 0
    assert all(code == 0 for code, _ in codes), codes
