"""A node whose disk is full says so: ``/healthz`` answers 503 with SQLite's reason while
writes the size of the one refused cannot commit (docs/operations.md §Health and metrics) — its
data directory on a real tmpfs, too small for what is written, then grown with ``mount -o
remount``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from node.errors import NodeError
from node.node import Node
from node.serve.health import health
from tests.node.servekit import certified_mesh, issue

SMALL, GROWN = "3m", "64m"
TEXT = 25_000  # characters of each SR written


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
        assert "database or disk is full" in str(refused)
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
