"""The changes benchmark (docs/benchmarks.md): e_timeline action=changes on a large store.

Two stores hold the same corpus at two sizes — 1,000,000 SRs (the timeline benchmark's cached
store, copied) and 100,000 (every tenth SR of that corpus, built through the same receive
path) — and both receive the same 10,000 changes, made after the corpus's time span inside
one day: ``sr.put`` updates, ``sr.correct`` and ``sr.adjust`` of existing SRs (every 100th SR of
the corpus, so each change is in both stores), sealed by a dedicated foreign writer.  The
changed stores are cached under ``.bench-cache/`` (``MEMLANE_BENCH_CACHE`` moves it), keyed by a
version string, so later runs only measure.

Then ``Node.e_timeline(action="changes")`` for a reader (``read:workspace`` on "team", not an
admin) asks for that day, page 1 and later pages (passing back ``as_of``), the two stores
alternating run by run; and a brute-force reference on the same files (stdlib ``sqlite3``,
read-only) scans every SR of ``srs`` — its version at ``since`` and at ``as_of``, its
deletions, the newest entry in the window — and classifies each.  Every page memlane answered
must equal the brute force's slice (sr_id, change, changed_at, hidden_change, order, has_more).
Nothing here asserts on speed; the targets are printed, not enforced.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import math
import multiprocessing
import os
import platform
import random
import shutil
import sqlite3
import statistics
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.access.callers import Caller
from node.identity import DB_FILE
from node.node import Node
from node.views.read_rule import may_read_sr
from protocol.canonical import decode_canonical, encode_canonical
from protocol.clock import Hlc
from protocol.kinds import encode_payload
from protocol.signing import SigningKey, seal
from protocol.timefmt import format_instant, parse_instant
from tests.bench import timeline
from tests.bench.common import (
    SMOKE,
    Check,
    Stopwatch,
    cache_root,
    peak_rss_mib,
    progress,
    receive_batch,
    table,
    tail,
)
from tests.bench.timeline import DAY_MS, READER, WORKSPACE, Corpus

__all__ = ["FULL", "QUICK", "Report", "Sizes", "brute_force", "labels", "run"]

# Bump when what the builder writes changes (the schema's own changes are in the key already).
BUILD_VERSION = "changes-stores-2"
FIRST_PAGE_LIMIT_MS = 50.0  # the target for the first page (docs/benchmarks.md)
SAME_COST_LIMIT = 1.5  # first page at the large store / at the small one ("≈ 1")
PAGE_SIZE = 50


@dataclass(frozen=True, slots=True)
class Sizes:
    large: int = 1_000_000  # SRs of the large store (the corpus)
    small: int = 100_000  # SRs of the small store: every (large // small)-th SR of the corpus
    changed: int = 10_000  # SRs changed in the window: every (large // changed)-th
    pages: tuple[int, ...] = (1, 10, 50, 100)
    batch: int = 2_000  # entries per node.receive
    first_runs: int = 20  # timed runs of the first page (after the warm-up)
    page_runs: int = 9  # timed runs of each later page
    brute_runs: int = 3
    warmup: int = 2
    reuse_timeline: bool = True  # the large store starts from timeline's cached store
    name: str = "changes"


FULL = Sizes()
QUICK = Sizes(
    large=20_000,
    small=5_000,
    changed=500,
    pages=(1, 2, 5, 9),
    first_runs=5,
    page_runs=3,
    brute_runs=1,
    warmup=1,
    reuse_timeline=False,
    name="changes-quick",
)

# The window: one day, after every corpus entry (the corpus ends 2025-05-31).
SINCE_MS = parse_instant("2025-07-01T00:00:00Z").ms
AS_OF_MS = SINCE_MS + DAY_MS
EDITOR = "editor1"  # the principal the changes name (a non-creating entry's is not folded)
_EDITOR_KEY = SigningKey(b"\x60" * 32)  # the dedicated foreign writer of the changes
_EDITOR_EPOCH = b"\x60" * 8
_SEED = 20_250_701


def short(n: int) -> str:
    """1,000,000 → "1M", 100,000 → "100k", 5,000 → "5k"."""
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    return f"{n // 1000}k" if n % 1000 == 0 else f"{n:,}"


def labels(sizes: Sizes) -> dict[str, list[str]]:
    """The labels the table prints, by part (the smoke test looks for each)."""
    stores = [short(sizes.small), short(sizes.large)]
    rows = [_page_label(p, n) for n in stores for p in sizes.pages]
    rows += [f"brute force at {n}" for n in stores]
    checks = [f"first page at {n}" for n in stores]
    checks += [f"first page {stores[1]} / {stores[0]}"]
    checks += [f"page {p} / first page at {n}" for n in stores for p in sizes.pages[1:]]
    checks += [f"brute force / first page at {n}" for n in stores]
    checks += [f"brute force {stores[1]} / {stores[0]}", "pages equal the brute force's"]
    return {"rows": rows, "checks": checks}


def _page_label(page: int, store: str) -> str:
    return f"{'first page' if page == 1 else f'page {page}'} at {store}"


# -- the stores ------------------------------------------------------------------------------


def _writer_key(w: int) -> SigningKey:
    """The corpus writers' keys (as timeline's builder seals them)."""
    return SigningKey(bytes([0x40 + w]) * 32)


def _corpus_entries(corpus: Corpus, stride: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """(wall, payload) of every ``stride``-th SR of the corpus."""
    for i, item in enumerate(corpus.payloads()):
        if i % stride == 0:
            yield item


def changes(corpus: Corpus, count: int) -> list[tuple[str, int, dict[str, Any]]]:
    """(kind, wall, payload) of the changes, in the editor's order: every ``n // count``-th
    SR of the corpus, in a shuffled order, their walls spread across the window.  A quarter
    each: a title rewritten (``sr.put``), the text corrected (``sr.correct``), the tags and
    lane adjusted (``sr.adjust``), and private_fields set (``sr.put``; a change only the
    owner and admins see)."""
    step = corpus.n // count
    targets = [i * step for i in range(count)]
    rng = random.Random(_SEED)
    rng.shuffle(targets)
    out: list[tuple[str, int, dict[str, Any]]] = []
    for k, i in enumerate(targets):
        wall = SINCE_MS + 1 + k * DAY_MS // count
        words = " ".join(rng.sample(corpus.vocab, 4))
        base = {"sr_id": corpus.sr_id(i), "workspace": WORKSPACE, "principal": EDITOR}
        match k % 4:
            case 0:
                out.append(("sr.put", wall, base | {"create": False, "title": f"revised {words}"}))
            case 1:
                out.append(("sr.correct", wall, base | {"reason": "a typo", "text": words}))
            case 2:
                tags = rng.sample(corpus.tags, 2)
                out.append(("sr.adjust", wall, base | {"tags": tags, "lane": "review"}))
            case _:
                out.append(
                    ("sr.put", wall, base | {"create": False, "private_fields": {"note": words}})
                )
    return out


async def _receive_all(
    node: Node,
    entries: Iterator[tuple[int, int, str, int, dict[str, Any]]],
    total: int,
    batch_size: int,
    what: str,
) -> tuple[float, float]:
    """Seal and receive (key index, seq, kind, wall, payload) entries; -1 is the editor.  The
    seconds spent sealing and receiving."""
    mesh = node.info.mesh
    prevs: dict[int, bytes | None] = {}
    batch: list[tuple[bytes, bytes | None]] = []
    seal_s = receive_s = 0.0
    stored = 0
    started = time.perf_counter()
    for n, (w, seq, kind, wall, payload) in enumerate(entries, 1):
        t0 = time.perf_counter()
        key, epoch = (_EDITOR_KEY, _EDITOR_EPOCH) if w < 0 else (_writer_key(w), bytes([w + 1]) * 8)
        entry = seal(
            key,
            mesh=mesh,
            epoch=epoch,
            seq=seq,
            prev=prevs.get(w),
            hlc=Hlc(wall, 0),
            kind=kind,
            payload=encode_payload(kind, payload),
        )
        prevs[w] = entry.id
        batch.append((entry.raw, entry.payload))
        seal_s += time.perf_counter() - t0
        if len(batch) == batch_size or n == total:
            receive_s += await receive_batch(node, batch)
            stored += len(batch)
            batch = []
            if stored % 50_000 == 0 or stored == total:
                progress(
                    f"changes: {what}: {stored:,} of {total:,} entries in "
                    f"{time.perf_counter() - started:,.0f} s"
                )
    if stored != total:
        raise RuntimeError(f"{what}: stored {stored} of {total}")
    return seal_s, receive_s


async def _build_small(path: Path, sizes: Sizes, stride: int) -> dict[str, Any]:
    """A new node holding every ``stride``-th SR of the corpus, sealed by the corpus's
    writers (each its own chain)."""
    await Node.init(path)
    corpus = Corpus.make(sizes.large)
    n = len(range(0, sizes.large, stride))
    seqs = [0] * timeline.WRITERS

    def entries() -> Iterator[tuple[int, int, str, int, dict[str, Any]]]:
        for j, (wall, payload) in enumerate(_corpus_entries(corpus, stride)):
            w = j % timeline.WRITERS
            seqs[w] += 1
            yield w, seqs[w], "sr.put", wall, payload

    async with Node.open(path) as node:
        for w in range(timeline.WRITERS):  # the writers are members of the mesh
            await node.membership.admit_member(_writer_key(w).public)
        issued = await node.create_token(READER, WORKSPACE, ("read:workspace",))
        started = time.perf_counter()
        seal_s, receive_s = await _receive_all(node, entries(), n, sizes.batch, "corpus")
        build_s = time.perf_counter() - started
    return {
        "srs": n,
        "token": issued.token,
        "build_s": build_s,
        "seal_s": seal_s,
        "receive_s": receive_s,
    }


async def _apply_changes(path: Path, sizes: Sizes) -> dict[str, Any]:
    corpus = Corpus.make(sizes.large)
    made = changes(corpus, sizes.changed)
    entries = ((-1, k, kind, wall, p) for k, (kind, wall, p) in enumerate(made, 1))
    async with Node.open(path) as node:
        await node.membership.admit_member(_EDITOR_KEY.public)  # the editor is a member of the mesh
        started = time.perf_counter()
        await _receive_all(node, entries, len(made), sizes.batch, "changes")
        return {"changes": len(made), "changes_s": time.perf_counter() - started}


def _prepare_in_child(path: str, sizes: Sizes, stride: int, fresh: bool) -> dict[str, Any]:
    """Build the store (``fresh``) or take the copied one, then receive the changes."""

    async def go() -> dict[str, Any]:
        meta: dict[str, Any] = {}
        if fresh:
            meta |= await _build_small(Path(path), sizes, stride)
        meta |= await _apply_changes(Path(path), sizes)
        return meta | {"build_rss_mib": peak_rss_mib()}

    return asyncio.run(go())


def cache_key(sizes: Sizes, srs: int) -> str:
    schema = hashlib.sha256("".join(timeline.MIGRATIONS).encode()).hexdigest()[:16]
    base = "timeline-copy" if _reuses(sizes, srs) else "built"
    return (
        f"{BUILD_VERSION}/schema-{timeline.SCHEMA_VERSION}-{schema}/{base}/corpus-"
        f"{sizes.large}/srs-{srs}/changed-{sizes.changed}/window-{SINCE_MS}"
    )


def _reuses(sizes: Sizes, srs: int) -> bool:
    return sizes.reuse_timeline and srs == sizes.large == timeline.FULL.srs


def _copy_node(src: Path, dst: Path) -> None:
    """A consistent copy of a node directory: the database through SQLite's backup (a
    snapshot, whatever another process does with the source), the keys as files."""
    dst.mkdir(mode=0o700)
    for item in src.iterdir():
        if not item.name.startswith(DB_FILE):
            shutil.copy2(item, dst / item.name)
    source = sqlite3.connect(f"file:{src / DB_FILE}?mode=ro", uri=True)
    target = sqlite3.connect(dst / DB_FILE)
    try:
        source.backup(target, pages=65_536)
    finally:
        target.close()
        source.close()


def store(sizes: Sizes, srs: int) -> tuple[Path, dict[str, Any], bool]:
    """The cached changed store of ``srs`` SRs: its node directory, its metadata, whether it
    was made now.  Made in a child process, so the measuring process's RSS is its own."""
    root = cache_root() / f"{sizes.name}-{srs}"
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        meta_file = root / "meta.json"
        if meta_file.exists():
            meta = json.loads(meta_file.read_text())
            if meta.get("key") == cache_key(sizes, srs) and (root / "node" / DB_FILE).exists():
                return root / "node", meta, False
            progress(f"changes: the cached store is stale ({meta.get('key')}); rebuilding")
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        fresh = root / "building"
        meta = {"key": cache_key(sizes, srs)}
        started = time.perf_counter()
        if _reuses(sizes, srs):
            src, tmeta, _ = timeline.build(timeline.FULL)
            progress(f"changes: copying {src} to {fresh}")
            with Stopwatch() as sw:
                _copy_node(src, fresh)
            meta |= {
                "srs": tmeta["srs"],
                "token": tmeta["token"],
                "copied_from": str(src),
                "copy_s": sw.seconds,
                "build_s": tmeta["build_s"],
                "receive_s": tmeta["receive_s"],
            }
        else:
            progress(f"changes: building a store of {srs:,} SRs in {root} (cached)")
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=context) as pool:
            made = pool.submit(
                _prepare_in_child, str(fresh), sizes, sizes.large // srs, not _reuses(sizes, srs)
            ).result()
        meta |= made | {"prepare_s": time.perf_counter() - started}
        fresh.rename(root / "node")
        meta_file.write_text(json.dumps(meta))
        return root / "node", meta, True


