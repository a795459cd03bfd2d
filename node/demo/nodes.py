"""The processes of ``make demo``: ``memlane`` commands run to completion, and ``memlane
serve`` processes started, watched through their ``/metrics`` and stopped with SIGTERM."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["Served", "memlane", "until"]

MEMLANE = [sys.executable, "-c", "import sys; from node.cli import main; sys.exit(main())"]
WAIT = 60.0  # seconds for a node to start or the mesh to reach a state
T = TypeVar("T")


def memlane(*args: str) -> str:
    """Run a command; its standard output, stripped.  ``RuntimeError`` when it fails."""
    command = [*MEMLANE, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT, check=False)  # noqa: S603
    if done.returncode != 0:
        raise RuntimeError(f"memlane {args[0]} failed: {done.stderr.strip()}")
    return done.stdout.strip()


async def until(probe: Callable[[T], Awaitable[bool]], arg: T) -> None:
    """Wait until ``probe(arg)`` holds; ``TimeoutError`` after WAIT s."""
    async with asyncio.timeout(WAIT):
        while not await probe(arg):  # noqa: ASYNC110 — the state is another process's
            await asyncio.sleep(0.2)
    return


@dataclass
class Served:
    """One ``memlane serve`` process and what it printed when it started listening."""

    name: str
    data: Path
    args: tuple[str, ...]
    proc: asyncio.subprocess.Process
    shown: dict[str, Any]

    @classmethod
    async def start(cls, name: str, data: Path, *args: str) -> Served:
        proc = await asyncio.create_subprocess_exec(
            *MEMLANE,
            "serve",
            "--data",
            str(data),
            "--json",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        assert proc.stdout is not None
        async with asyncio.timeout(WAIT):
            line = await proc.stdout.readline()
        if not line:
            raise RuntimeError(f"node {name.upper()} did not start")
        return cls(name, data, args, proc, json.loads(line))

    @property
    def node_id(self) -> str:
        return str(json.loads(_fetch(f"{self.shown['health']}/healthz"))["node_id"])

    async def metric(self, name: str) -> int:
        url = f"{self.shown['health']}/metrics"
        text = await asyncio.to_thread(_fetch, url)
        found = re.search(rf"^{name} (\d+)$", text, re.MULTILINE)
        return int(found[1]) if found else 0

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(WAIT):
                await self.proc.wait()

    async def restart(self) -> Served:
        return await Served.start(self.name, self.data, *self.args)

    def verify(self) -> str:
        shown = json.loads(memlane("log", "verify", "--data", str(self.data), "--json"))
        head = f"{shown['entries']} entries in {shown['logs']} logs"
        return f"ok ({head})" if shown["ok"] else f"FAILED ({head})"


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 — loopback
        return str(answer.read().decode())
