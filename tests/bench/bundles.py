"""The bundle benchmark (docs/benchmarks.md): export and import of a 200,000-entry bundle beside
the store's chain-amortised receive path on the same entries, in the same run.

The stores are the sync benchmark's (``sync.stores``: a sender holding 200,000 ``sr.put``
entries of 20 writers, views built, and an empty receiver of the same mesh), cached under
``.bench-cache/``; every step works on copies.  Each step runs in its own child process
(spawn), so each peak RSS is its own:

- **export**: ``Node.export_bundle`` of everything the sender holds;
- **import**: ``Node.import_bundle`` of that file into the receiver — both passes (verify the
  whole file, then apply it ``node.transfer.bundles.IMPORT_CHUNK`` entries a transaction with
  the views, the write lock left free ``IMPORT_PAUSE`` between two, and one audit event);
- **receive pipeline**: the same entries, read from the bundle before timing, through
  ``node.receive`` in batches of 1,000 (chain-amortised, as sync hands them over) into another
  copy of the receiver.

The resident set of export and import is sampled as the file goes through (by bytes); "flat
in bundle size" compares it after the whole file with after a quarter of it.  Nothing here
asserts on speed.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from node.logging import configure_logging
from node.node import Node
from node.transfer.bundles import IMPORT_CHUNK
from protocol.bundle import BundleReader
from protocol.entry import Entry
from tests.bench import sync
from tests.bench.common import (
    SMOKE,
    Checked,
    Ratio,
    Result,
    Row,
    Stopwatch,
    in_child,
    progress,
    receive_batch,
    verdict,
)

__all__ = ["CHECKS", "RATIOS", "ROWS", "run"]

EXPORT = "bundle export"
IMPORT = "bundle import (verify, then apply)"
RECEIVE = "receive pipeline, chain-amortised"
ROWS = (EXPORT, IMPORT, RECEIVE)
RATIOS = (
    Ratio("import / receive pipeline", IMPORT, RECEIVE, target=0.8),
    Ratio("export / receive pipeline", EXPORT, RECEIVE),
)
BYTES_PER_ENTRY = "bundle bytes per entry"
IMPORT_RSS = "import RSS, end / quarter of the bundle"
EXPORT_RSS = "export RSS, end / quarter of the bundle"
IMPORTED = "entries the import stored"
FEED = "a reader's feed page holding the import"
CHECKS = (BYTES_PER_ENTRY, IMPORTED, FEED, IMPORT_RSS, EXPORT_RSS)
FEED_LIMIT_S = 2.0
RSS_GROWTH_LIMIT = 1.10
_BATCH = 1_000


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


class _Sampler:
    """The resident set against bytes gone through, every 20 ms, on a thread."""

    def __init__(self, done: Callable[[], int]) -> None:
        self.samples: list[tuple[int, float]] = []
        self._done, self._stop = done, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((self._done(), _rss_mib()))

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.samples.append((self._done(), _rss_mib()))

    def at(self, share: float) -> float:
        """The resident set first sampled once ``share`` of the last sample's bytes were
        through."""
        total = self.samples[-1][0]
        return next(rss for done, rss in self.samples if done >= total * share)


def _peak_mib() -> float:
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    return kib / 1024


def _export_main(node_dir: str, out: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        partial = Path(out + ".partial")
        async with Node.open(node_dir) as node:
            sizes = _Sampler(lambda: partial.stat().st_size if partial.exists() else 0)
            with sizes, Stopwatch() as sw:
                report = await node.export_bundle(out)
        sizes.samples[-1] = (report.bytes, sizes.samples[-1][1])
        return {
            "seconds": sw.seconds,
            "entries": report.entries,
            "bytes": report.bytes,
            "quarter": sizes.at(0.25),
            "end": sizes.samples[-1][1],
            "peak": _peak_mib(),
        }

    configure_logging()
    return asyncio.run(go())


def _import_main(node_dir: str, bundle: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        seen = {"import": 0}

        def progress_of(phase: str, done: int, _total: int) -> None:
            if phase == "import":
                seen["import"] = done

        async with Node.open(node_dir) as node:
            with _Sampler(lambda: seen["import"]) as sizes, Stopwatch() as sw:
                report = await node.import_bundle(bundle, progress=progress_of)
            feed, shown = await _feed(node)
        return {
            "seconds": sw.seconds,
            "new": report.new,
            "quarter": sizes.at(0.25),
            "end": sizes.samples[-1][1],
            "peak": _peak_mib(),
            "feed": feed,
            "shown": shown,
        }

    configure_logging()
    return asyncio.run(go())


async def _feed(node: Node) -> tuple[float, int]:
    """How long a reader of the workspace waits for the feed page that holds the import, and
    how many entries it is shown the import brought."""
    issued = await node.create_token("reader", sync.WORKSPACE, ("read:workspace",))
    reader = await node.authenticate(issued.token)
    with Stopwatch() as sw:
        page = await node.e_audit(reader, action="list", since_seq=0)
    (event,) = [e for e in page["events"] if e["event"] == "bundle_imported"]
    return sw.seconds, int(event["detail"]["entries"])


def _entries(bundle: Path) -> list[tuple[bytes, bytes | None]]:
    reader, out = BundleReader(), []
    with bundle.open("rb") as f:
        while chunk := f.read(1 << 20):
            reader.feed(chunk)
            while (event := reader.next_event()) is not None:
                if isinstance(event, Entry):
                    out.append((event.raw, event.payload))
    reader.end_of_input()
    return out


def _receive_main(node_dir: str, bundle: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        entries = _entries(Path(bundle))
        async with Node.open(node_dir) as node:
            held = {(e.header.writer, e.header.epoch) for e in await node.entries()}
            fresh = [e for e in entries if (Entry.decode(e[0], None).header.log not in held)]
            seconds = 0.0
            for i in range(0, len(fresh), _BATCH):
                seconds += await receive_batch(node, fresh[i : i + _BATCH])
        return {"seconds": seconds, "entries": len(fresh), "peak": _peak_mib()}

    configure_logging()
    return asyncio.run(go())


def _copy(cached: Path, name: str, work: Path) -> str:
    shutil.copytree(cached / name, work)
    return str(work)


def _measure(workdir: Path, sizes: sync.Sizes) -> Checked:
    cached, meta, built = sync.stores(sizes)
    quick = SMOKE if sizes == sync.QUICK else ""
    title = (
        f"bundles — Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPUs, synchronous=FULL, WAL{quick}"
    )
    bundle = workdir / "all.bundle"
    progress(f"bundles: exporting {meta['entries']:,} entries")
    exported = in_child(_export_main, _copy(cached, "sender", workdir / "sender"), str(bundle))
    shutil.rmtree(workdir / "sender")
    progress(f"bundles: took {exported['seconds']:.1f} s; importing them")
    imported = in_child(_import_main, _copy(cached, "receiver", workdir / "imp"), str(bundle))
    shutil.rmtree(workdir / "imp")
    progress(f"bundles: took {imported['seconds']:.1f} s; the receive pipeline")
    received = in_child(_receive_main, _copy(cached, "receiver", workdir / "rcv"), str(bundle))
    shutil.rmtree(workdir / "rcv")
    bundle.unlink()
    return _report(title, exported, imported, received, meta, built)


def _report(
    title: str,
    exported: dict[str, Any],
    imported: dict[str, Any],
    received: dict[str, Any],
    meta: dict[str, Any],
    built: bool,
) -> Checked:
    n = received["entries"]
    result = Result(title, ratios=list(RATIOS))
    result.rows += [
        Row(
            EXPORT,
            exported["entries"],
            (exported["seconds"],),
            rss_mib=exported["peak"],
            note=f"{exported['bytes'] / exported['entries']:,.0f} bytes/entry; own process",
        ),
        Row(
            IMPORT,
            n,
            (imported["seconds"],),
            rss_mib=imported["peak"],
            note=f"{IMPORT_CHUNK:,} entries a transaction; own process",
        ),
        Row(
            RECEIVE,
            n,
            (received["seconds"],),
            rss_mib=received["peak"],
            note=f"{_BATCH:,} entries/receive; all in memory",
        ),
    ]
    growth = f"≤ {RSS_GROWTH_LIMIT:g}×"
    checks = [
        (BYTES_PER_ENTRY, f"{exported['bytes'] / exported['entries']:,.0f}", "(info)", "(info)"),
        (IMPORTED, f"{imported['new']:,}", f"= {n:,}", verdict(imported["new"] == n)),
        (
            FEED,
            f"{imported['feed']:.2f} s",
            f"≤ {FEED_LIMIT_S:g} s",
            verdict(imported["shown"] == n and imported["feed"] <= FEED_LIMIT_S),
        ),
        (
            IMPORT_RSS,
            f"{imported['end']:,.0f} / {imported['quarter']:,.0f} MiB",
            growth,
            verdict(imported["end"] <= imported["quarter"] * RSS_GROWTH_LIMIT),
        ),
        (
            EXPORT_RSS,
            f"{exported['end']:,.0f} / {exported['quarter']:,.0f} MiB",
            growth,
            verdict(exported["end"] <= exported["quarter"] * RSS_GROWTH_LIMIT),
        ),
    ]
    how = "made by this run" if built else "reused from the cache"
    result.notes += [
        f"stores: the sync benchmark's, {how} ({meta['entries']:,} entries of 20 writers)",
        f"bundle: {exported['bytes']:,} bytes for {exported['entries']:,} entries (the "
        f"authority's log besides the writers'); the import stored {imported['new']:,}",
        f"peak RSS: export {exported['peak']:,.0f} MiB, import {imported['peak']:,.0f} MiB, "
        f"receive {received['peak']:,.0f} MiB (each its own process)",
    ]
    return Checked(result, checks)


def run(*, quick: bool, workdir: Path) -> Checked:
    """Make (or reuse) the cached stores, then measure; ``quick`` is a smoke run."""
    return sync.run_on_stores(_measure, quick=quick, workdir=workdir)