# -- the brute-force reference ---------------------------------------------------------------

_NO_LINKS = hashlib.sha256(encode_canonical([])).digest()
_AT = (
    "(SELECT v.ord FROM sr_versions v WHERE v.sr_id = s.sr_id AND v.ord < :{k} "
    "ORDER BY v.ord DESC LIMIT 1)"
)
_DEL = (
    "(SELECT d.deleted FROM deletions d WHERE d.sr_id = s.sr_id AND d.hlc_wall <= :{m} "
    "ORDER BY d.hlc_wall DESC, d.hlc_counter DESC, d.pos DESC LIMIT 1)"
)
_COLS = (
    "{v}.present, {v}.workspace, {v}.owner, {v}.private, {v}.full_digest, "
    "{v}.public_digest, {v}.links_digest"
)
# Every SR of the store, with its version at each moment, its deletion flag at each moment
# and its newest entry or deletion in the window (NULL when it has none).
_EVERY_SR = f"""
WITH at AS (
    SELECT s.sr_id, {_AT.format(k="k1")} AS o1, {_AT.format(k="k2")} AS o2,
        coalesce({_DEL.format(m="since")}, 0) AS d1, coalesce({_DEL.format(m="as_of")}, 0) AS d2,
        max(coalesce((SELECT max(v.wall) FROM sr_versions v WHERE v.sr_id = s.sr_id
                      AND v.wall > :since AND v.wall <= :as_of), -1),
            coalesce((SELECT max(d.hlc_wall) FROM deletions d WHERE d.sr_id = s.sr_id
                      AND d.hlc_wall > :since AND d.hlc_wall <= :as_of), -1)) AS changed_at
    FROM srs s
)
SELECT at.sr_id, at.changed_at, at.d1, at.d2, {_COLS.format(v="v1")}, {_COLS.format(v="v2")}
FROM at
LEFT JOIN sr_versions v1 ON v1.sr_id = at.sr_id AND v1.ord = at.o1
LEFT JOIN sr_versions v2 ON v2.sr_id = at.sr_id AND v2.ord = at.o2
"""


