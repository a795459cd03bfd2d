"""The erase benchmark (docs/benchmarks.md §erase, docs/erasure.md): what erasing one SR costs
on the timeline benchmark's store of 1,000,000 SRs (cached; ``--quick``: 20,000), and what a
node writing meanwhile sees.

Two copies of the store, side by side in one run:

- **memlane**: a ``Node`` on the first copy erases an SR from the middle of the log
  (``e_erase`` by its owner), then its scrub runs — the search index merged whole in one
  transaction, the WAL truncated.  Meanwhile a writer on the same node writes an SR every
  50 ms; each write's latency is recorded, and the WAL's size is sampled as often.
- **one optimize** (the limit): the same SR's postings deleted from the search index of the
  second copy and the whole index merged in one transaction (FTS5 ``optimize``) with raw
  ``sqlite3``: the floor under a scrub.

Afterwards, the node still open, its database file and WAL are read whole: the erased SR's
text must not be in them.  Bound: the scrub ≤ 1.5 × one optimize.  Nothing here asserts on
speed; the bound is printed, not enforced.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from node.identity import DB_FILE
from node.node import Node
from tests.bench import timeline
from tests.bench.common import SMOKE, Check, peak_rss_mib, progress, table, tail, verdict

__all__ = ["FULL", "LIMIT", "QUICK", "Report", "Sizes", "run"]

LIMIT = 1.5  # the scrub over one optimize of the same index
WRITE_EVERY = 0.05
ERASE, SCRUB, OPTIMIZE = "memlane e_erase", "memlane scrub", "one optimize (FTS5), raw sqlite3"
ROWS = (ERASE, SCRUB, OPTIMIZE)
LEFT, RATIO = "the erased text left in the file and WAL", "scrub / one optimize"
CHECKS = (LEFT, RATIO, "longest write wait, scrub running", "scrub / one optimize (WAL peak)")


@dataclass(frozen=True, slots=True)
class Sizes:
    store: timeline.Sizes = timeline.FULL


FULL = Sizes()
QUICK = Sizes(store=timeline.QUICK)


@dataclass(slots=True)
class Side:
    seconds: float = 0.0
    wal_peak: int = 0
    writes_ms: list[float] = field(default_factory=list)


@dataclass(slots=True)
class Report:
    title: str
    sides: dict[str, Side]
    checks: list[Check]
    notes: list[str]

    def __str__(self) -> str:
        rows = [
            [
                label,
                f"{side.seconds:,.2f}",
                f"{side.wal_peak / 1e6:,.1f}" if side.wal_peak else "",
                f"{len(side.writes_ms):,}" if side.writes_ms else "",
                f"{max(side.writes_ms):,.0f}" if side.writes_ms else "",
            ]
            for label, side in self.sides.items()
        ]
        header = ["measurement", "seconds", "WAL peak MB", "writes meanwhile", "longest ms"]
        out = [self.title, "", *table(header, rows, right={1, 2, 3, 4})]
        return "\n".join([*out, *tail(self.checks, self.notes)])


def _victim(db: Path) -> tuple[str, str, str]:
    """An SR from the middle of the store: its id, owner and text."""
    with closing(sqlite3.connect(db)) as conn:
        (count,) = conn.execute("SELECT count(*) FROM srs WHERE live = 1").fetchone()
        return conn.execute(
            "SELECT sr_id, owner, text FROM srs WHERE live = 1 ORDER BY doc LIMIT 1 OFFSET ?",
            (count // 2,),
        ).fetchone()


async def _ours(data: Path, sr_id: str, owner: str, text: str) -> tuple[Side, Side, int]:
    """Erase, then scrub, a writer writing throughout, the WAL sampled as often; then, the
    node still open, how often the erased text is left in its files."""
    erase, scrub = Side(), Side()
    wal = data / f"{DB_FILE}-wal"
    async with Node.open(data, embed=False) as node:
        issued = await node.create_token(
            owner, timeline.WORKSPACE, ("read:workspace", "write:workspace")
        )
        caller = await node.authenticate(issued.token)
        done = asyncio.Event()

        async def write() -> None:
            while not done.is_set():
                start = time.perf_counter()
                await node.e_write(caller, title="meanwhile", text="a write during the scrub")
                scrub.writes_ms.append((time.perf_counter() - start) * 1000)
                scrub.wal_peak = max(scrub.wal_peak, wal.stat().st_size if wal.exists() else 0)
                await asyncio.sleep(WRITE_EVERY)

        start = time.perf_counter()
        await node.e_erase(caller, sr_id=sr_id, reason="the benchmark's erase")
        erase.seconds = time.perf_counter() - start
        writer = asyncio.create_task(write())
        start = time.perf_counter()
        await node.store.scrub()  # the background scrub's, or this one: done when it returns
        scrub.seconds = time.perf_counter() - start
        done.set()
        await writer
        left = _left(data, text)
    return erase, scrub, left


def _optimize(db: Path, sr_id: str) -> Side:
    """The SR's postings deleted and the whole index merged, one transaction."""
    side = Side()
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")  # the peak, not what a checkpoint leaves
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO sr_fts (sr_fts, rowid, title, text, tags) SELECT 'delete', doc, title, "
            "text, tags_text FROM srs WHERE sr_id = ?",
            (sr_id,),
        )
        conn.execute("INSERT INTO sr_fts (sr_fts) VALUES ('optimize')")
        conn.execute("COMMIT")
        side.seconds = time.perf_counter() - start
        side.wal_peak = Path(f"{db}-wal").stat().st_size
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return side


