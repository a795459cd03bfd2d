"""The export and import benchmark (docs/benchmarks.md §exchange): ``memlane export`` and
``memlane import`` of the SRs of a store, beside a bundle's export and import of the same store
on the same machine, in the same run.

The stores are the sync benchmark's (``sync.stores``: a sender holding 200,000 ``sr.put``
entries of 20 writers in one workspace, views built, and an empty receiver of the same mesh),
cached under ``.bench-cache/``; every step works on copies, in a child process of its own
(spawn), so each peak RSS is its own:

- **bundle export** / **bundle import**: ``Node.export_bundle`` of the sender, and
  ``Node.import_bundle`` of that file into the receiver (as ``bundles`` measures them);
- **export**: ``Node.export`` as jsonl of everything an admin of the workspace reads;
- **import**: ``Node.import_file`` of that file into the receiver, through the write path (a
  signed entry of the receiver per SR).

Rates are SRs (or entries) a second. The resident set of the export and the import is sampled
as they go; "flat in the number of records" compares it at the end with a quarter of the way.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from node.logging import configure_logging
from node.node import Node
from tests.bench import sync
from tests.bench.bundles import (
    RSS_GROWTH_LIMIT,
    _copy,
    _export_main,
    _import_main,
    _peak_mib,
    _Sampler,
)
from tests.bench.common import (
    SMOKE,
    Checked,
    Ratio,
    Result,
    Row,
    Stopwatch,
    in_child,
    progress,
    verdict,
)

__all__ = ["CHECKS", "RATIOS", "ROWS", "run"]

EXPORT, IMPORT = "memlane export (jsonl)", "memlane import (write path)"
BUNDLE_EXPORT, BUNDLE_IMPORT = "bundle export", "bundle import"
ROWS = (EXPORT, BUNDLE_EXPORT, IMPORT, BUNDLE_IMPORT)
RATIOS = (
    Ratio("export / bundle export", EXPORT, BUNDLE_EXPORT, target=0.5),
    Ratio("import / bundle import", IMPORT, BUNDLE_IMPORT, target=0.5),
)
IMPORTED = "SRs the import wrote"
EXPORT_RSS = "export RSS, end / quarter of the way"
IMPORT_RSS = "import RSS, end / quarter of the way"
CHECKS = (IMPORTED, EXPORT_RSS, IMPORT_RSS)


async def _admin(node: Node) -> Any:
    issued = await node.create_token("bench", sync.WORKSPACE, ("admin:workspace",))
    return await node.authenticate(issued.token)


def _plain_export_main(node_dir: str, out: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        done = {"n": 0}
        async with Node.open(node_dir) as node:
            who = await _admin(node)
            with _Sampler(lambda: done["n"]) as rss, Stopwatch() as sw:
                report = await node.export(
                    who, out, "jsonl", progress=lambda _, n, __: done.update(n=n)
                )
        return {
            "seconds": sw.seconds,
            "srs": report.srs,
            "quarter": rss.at(0.25),
            "end": rss.samples[-1][1],
            "peak": _peak_mib(),
        }

    configure_logging()
    return asyncio.run(go()) | {"bytes": os.path.getsize(out)}


def _plain_import_main(node_dir: str, path: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        done = {"n": 0}
        told = lambda _, n, __: done.update(n=n)  # noqa: E731 - records read so far
        async with Node.open(node_dir) as node:
            who = await _admin(node)
            with _Sampler(lambda: done["n"]) as rss, Stopwatch() as sw:
                report = await node.import_file(who, path, "memlane", progress=told)
        return {
            "seconds": sw.seconds,
            "written": report.written,
            "skipped": report.skipped,
            "quarter": rss.at(0.25),
            "end": rss.samples[-1][1],
            "peak": _peak_mib(),
        }

    configure_logging()
    return asyncio.run(go())


def _measure(workdir: Path, sizes: sync.Sizes) -> Checked:
    cached, meta, built = sync.stores(sizes)
    quick = SMOKE if sizes == sync.QUICK else ""
    title = (
        f"exchange — Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPUs, synchronous=FULL, WAL{quick}"
    )
    bundle, plain = workdir / "all.bundle", workdir / "all.jsonl"
    steps: dict[str, dict[str, Any]] = {}
    for name, fn, store, out in (
        ("bundle export", _export_main, "sender", bundle),
        ("export", _plain_export_main, "sender", plain),
        ("bundle import", _import_main, "receiver", bundle),
        ("import", _plain_import_main, "receiver", plain),
    ):
        progress(f"exchange: {name}")
        copy = _copy(cached, store, workdir / "node")
        steps[name] = in_child(fn, copy, str(out))
        shutil.rmtree(copy)
    bundle.unlink()
    plain.unlink()
    return _report(title, steps, meta, built)


def _report(
    title: str, steps: dict[str, dict[str, Any]], meta: dict[str, Any], built: bool
) -> Checked:
    ex, im = steps["export"], steps["import"]
    bex, bim = steps["bundle export"], steps["bundle import"]
    result = Result(title, ratios=list(RATIOS))
    result.rows += [
        Row(
            EXPORT,
            ex["srs"],
            (ex["seconds"],),
            rss_mib=ex["peak"],
            note=f"{ex['bytes'] / max(ex['srs'], 1):,.0f} bytes/SR; own process",
        ),
        Row(
            BUNDLE_EXPORT,
            bex["entries"],
            (bex["seconds"],),
            rss_mib=bex["peak"],
            note="every entry; own process",
        ),
        Row(
            IMPORT,
            im["written"],
            (im["seconds"],),
            rss_mib=im["peak"],
            note="an entry signed here per SR; own process",
        ),
        Row(
            BUNDLE_IMPORT,
            bim["new"],
            (bim["seconds"],),
            rss_mib=bim["peak"],
            note="verify, then apply; own process",
        ),
    ]
    growth = f"≤ {RSS_GROWTH_LIMIT:g}×"
    checks = [
        (
            IMPORTED,
            f"{im['written']:,}",
            f"= {ex['srs']:,}",
            verdict(im["written"] == ex["srs"] and im["skipped"] == 0),
        ),
        (
            EXPORT_RSS,
            f"{ex['end']:,.0f} / {ex['quarter']:,.0f} MiB",
            growth,
            verdict(ex["end"] <= ex["quarter"] * RSS_GROWTH_LIMIT),
        ),
        (
            IMPORT_RSS,
            f"{im['end']:,.0f} / {im['quarter']:,.0f} MiB",
            growth,
            verdict(im["end"] <= im["quarter"] * RSS_GROWTH_LIMIT),
        ),
    ]
    how = "made by this run" if built else "reused from the cache"
    result.notes += [
        f"stores: the sync benchmark's, {how} ({meta['entries']:,} entries of 20 writers); "
        f"the export holds {ex['srs']:,} SRs",
    ]
    return Checked(result, checks)


def run(*, quick: bool, workdir: Path) -> Checked:
    """Make (or reuse) the cached stores, then measure; ``quick`` is a smoke run."""
    return sync.run_on_stores(_measure, quick=quick, workdir=workdir)