@dataclass(frozen=True, slots=True)
class Found:
    """One reported change: what memlane's answer and the brute force's are compared on."""

    changed_at: int
    sr_id: str
    change: str  # new | updated | deleted | undeleted
    hidden: bool = False


def _key(ms: int) -> bytes:
    return (ms + 1).to_bytes(8, "big")


def brute_force(conn: sqlite3.Connection, caller: Caller, since: int, as_of: int) -> list[Found]:
    """Every change in ``(since, as_of]`` for ``caller``, newest first (ties by sr_id), by
    looking at every SR of the store: its state at both moments, as the caller sees it."""
    args = {"since": since, "as_of": as_of, "k1": _key(since), "k2": _key(as_of)}
    touched: list[tuple[Any, ...]] = []
    flipped: set[str] = set()  # SRs the caller reads at one moment and not the other

    def readable(cols: Sequence[Any]) -> bool:
        return bool(cols[0]) and may_read_sr(caller, cols[1], cols[2], bool(cols[3]))

    for row in conn.execute(_EVERY_SR, args):
        sr_id, changed_at, d1, d2 = row[:4]
        a, b = row[4:11], row[11:18]
        seen_a, seen_b = readable(a), readable(b)
        if seen_a != seen_b:
            flipped.add(sr_id)
        if changed_at >= 0:
            touched.append((sr_id, changed_at, bool(d1), bool(d2), seen_a, seen_b, a, b))
    found: list[Found] = []
    for sr_id, changed_at, d1, d2, seen_a, seen_b, a, b in touched:
        change, hidden = _judge(conn, caller, sr_id, d1, d2, seen_a, seen_b, a, b, flipped, args)
        if change is not None:
            found.append(Found(changed_at, sr_id, change, hidden))
    found.sort(key=lambda f: (-f.changed_at, f.sr_id))
    return found


