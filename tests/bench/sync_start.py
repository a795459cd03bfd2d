"""Sync from a cold start (``python -m tests.bench sync``): three ``memlane serve`` processes
on loopback, each node holding 10,000 entries of its own the others lack; the time from
launching the three to every node holding every entry (each node's ``/metrics``, polled every
50 ms) — once with the nodes finding each other by zeroconf, once with static peers (A; B
dialling A; C dialling A and B), side by side in the same run, alternating.

The rate is the entries each node ends up holding over that time; the ratio of the two says
what discovery costs.  The three stores are built once and cached (``common.cached``); each
run starts from a fresh copy.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.node import Node
from tests.bench.common import Ratio, Result, Row, cached, progress
from tests.node.servekit import certified_mesh
from tests.node.synckit import write_own

__all__ = ["FULL", "QUICK", "ROWS", "Sizes", "run"]

NAMES = ("a", "b", "c")
ZEROCONF, STATIC = "three nodes to converged, zeroconf", "three nodes to converged, static peers"
ROWS = (ZEROCONF, STATIC)
RATIOS = (Ratio("zeroconf / static peers", ZEROCONF, STATIC),)
_CONFIG = '[discovery]\ninterfaces = ["127.0.0.1"]\n'
_WAIT = 300.0


@dataclass(frozen=True, slots=True)
class Sizes:
    name: str
    per_node: int
    repeats: int


FULL = Sizes("sync-start-3x10000", 10_000, 3)
QUICK = Sizes("sync-start-quick", 300, 1)


def _build(root: str, sizes: Sizes) -> dict[str, Any]:
    dirs = certified_mesh(Path(root), NAMES)

    async def author() -> dict[str, int]:
        heads: dict[str, int] = {}
        for name in NAMES:
            async with Node.open(dirs[name]) as node:
                await write_own(node, sizes.per_node)
                reader = node.reader()
                for log in await reader.select_logs():
                    key = (log.writer + log.epoch).hex()
                    heads[key] = max(heads.get(key, 0), log.head_seq)
        return heads

    heads = asyncio.run(author())
    return {"total": sum(heads.values())}


def _free_ports(n: int) -> list[int]:
    socks = [socket.create_server(("127.0.0.1", 0)) for _ in range(n)]
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _metric(base: str, name: str) -> int:
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    found = re.search(rf"^{name} (\d+)$", text, re.MULTILINE)
    return int(found[1]) if found else 0


def _launch(work: Path, zeroconf: bool) -> list[subprocess.Popen[str]]:
    sync, health = _free_ports(3), _free_ports(3)
    procs = []
    for i, name in enumerate(NAMES):
        mode = ["--discovery", "on"] if zeroconf else ["--discovery", "off"]
        for earlier in [] if zeroconf else sync[:i]:
            mode += ["--peer", f"127.0.0.1:{earlier}"]
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import sys; from node.cli import main; sys.exit(main())",
                    "serve",
                    "--data",
                    str(work / name),
                    "--json",
                    "--mcp-http",
                    "127.0.0.1:0",
                    "--sync-listen",
                    f"127.0.0.1:{sync[i]}",
                    "--health-listen",
                    f"127.0.0.1:{health[i]}",
                    *mode,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        )
    for proc in procs:
        assert proc.stdout is not None
        json.loads(proc.stdout.readline())  # listening
    return procs


def _once(cache: Path, work: Path, total: int, zeroconf: bool) -> float:
    """Seconds from launching the three to each holding ``total`` entries."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(cache, work, ignore=shutil.ignore_patterns("meta.json"))
    for name in NAMES:
        (work / name / "config.toml").write_text(_CONFIG)
    start = time.perf_counter()
    procs = _launch(work, zeroconf)
    try:
        bases = [_health_base(p) for p in procs]
        deadline = start + _WAIT
        while not all(_metric(b, "memlane_entries") >= total for b in bases):
            if time.perf_counter() > deadline:
                raise RuntimeError(f"not converged within {_WAIT:.0f} s")
            time.sleep(0.05)
        return time.perf_counter() - start
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)


def _health_base(proc: subprocess.Popen[str]) -> str:
    args = proc.args
    assert isinstance(args, list)
    return f"http://{args[args.index('--health-listen') + 1]}"


def run(*, quick: bool, workdir: Path) -> Result:
    sizes = QUICK if quick else FULL
    cache, meta, _ = cached(
        sizes.name, str(sizes.per_node), "three certified stores", _build, sizes
    )
    total = int(meta["total"])
    timings: dict[bool, list[float]] = {True: [], False: []}
    for i in range(sizes.repeats):
        for zeroconf in (True, False):
            seconds = _once(cache, workdir / "sync-start", total, zeroconf)
            timings[zeroconf].append(seconds)
            progress(
                f"sync start {i + 1}/{sizes.repeats} "
                f"{'zeroconf' if zeroconf else 'static'}: {seconds:.2f} s"
            )
    rows = [
        Row(label, total, tuple(timings[z]), note=_note(timings[z]))
        for label, z in ((ZEROCONF, True), (STATIC, False))
    ]
    return Result(
        f"sync from a cold start: three nodes, {sizes.per_node:,} entries each of their own",
        rows,
        list(RATIOS),
        [
            f"each node ends holding {total:,} entries; the rate is those over the time from "
            "launch to the last node holding them all (median of the runs)"
        ],
    )


def _note(seconds: list[float]) -> str:
    return "seconds: " + ", ".join(f"{s:.2f}" for s in seconds)
