"""The start-up benchmark (docs/benchmarks.md): how long the ``memlane`` command takes to answer,
beside ``python -c pass`` measured in the same run, the runs interleaved.

- ``memlane --help``: parsing the command line and printing the commands;
- ``memlane timeline list``: a tool call's whole path from a shell — open the store, check the
  token, one page of a small store (20 SRs), print it, close;
- ``from node import Node``: what the library alone costs to load (info).

Each is the installed console script in a child process, timed from ``Popen`` to its exit;
the bound is its median (≤ 0.5 s).  Nothing here asserts on speed.
"""

from __future__ import annotations

import asyncio
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from node.node import Node
from tests.bench.common import SMOKE, Bound, Latency, Result, progress

__all__ = ["COMMANDS", "LIMIT_MS", "run"]

MEMLANE = Path(sys.executable).with_name("memlane")
LIMIT_MS = 500.0
HELP, LIST, IMPORT = "memlane --help", "memlane timeline list", "from node import Node"
COMMANDS = (HELP, LIST, IMPORT)
BOUNDED = (HELP, LIST)


def _run(argv: Sequence[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, timeout=60, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.decode()}")
    return seconds


def _node(data: Path) -> str:
    """A small node to list: its data directory made, a token issued, 20 SRs written."""

    async def make() -> str:
        await Node.init(data)
        async with Node.open(data, embed=False) as node:
            issued = await node.create_token(
                "bench", "bench", ("read:workspace", "write:workspace")
            )
            writer = await node.authenticate(issued.token)
            for i in range(20):
                await node.e_write(writer, title=f"note {i}", text="what the bench lists")
            return issued.token

    return asyncio.run(make())


def run(*, quick: bool, workdir: Path) -> Result:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    data = workdir / "node"
    progress("startup: a small node to list")
    token = _node(data)
    argv = {
        HELP: [str(MEMLANE), "--help"],
        LIST: [str(MEMLANE), "timeline", "list", "--data", str(data), "--token", token],
        IMPORT: [sys.executable, "-c", "from node import Node"],
    }
    baseline = [sys.executable, "-c", "pass"]
    runs = 3 if quick else 21
    progress(f"startup: {runs} runs of each, interleaved")
    seconds: dict[str, list[float]] = {name: [] for name in COMMANDS}
    base: list[float] = []
    for _ in range(runs):
        base.append(_run(baseline, env))
        for name in COMMANDS:
            seconds[name].append(_run(argv[name], env))
    title = (
        f"startup — Python {platform.python_version()}, {os.cpu_count()} CPUs"
        f"{SMOKE if quick else ''}"
    )
    result = Result(title, baseline="python -c pass")
    result.latencies = [Latency(name, tuple(seconds[name]), tuple(base)) for name in COMMANDS]
    result.bounds = [Bound(name, "median", LIMIT_MS) for name in BOUNDED]
    result.notes.append("each a child process, timed from start to exit; runs interleaved")
    return result