def _judge(
    conn: sqlite3.Connection,
    caller: Caller,
    sr_id: str,
    d1: bool,
    d2: bool,
    seen_a: bool,
    seen_b: bool,
    a: Sequence[Any],
    b: Sequence[Any],
    flipped: set[str],
    args: dict[str, Any],
) -> tuple[str | None, bool]:
    """The table of docs/tools/e_timeline.md §changes for one SR: (change or None, whether only
    unseen fields changed)."""
    if not seen_b:
        return None, False
    if not seen_a:
        return (None, False) if d2 else ("new", False)
    if d1 != d2:
        return ("deleted" if d2 else "undeleted"), False
    if d2:
        return None, False
    own = caller.may_read_private_fields(b[2])
    seen_digest = (bytes(a[4]), bytes(b[4])) if own else (bytes(a[5]), bytes(b[5]))
    links_a, links_b = bytes(a[6]), bytes(b[6])
    if seen_digest[0] != seen_digest[1]:
        return "updated", False
    if links_a != links_b:
        # The links differ; whether the caller sees the difference needs the lists.
        differ = _readable(conn, caller, sr_id, args, "k1") != _readable(
            conn, caller, sr_id, args, "k2"
        )
        return "updated", not differ
    # The same links at both moments: seen differently only if a target's readability
    # flipped in between.
    if (
        links_b != _NO_LINKS
        and flipped
        and _readable(conn, caller, sr_id, args, "k1") != _readable(conn, caller, sr_id, args, "k2")
    ):
        return "updated", False
    if bytes(a[4]) != bytes(b[4]):
        return "updated", True
    return None, False


