"""The serving benchmark of bundle imports (docs/benchmarks.md): a node in another process on the
same data directory writes an SR every 50 ms through its own write path while a 200,000-entry
bundle is imported; its write latency, and the import's rate beside it and alone.

The stores are the sync benchmark's (``sync.stores``), cached under ``.bench-cache/``; the
bundle is exported from the sender (as the ``bundles`` benchmark does) and every import works
on a copy of the receiver.  Each step runs in its own child process (spawn):

- **import alone**: ``Node.import_bundle``, chunked (``node.transfer.bundles.IMPORT_CHUNK``
  entries a transaction), nothing else writing;
- **import in one transaction**: the same with a chunk of the whole bundle, as imports were
  before they were chunked;
- **import beside a writer**: the chunked import while a writer process — ``Node.open`` on
  the same directory, ``e_write`` every 50 ms, each write timed from the call to its
  acknowledgement (durable) — writes; it starts before the import and stops after it;
- **one transaction beside a writer**: the same with the import in one transaction.

The check: the writer's p99 latency during the chunked import under a second, and none of its
writes refused; the same figures beside the one transaction are shown for comparison.
Nothing asserts on speed.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import platform
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from node.errors import NodeError
from node.logging import configure_logging
from node.node import Node
from node.transfer import bundles
from tests.bench import sync
from tests.bench.bundles import _copy, _export_main
from tests.bench.common import (
    SMOKE,
    Checked,
    Ratio,
    Result,
    Row,
    in_child,
    peak_rss_mib,
    progress,
    quantile,
    verdict,
)

__all__ = ["CHECKS", "RATIOS", "ROWS", "run"]

ALONE = "import alone (chunked)"
ONE_TXN = "import in one transaction"
BESIDE = "import beside a writer (chunked)"
ONE_BESIDE = "one transaction beside a writer"
ROWS = (ALONE, ONE_TXN, BESIDE, ONE_BESIDE)
RATIOS = (
    Ratio("beside a writer / alone", BESIDE, ALONE),
    Ratio("chunked / one transaction", ALONE, ONE_TXN),
)
P50, P99, MAX = "write latency during the import, p50", "… p99", "… max"
QUIET = "write latency before the import, p50"
WRITES = "writes during the import (refused)"
ONE_P50, ONE_P99 = "one transaction: write latency p50", "one transaction: … p99"
ONE_MAX, ONE_WRITES = "one transaction: … max", "one transaction: writes (refused)"
CHECKS = (QUIET, P50, P99, MAX, WRITES, ONE_P50, ONE_P99, ONE_MAX, ONE_WRITES)
ONE = 1 << 40  # a chunk of the whole bundle
P99_LIMIT_S = 1.0
INTERVAL_S = 0.05  # the writer's pace
BEFORE_S = 2.0  # the writer alone before the import starts, and after it ends
QUICK_BEFORE_S = 0.3


def _import_main(node_dir: str, bundle: str, chunk: int) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with Node.open(node_dir) as node:
            started = time.monotonic()
            report = await bundles.import_bundle(
                node.store, node.info.mesh, Path(bundle), chunk=chunk
            )
            ended = time.monotonic()
        return {
            "seconds": ended - started,
            "started": started,
            "ended": ended,
            "new": report.new,
            "peak": peak_rss_mib(),
        }

    configure_logging()
    return asyncio.run(go())


def _writer_main(node_dir: str, ready: Any, stop: Any, out: Any) -> None:
    """Write an SR every ``INTERVAL_S`` until ``stop``; put each write's (start, seconds,
    refused) on ``out``."""

    async def go() -> list[tuple[float, float, bool]]:
        timed: list[tuple[float, float, bool]] = []
        async with Node.open(node_dir) as node:
            issued = await node.create_token("writer", sync.WORKSPACE, ("write:workspace",))
            caller = await node.authenticate(issued.token)
            ready.set()
            while not stop.is_set():
                started = time.monotonic()
                try:
                    await node.e_write(caller, title=f"beside {len(timed)}", text="a note")
                    refused = False
                except NodeError:
                    refused = True
                timed.append((started, time.monotonic() - started, refused))
                await asyncio.sleep(max(0.0, started + INTERVAL_S - time.monotonic()))
        return timed

    configure_logging()
    out.put(asyncio.run(go()))


Timed = list[tuple[float, float, bool]]  # each write's start, seconds, and whether refused


def _beside(node_dir: str, bundle: str, chunk: int, alone_s: float) -> tuple[dict[str, Any], Timed]:
    """The import while a writer process writes on the same directory, alone for ``alone_s``
    before and after."""
    context = multiprocessing.get_context("spawn")
    ready, stop, out = context.Event(), context.Event(), context.Queue()
    writer = context.Process(target=_writer_main, args=(node_dir, ready, stop, out))
    writer.start()
    try:
        if not ready.wait(120):
            raise RuntimeError("the writer did not start")
        time.sleep(alone_s)
        imported = in_child(_import_main, node_dir, bundle, chunk)
        time.sleep(alone_s)
        stop.set()
        timed: Timed = out.get(timeout=120)
    finally:
        stop.set()
        writer.join(60)
    return imported, timed


def _measure(workdir: Path, sizes: sync.Sizes) -> Checked:
    cached, meta, built = sync.stores(sizes)
    quick = SMOKE if sizes == sync.QUICK else ""
    title = (
        f"bundle_serving — Python {platform.python_version()}, SQLite "
        f"{sqlite3.sqlite_version}, {os.cpu_count()} CPUs, synchronous=FULL, "
        f"WAL{quick}"
    )
    bundle = workdir / "all.bundle"
    progress(f"bundle_serving: exporting {meta['entries']:,} entries")
    in_child(_export_main, _copy(cached, "sender", workdir / "sender"), str(bundle))
    shutil.rmtree(workdir / "sender")
    runs: dict[str, dict[str, Any]] = {}
    for label, chunk in ((ALONE, bundles.IMPORT_CHUNK), (ONE_TXN, ONE)):
        progress(f"bundle_serving: {label}")
        node_dir = _copy(cached, "receiver", workdir / "imp")
        runs[label] = in_child(_import_main, node_dir, str(bundle), chunk)
        shutil.rmtree(node_dir)
    alone_s = QUICK_BEFORE_S if sizes == sync.QUICK else BEFORE_S
    timed: dict[str, Timed] = {}
    for label, chunk in ((BESIDE, bundles.IMPORT_CHUNK), (ONE_BESIDE, ONE)):
        progress(f"bundle_serving: {label}, a write every {INTERVAL_S * 1000:.0f} ms")
        node_dir = _copy(cached, "receiver", workdir / "imp")
        runs[label], timed[label] = _beside(node_dir, str(bundle), chunk, alone_s)
        shutil.rmtree(node_dir)
    bundle.unlink()
    return _report(title, runs, timed, meta, built, alone_s)


def _during(run: dict[str, Any], timed: Timed) -> tuple[list[float], int]:
    """The seconds of the writes begun during the import, and how many were refused."""
    during = [(s, r) for t, s, r in timed if run["started"] <= t <= run["ended"]]
    return [s for s, _ in during], sum(r for _, r in during)


def _ms(values: list[float], q: float | None) -> str:
    if not values:
        return "-"
    return f"{(max(values) if q is None else quantile(values, q)) * 1000:,.0f} ms"


def _report(
    title: str,
    runs: dict[str, dict[str, Any]],
    timed: dict[str, Timed],
    meta: dict[str, Any],
    built: bool,
    alone_s: float,
) -> Checked:
    result = Result(title, ratios=list(RATIOS))
    notes = {
        ALONE: f"{bundles.IMPORT_CHUNK:,} entries a transaction; own process",
        ONE_TXN: "one chunk of the whole bundle; own process",
        BESIDE: f"a writer process: an SR every {INTERVAL_S * 1000:.0f} ms",
        ONE_BESIDE: "the same writer",
    }
    result.rows += [
        Row(
            label,
            runs[label]["new"],
            (runs[label]["seconds"],),
            rss_mib=runs[label]["peak"],
            note=notes[label],
        )
        for label in ROWS
    ]
    quiet = [s for t, s, r in timed[BESIDE] if t < runs[BESIDE]["started"] and not r]
    waits, refused = _during(runs[BESIDE], timed[BESIDE])
    one_waits, one_refused = _during(runs[ONE_BESIDE], timed[ONE_BESIDE])
    p99 = quantile(waits, 0.99)
    info = ("(info)", "(info)")
    checks = [
        (QUIET, _ms(quiet, 0.5), *info),
        (P50, _ms(waits, 0.5), *info),
        (P99, _ms(waits, 0.99), f"< {P99_LIMIT_S * 1000:,.0f} ms", verdict(p99 < P99_LIMIT_S)),
        (MAX, _ms(waits, None), *info),
        (
            WRITES,
            f"{len(waits):,} ({refused:,})",
            "(0 refused)",
            verdict(refused == 0 and bool(waits)),
        ),
        (ONE_P50, _ms(one_waits, 0.5), *info),
        (ONE_P99, _ms(one_waits, 0.99), *info),
        (ONE_MAX, _ms(one_waits, None), *info),
        (ONE_WRITES, f"{len(one_waits):,} ({one_refused:,})", *info),
    ]
    how = "made by this run" if built else "reused from the cache"
    writes = [w for label in (BESIDE, ONE_BESIDE) for w in timed[label]]
    result.notes += [
        f"stores: the sync benchmark's, {how} ({meta['entries']:,} entries of 20 writers)",
        f"the writer wrote alone {alone_s:g} s before each import and {alone_s:g} s after; "
        f"{len(writes):,} writes in all, {sum(r for *_, r in writes):,} refused",
    ]
    return Checked(result, checks)


def run(*, quick: bool, workdir: Path) -> Checked:
    """Make (or reuse) the cached stores, then measure; ``quick`` is a smoke run."""
    return sync.run_on_stores(_measure, quick=quick, workdir=workdir)