def _left(data: Path, text: str) -> int:
    """How often ``text`` occurs in the store's file and WAL (read a chunk at a time)."""
    needle, found = text.encode(), 0
    for name in (DB_FILE, f"{DB_FILE}-wal"):
        path = data / name
        if not path.exists():
            continue
        with path.open("rb") as f:
            carry = b""
            while chunk := f.read(64 << 20):
                block = carry + chunk
                found += block.count(needle)
                carry = block[-(len(needle) - 1) :] if len(needle) > 1 else b""
    return found


def run(*, quick: bool, workdir: Path) -> Report:
    sizes = QUICK if quick else FULL
    source, _, built = timeline.build(sizes.store)
    ours, peer = workdir / "ours", workdir / "peer"
    progress(f"erase: two copies of the store of {sizes.store.srs:,} SRs")
    shutil.copytree(source, ours)
    peer.mkdir()
    shutil.copyfile(source / DB_FILE, peer / DB_FILE)
    sr_id, owner, text = _victim(ours / DB_FILE)
    progress("erase: memlane erases one SR and scrubs, a writer writing meanwhile")
    erase, scrub, left = asyncio.run(_ours(ours, sr_id, owner, text))
    progress("erase: one optimize on the other copy")
    optimize = _optimize(peer / DB_FILE, sr_id)
    ratio = scrub.seconds / optimize.seconds
    checks = [
        Check(LEFT, f"{left:,}", "0", verdict(left == 0)),
        Check(RATIO, f"{ratio:.2f}", f"≤ {LIMIT:g}", verdict(ratio <= LIMIT)),
        Check(CHECKS[2], f"{max(scrub.writes_ms, default=0.0):,.0f} ms", "(info)", "(info)"),
        Check(CHECKS[3], f"{scrub.wal_peak / max(optimize.wal_peak, 1):.2f}", "(info)", "(info)"),
    ]
    notes = [
        f"store: {sizes.store.srs:,} SRs ({'built now' if built else 'from the cache'}); "
        f"the SR erased: {sr_id}, {len(text):,} characters of text",
        f"a write every {WRITE_EVERY * 1000:.0f} ms through e_write while the scrub runs; "
        "the scrub is the node's own (node.store.scrub waits for it)",
        f"peak RSS before the peer: {peak_rss_mib():,.0f} MiB",
    ]
    title = f"erase — one SR of {sizes.store.srs:,}{SMOKE if quick else ''}"
    sides = {ERASE: erase, SCRUB: scrub, OPTIMIZE: optimize}
    return Report(title, sides, checks, notes)