def _state(conn: sqlite3.Connection, sr_id: str, key: bytes) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT state FROM sr_versions WHERE sr_id = ? AND ord < ? ORDER BY ord DESC LIMIT 1",
        (sr_id, key),
    ).fetchone()
    return None if row is None else decode_canonical(bytes(row[0]), what="sr")


def _readable(
    conn: sqlite3.Connection, caller: Caller, sr_id: str, args: dict[str, Any], moment: str
) -> list[str]:
    """The SR's links at the moment, kept to the targets the caller reads then."""
    state = _state(conn, sr_id, args[moment])
    kept = []
    for target in (state or {}).get("links") or ():
        t = _state(conn, target, args[moment])
        if (
            t
            and t.get("exists")
            and may_read_sr(
                caller,
                t.get("workspace") or "",
                t.get("owner") or "",
                t.get("visibility") == "private",
            )
        ):
            kept.append(target)
    return kept


def _of_answer(answer: dict[str, Any]) -> list[Found]:
    return [
        Found(
            parse_instant(c["changed_at"]).ms, c["sr_id"], c["change"], bool(c.get("hidden_change"))
        )
        for c in answer["changes"]
    ]


# -- measuring -------------------------------------------------------------------------------


@dataclass(slots=True)
class Timed:
    """One timed thing: the seconds of each run, and what it found."""

    label: str
    seconds: list[float] = field(default_factory=list)
    note: str = ""
    rss_mib: float = 0.0

    @property
    def median_ms(self) -> float:
        return statistics.median(self.seconds) * 1000

    @property
    def p90_ms(self) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(0.9 * len(ordered)) - 1))] * 1000


@dataclass(slots=True)
class Report:
    """What this benchmark prints (its own table: ``common.Result`` has no room for
    ratios between latencies)."""

    title: str
    rows: list[Timed] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return render(self)


def _ms(value: float) -> str:
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def render(report: Report) -> str:
    rows = [
        [
            r.label,
            _ms(r.median_ms),
            _ms(r.p90_ms),
            str(len(r.seconds)),
            f"{r.rss_mib:,.0f} MiB",
            r.note,
        ]
        for r in report.rows
    ]
    out = [report.title, ""]
    out += table(
        ["measurement", "median ms", "p90 ms", "runs", "peak RSS", "note"], rows, right={1, 2, 3, 4}
    )
    return "\n".join(out + tail(report.checks, report.notes))


@dataclass(slots=True)
class _Opened:
    name: str
    node: Node
    caller: Caller
    path: Path
    meta: dict[str, Any]
    answers: dict[int, dict[str, Any]] = field(default_factory=dict)


async def _page(s: _Opened, page: int) -> dict[str, Any]:
    return await s.node.e_timeline(
        s.caller,
        action="changes",
        since=format_instant(SINCE_MS),
        as_of=format_instant(AS_OF_MS),
        page=page,
        page_size=PAGE_SIZE,
    )


async def _measure(opened: list[_Opened], sizes: Sizes) -> dict[tuple[str, int], Timed]:
    """Each page at each store: warm up, then alternate the stores run by run."""
    timed: dict[tuple[str, int], Timed] = {}
    for page in sizes.pages:
        runs = sizes.first_runs if page == 1 else sizes.page_runs
        progress(f"changes: page {page}, {runs} runs at each store")
        for s in opened:
            timed[s.name, page] = Timed(_page_label(page, s.name))
            for _ in range(sizes.warmup):
                s.answers[page] = await _page(s, page)
        for i in range(runs):
            for s in opened if i % 2 == 0 else opened[::-1]:
                t0 = time.perf_counter()
                s.answers[page] = await _page(s, page)
                timed[s.name, page].seconds.append(time.perf_counter() - t0)
        for s in opened:
            answer = s.answers[page]
            t = timed[s.name, page]
            t.rss_mib = peak_rss_mib()
            t.note = f"{len(answer['changes'])} changes" + (
                ", has_more" if answer["has_more"] else ""
            )
    return timed


def _brute(s: _Opened, sizes: Sizes) -> tuple[Timed, list[Found]]:
    progress(f"changes: brute force at {s.name}, {sizes.brute_runs} runs")
    conn = sqlite3.connect(f"file:{s.path / DB_FILE}?mode=ro", uri=True)
    t = Timed(f"brute force at {s.name}")
    found: list[Found] = []
    try:
        for _ in range(sizes.brute_runs):
            t0 = time.perf_counter()
            found = brute_force(conn, s.caller, SINCE_MS, AS_OF_MS)
            t.seconds.append(time.perf_counter() - t0)
        srs = conn.execute("SELECT count(*) FROM srs").fetchone()[0]
    finally:
        conn.close()
    t.rss_mib = peak_rss_mib()
    t.note = f"{srs:,} SRs scanned, {len(found):,} changes"
    return t, found


def _compare(s: _Opened, found: list[Found]) -> list[str]:
    """Where memlane's pages differ from the brute force's slices (empty when they agree)."""
    wrong = []
    for page, answer in sorted(s.answers.items()):
        start = (page - 1) * PAGE_SIZE
        want = found[start : start + PAGE_SIZE]
        got = _of_answer(answer)
        if got != want:
            first = next(
                (i for i, (x, y) in enumerate(zip(got, want, strict=False)) if x != y),
                min(len(got), len(want)),
            )
            wrong.append(
                f"page {page} at {s.name}: {len(got)} changes vs {len(want)}, first "
                f"difference at {first}: {got[first : first + 1]} vs "
                f"{want[first : first + 1]}"
            )
        if answer["has_more"] != (len(found) > start + PAGE_SIZE):
            wrong.append(f"page {page} at {s.name}: has_more {answer['has_more']}")
    return wrong


async def _run(sizes: Sizes, report: Report) -> None:
    made = [store(sizes, n) for n in (sizes.small, sizes.large)]
    async with contextlib.AsyncExitStack() as stack:
        opened = []
        for (path, meta, _), n in zip(made, (sizes.small, sizes.large), strict=True):
            node = await stack.enter_async_context(Node.open(path))
            caller = await node.authenticate(meta["token"])
            assert caller.has("read:workspace")
            assert not caller.is_admin
            opened.append(_Opened(short(n), node, caller, path, meta))
        timed = await _measure(opened, sizes)
    brute = [_brute(s, sizes) for s in opened]
    small, large = opened
    for s in opened:
        report.rows += [timed[s.name, p] for p in sizes.pages]
    report.rows += [t for t, _ in brute]

    def ratio(label: str, value: float, limit: float | None) -> Check:
        if limit is None:
            return Check(label, f"{value:.2f}", "", "(info)")
        return Check(label, f"{value:.2f}", f"≤ {limit:g}", "PASS" if value <= limit else "FAIL")

    for s in opened:
        ms = timed[s.name, 1].median_ms
        report.checks.append(
            Check(
                f"first page at {s.name}",
                f"{ms:.1f} ms",
                f"≤ {FIRST_PAGE_LIMIT_MS:g} ms",
                "PASS" if ms <= FIRST_PAGE_LIMIT_MS else "FAIL",
            )
        )
    report.checks.append(
        ratio(
            f"first page {large.name} / {small.name}",
            timed[large.name, 1].median_ms / timed[small.name, 1].median_ms,
            SAME_COST_LIMIT,
        )
    )
    for s in opened:
        first = timed[s.name, 1].median_ms
        for p in sizes.pages[1:]:
            report.checks.append(
                ratio(f"page {p} / first page at {s.name}", timed[s.name, p].median_ms / first, p)
            )
    for s, (t, _) in zip(opened, brute, strict=True):
        report.checks.append(
            ratio(
                f"brute force / first page at {s.name}",
                t.median_ms / timed[s.name, 1].median_ms,
                None,
            )
        )
    report.checks.append(
        ratio(
            f"brute force {large.name} / {small.name}",
            brute[1][0].median_ms / brute[0][0].median_ms,
            None,
        )
    )
    wrong = [w for s, (_, found) in zip(opened, brute, strict=True) for w in _compare(s, found)]
    same = sum(len(s.answers) for s in opened)
    report.checks.append(
        Check(
            "pages equal the brute force's",
            f"{same - len(wrong)} of {same}",
            "all",
            "FAIL" if wrong else "PASS",
        )
    )
    report.notes += [f"MISMATCH {w}" for w in wrong]
    if [f.sr_id for f in brute[0][1]] != [f.sr_id for f in brute[1][1]]:
        report.notes.append("the two stores' brute-force answers differ (they should not)")
    for s, (path, meta, built) in zip(opened, made, strict=True):
        how = "made by this run" if built else "reused from the cache"
        if "copied_from" in meta:
            origin = (
                f"the timeline benchmark's cached store ({meta['srs']:,} SRs, built in "
                f"{meta['build_s']:,.0f} s), copied in {meta['copy_s']:,.0f} s"
            )
        else:
            origin = (
                f"{meta['srs']:,} SRs received in batches of {sizes.batch:,} in "
                f"{meta['build_s']:,.0f} s ({meta['srs'] / meta['receive_s']:,.0f} "
                "entries/s in node.receive)"
            )
        report.notes.append(
            f"{s.name} store {how} ({path.parent}): {origin}; then {meta['changes']:,} changes "
            f"received in {meta['changes_s']:,.1f} s"
        )


def run(*, quick: bool, workdir: Path) -> Report:
    """Make (or reuse) the two cached stores, then time the pages and the brute force."""
    del workdir  # the stores are cached outside the run's temporary directory
    sizes = QUICK if quick else FULL
    smoke = SMOKE if quick else ""
    report = Report(
        f"changes — {sizes.changed:,} SRs changed in one day, stores of {sizes.small:,} and "
        f"{sizes.large:,} SRs, page_size {PAGE_SIZE}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs{smoke}"
    )
    asyncio.run(_run(sizes, report))
    report.notes += [
        f"window: since {format_instant(SINCE_MS)} (exclusive), as_of "
        f"{format_instant(AS_OF_MS)}, every page passes both; changes: every "
        f"{sizes.large // sizes.changed}th SR of the corpus, a quarter each sr.put title, "
        "sr.correct text, sr.adjust tags+lane, sr.put private_fields (hidden_change for the "
        "reader), by one foreign writer",
        f"reader: {READER}, read:workspace on {WORKSPACE!r} (not admin); the small store is "
        f"every {sizes.large // sizes.small}th SR of the large one's corpus",
        "ms = milliseconds per call (e_timeline through Node, or the whole brute force); the "
        "stores alternate run by run after a warm-up; page N / first page is held to ≤ N "
        "(linear in N·page_size with the first page's cost per page)",
        "brute force: one read-only stdlib sqlite3 statement over every SR of srs (version at "
        "since and at as_of by PK lookups, deletion flags, newest entry in the window), "
        "classified in Python; every page memlane answered is compared with its slice",
    ]
    return report
