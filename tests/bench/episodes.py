"""The episode chain benchmark (docs/benchmarks.md): work_episode_chain on a large store.

A store of 1,000,000 episodes of 1,000 callers (``--quick``: 1,200 of 20) is built once through
memlane's real receive path and cached under ``.bench-cache/`` in the repository
(``MEMLANE_BENCH_CACHE`` moves it), keyed by the builder's version, the schema and the sizes.
Then chains are walked from the newest episode of random callers, each through
``Node.work_episode_chain`` for its owner and, beside it, hop by hop in raw SQLite on the same
file (stdlib ``sqlite3``, read-only: one lookup by (vault, id) per hop, the pass checks in
Python), alternating the two walk by walk so a change in the machine's load falls on both.
Both must give the same chains.  Nothing here asserts on speed; the target is printed, not
enforced.
"""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import os
import platform
import random
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from queue import Empty
from typing import Any

from node.identity import DB_FILE
from node.node import Node
from node.schema import MIGRATIONS, SCHEMA_VERSION
from node.views.episode_reads import COLUMNS
from protocol.clock import Hlc
from protocol.kinds import encode_payload
from protocol.signing import SigningKey, seal
from protocol.timefmt import parse_instant
from tests.bench.common import (
    SMOKE,
    Bound,
    Latency,
    Result,
    cached,
    cached_at,
    peak_rss_mib,
    progress,
    quantile,
    receive_batch,
)

__all__ = ["FULL", "QUICK", "Sizes", "bounds", "build", "cache_key", "labels", "run"]

# Bump when what the builder writes changes (the schema's own changes are in the key already).
BUILD_VERSION = "episodes-store-3"


@dataclass(frozen=True, slots=True)
class Sizes:
    callers: int = 1_000
    per_caller: int = 1_000  # episodes each caller records
    per_writer: int = 10  # callers whose entries one foreign writer seals
    batch: int = 2_000  # entries per node.receive
    k_long: int = 200
    k_short: int = 50
    walks: int = 500  # timed walks of each k on each side (after the warm-up)
    warmup: int = 20
    limit_ms: float = 3.0  # the target: the long walk's median
    budget_s: float = 60.0  # a k stops early (at ≥ min_walks) once it has taken this long
    min_walks: int = 50
    forget_share: float = 0.002  # old records forgotten later (never among the newest)
    name: str = "episodes-1m"

    @property
    def episodes(self) -> int:
        return self.callers * self.per_caller


FULL = Sizes()
QUICK = Sizes(
    callers=20,
    per_caller=60,
    per_writer=4,
    batch=500,
    k_long=30,
    k_short=10,
    walks=20,
    warmup=2,
    budget_s=5.0,
    min_walks=5,
    forget_share=0.05,
    name="episodes-1k2",
)

VAULT = "team"
AMEND_SHARE = 0.05  # records whose outcome an amendment gives later
DAY_MS = 86_400_000
START_MS = parse_instant("2025-01-06T00:00:00Z").ms  # ... over 120 days, all in the past
SPAN_MS = 120 * DAY_MS
_SEED = 20_250_106

CHANNELS = ("api", "mcp", "cli", "scheduler")
CHANNEL_WEIGHTS = (50, 35, 10, 5)
TYPES = ("task", "tool_call", "conversation", "review", "plan")
TYPE_WEIGHTS = (35, 40, 15, 5, 5)
TOOLS = tuple(
    f"{verb}_{noun}"
    for verb in ("search", "read", "write", "fetch", "summarise", "run")
    for noun in ("docs", "code", "tickets", "calendar", "mail")
)
TAGS = tuple(
    f"{a}-{b}"
    for a in ("deploy", "billing", "infra", "support", "research", "ops")
    for b in ("eu", "us", "prod", "stage", "urgent", "weekly")
)
_PROSE = (
    "checked the release notes against the open tickets and flagged two regressions in the "
    "export path summarised the customer thread drafted a reply scheduled a follow up call "
    "compared latency figures across regions rebuilt the index after the schema change found "
    "a stale cache entry that explained the mismatch wrote up the incident timeline for review "
    "merged the config fix and reran the nightly job which passed on the second attempt"
)
WORDS = tuple(_PROSE.split())


def labels(sizes: Sizes) -> tuple[str, str]:
    """The two latencies' labels, long walk first; the smoke test checks both are printed."""
    return f"chain walk k={sizes.k_long}", f"chain walk k={sizes.k_short}"


def bounds(sizes: Sizes) -> tuple[Bound, ...]:
    """The target: the long walk's median ≤ ``limit_ms``."""
    return (Bound(labels(sizes)[0], "median", sizes.limit_ms),)


def cache_key(sizes: Sizes) -> str:
    """The version of the cached store: the builder's, the schema's, and the sizes."""
    schema = hashlib.sha256("".join(MIGRATIONS).encode()).hexdigest()[:16]
    return (
        f"{BUILD_VERSION}/schema-{SCHEMA_VERSION}-{schema}/callers-{sizes.callers}"
        f"/per-caller-{sizes.per_caller}/per-writer-{sizes.per_writer}/batch-{sizes.batch}"
    )


def caller_name(c: int) -> str:
    return f"agent-{c:04d}"


# -- the episodes ----------------------------------------------------------------------------


def _episode_id(wall: int, slot: int, rng: random.Random) -> str:
    """A UUIDv7 from the record's time; the slot in its low bits keeps it unique."""
    value = wall << 80 | 0x7 << 76 | rng.getrandbits(12) << 64 | 0b10 << 62 | slot
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _summary(rng: random.Random) -> str:
    """About 100 characters of plausible prose."""
    start = rng.randrange(len(WORDS))
    out: list[str] = []
    length = -1
    i = start
    while length < 90 + rng.randrange(20):
        word = WORDS[i % len(WORDS)]
        out.append(word)
        length += len(word) + 1
        i += 1
    return " ".join(out).capitalize()


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the corpus: its time, whose it is, its kind and payload."""

    wall: int
    caller: int
    kind: str
    payload: dict[str, Any]


def corpus(sizes: Sizes) -> Iterator[Event]:
    """Every entry of the store, in time order (seeded, so two builds write the same).

    Round ``j`` records each caller's ``j``-th episode, the callers in a shuffled order, so
    the callers' episodes interleave in time.  A record's amendment (``AMEND_SHARE`` of them)
    comes just before its caller's next record; a forget (``sizes.forget_share``) comes right
    after a later record of its caller (1–50 rounds on), and only of an episode older than
    the caller's newest ``k_long * 3 // 2``: every caller's newest episode starts a chain of
    more than ``k_long`` passing hops.
    """
    rng = random.Random(_SEED)
    step = SPAN_MS // sizes.episodes
    assert step >= 8, "the corpus needs room between records for amendments and forgets"
    last = sizes.per_caller - sizes.k_long * 3 // 2  # records before this round may be forgotten
    prev: list[str | None] = [None] * sizes.callers
    amend: list[dict[str, Any] | None] = [None] * sizes.callers
    forgets: dict[tuple[int, int], list[str]] = {}  # (caller, round) -> ids to forget then
    order = list(range(sizes.callers))
    for j in range(sizes.per_caller):
        rng.shuffle(order)
        for at, c in enumerate(order):
            slot = j * sizes.callers + at
            wall = START_MS + slot * step + rng.randrange(step // 4)
            who = caller_name(c)
            outcome = amend[c]
            if outcome is not None:
                outcome["verdict_at"] = wall - 2
                yield Event(wall - 2, c, "episode.amend", outcome)
                amend[c] = None
            episode_id = _episode_id(wall, slot, rng)
            failed = rng.random() < 0.04
            payload: dict[str, Any] = {
                "id": episode_id,
                "vault": VAULT,
                "caller": who,
                "session_id": f"{who}/s{j // 25:03d}",
                "channel": rng.choices(CHANNELS, CHANNEL_WEIGHTS)[0],
                "episode_type": rng.choices(TYPES, TYPE_WEIGHTS)[0],
                "tool": rng.choice(TOOLS) if rng.random() < 0.8 else None,
                "error_code": "timeout" if failed else None,
                "duration_ms": int(rng.lognormvariate(7, 1)),
                "result_size": rng.randrange(50, 20_000),
                "summary": _summary(rng),
                "tags": rng.sample(TAGS, rng.randrange(4)),
                "status": "failed" if failed else "recorded",
                "eligibility": "eligible",
                "prev_id": prev[c],
            }
            if rng.random() < 0.3:
                payload["trust"] = round(rng.random(), 2)
            yield Event(wall, c, "episode.record", payload)
            prev[c] = episode_id
            for old in forgets.pop((c, j), ()):
                yield Event(
                    wall + 1, c, "episode.forget", {"id": old, "vault": VAULT, "caller": who}
                )
            if rng.random() < AMEND_SHARE:
                amend[c] = {
                    "id": episode_id,
                    "vault": VAULT,
                    "caller": who,
                    "status": rng.choice(("succeeded", "succeeded", "failed")),
                    "task_result": round(rng.random(), 3),
                }
            if j < last and rng.random() < sizes.forget_share:
                later = min(j + 1 + rng.randrange(50), sizes.per_caller - 1)
                forgets.setdefault((c, later), []).append(episode_id)


# -- building the store --------------------------------------------------------------------


def _writer_key(w: int) -> SigningKey:
    return SigningKey(hashlib.sha256(f"episodes-bench-writer-{w}".encode()).digest())


def _writers(sizes: Sizes) -> int:
    return -(-sizes.callers // sizes.per_writer)


def _produce(queue: Any, mesh: bytes, sizes: Sizes) -> None:
    """Seal the corpus for ``mesh`` and put it on ``queue`` in batches, then its tallies.

    Runs in its own process, so sealing overlaps the receiving.  Caller ``c``'s entries are
    sealed by writer ``c // sizes.per_writer`` (its own key and epoch, chained by ``prev``).
    """
    writers = _writers(sizes)
    keys = [_writer_key(w) for w in range(writers)]
    epochs = [(w + 1).to_bytes(8, "big") for w in range(writers)]
    seqs = [0] * writers
    prevs: list[bytes | None] = [None] * writers
    kinds: dict[str, int] = {}
    batch: list[tuple[bytes, bytes | None]] = []
    blocked = 0.0  # waiting for the receiver to take a batch
    started = time.perf_counter()
    for event in corpus(sizes):
        w = event.caller // sizes.per_writer
        seqs[w] += 1
        data = encode_payload(event.kind, event.payload)
        entry = seal(
            keys[w],
            mesh=mesh,
            epoch=epochs[w],
            seq=seqs[w],
            prev=prevs[w],
            hlc=Hlc(event.wall, 0),
            kind=event.kind,
            payload=data,
        )
        prevs[w] = entry.id
        batch.append((entry.raw, entry.payload))
        kinds[event.kind] = kinds.get(event.kind, 0) + 1
        if len(batch) == sizes.batch:
            t0 = time.perf_counter()
            queue.put(batch)
            blocked += time.perf_counter() - t0
            batch = []
    if batch:
        queue.put(batch)
    busy = time.perf_counter() - started - blocked
    queue.put({"kinds": kinds, "writers": writers, "seal_s": busy})


async def _build(path: Path, sizes: Sizes) -> dict[str, Any]:
    """Initialise a node at ``path``, admit the writers to its mesh, issue each caller a
    reading token, and receive the corpus through ``node.receive``, ``sizes.batch`` entries at
    a time, as a second process seals it."""
    info = await Node.init(path)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue(maxsize=8)
    producer = context.Process(target=_produce, args=(queue, info.mesh, sizes), daemon=True)
    producer.start()
    receive_s = wait_s = 0.0
    stored = 0
    started = time.perf_counter()
    async with Node.open(path) as node:
        for w in range(_writers(sizes)):  # the writers are members of the mesh
            await node.membership.admit_member(_writer_key(w).public)
        tokens: dict[str, str] = {}
        for c in range(sizes.callers):
            issued = await node.create_token(caller_name(c), VAULT, ("read:workspace",))
            tokens[caller_name(c)] = issued.token
        while True:
            t0 = time.perf_counter()
            item = await asyncio.to_thread(_next, queue, producer)
            wait_s += time.perf_counter() - t0
            if isinstance(item, dict):
                tally = item
                break
            receive_s += await receive_batch(node, item)
            before, stored = stored, stored + len(item)
            if stored // 100_000 != before // 100_000:
                _report(stored, time.perf_counter() - started, receive_s, wait_s)
        total = time.perf_counter() - started
        _report(stored, total, receive_s, wait_s)
    producer.join()
    db = path / DB_FILE
    return {
        "key": cache_key(sizes),
        "entries": stored,
        "kinds": tally["kinds"],
        "writers": tally["writers"],
        "tokens": tokens,
        "build_s": total,
        "receive_s": receive_s,
        "wait_s": wait_s,
        "seal_s": tally["seal_s"],
        "build_rss_mib": peak_rss_mib(),
        "db_mib": sum(f.stat().st_size for f in db.parent.glob(f"{db.name}*")) / 2**20,
    }


def _report(stored: int, took: float, receive_s: float, wait_s: float) -> None:
    progress(
        f"episodes: received {stored:,} entries in {took:,.0f} s "
        f"(node.receive {receive_s:,.0f} s, waiting for sealing {wait_s:,.0f} s)"
    )


def _next(queue: Any, producer: Any) -> Any:
    """The producer's next batch (or its tallies); raises if it died."""
    while True:
        try:
            return queue.get(timeout=5)
        except Empty:
            if not producer.is_alive():
                raise RuntimeError("the sealing process died") from None


def _build_in_child(directory: str, sizes: Sizes) -> dict[str, Any]:
    return asyncio.run(_build(Path(directory) / "node", sizes))


def build(sizes: Sizes) -> tuple[Path, dict[str, Any], bool]:
    """The cached store for ``sizes``: its node directory, its metadata, whether it was
    built now."""
    what = f"store of {sizes.episodes:,} episodes"
    root, meta, built = cached(sizes.name, cache_key(sizes), what, _build_in_child, sizes)
    return root / "node", meta, built


# -- the walks -------------------------------------------------------------------------------

# A hop is one lookup by (vault, id): the unique index, then the row it names.
_HOP = f"SELECT {', '.join(COLUMNS)}, expires_at FROM episodes WHERE vault = ? AND id = ?"
_ID, _TS, _VAULT, _CALLER = (COLUMNS.index(c) for c in ("id", "ts", "vault", "caller"))
_BLOCKED, _PREV, _EXPIRES = COLUMNS.index("blocked"), COLUMNS.index("prev_id"), len(COLUMNS)


def hop_by_hop(
    conn: sqlite3.Connection, start: str, k: int, principal: str, moment: int
) -> tuple[list[Any], bool] | None:
    """The chain from ``start`` read one episode at a time (by vault and id), with
    work_episode_chain's rules checked in Python: an episode passes when it is not forgotten,
    its ``ts`` has come, it has not expired, and it is the caller's own in the vault; the walk
    stops at the first that does not pass, at one it showed already, or after ``k`` (the next
    one telling whether the chain was cut short).  The rows, and whether more passing
    episodes follow; None when ``start`` does not pass."""
    kept: list[Any] = []
    seen: set[str] = set()
    truncated = False
    current: str | None = start
    while current is not None:
        row = conn.execute(_HOP, (VAULT, current)).fetchone()
        if row is None:
            break
        ok = (
            row[_BLOCKED] == 0
            and row[_TS] <= moment
            and (row[_EXPIRES] is None or row[_EXPIRES] > moment)
            and row[_VAULT] == VAULT
            and row[_CALLER] == principal
        )
        if not ok or row[_ID] in seen:
            break
        if len(kept) == k:
            truncated = True
            break
        kept.append(row)
        seen.add(row[_ID])
        current = row[_PREV]
    return (kept, truncated) if kept else None


async def _measure(path: Path, meta: dict[str, Any], sizes: Sizes, result: Result) -> int:
    """Time both walks at each k; return how many walks were compared."""
    raw = sqlite3.connect(f"file:{path / DB_FILE}?mode=ro", uri=True)
    plan = " ".join(str(r[-1]) for r in raw.execute(f"EXPLAIN QUERY PLAN {_HOP}", (VAULT, "")))
    if "(vault=? AND id=?)" not in plan:
        raise RuntimeError(f"a hop is not a lookup by (vault, id) any more: {plan}")
    rng = random.Random(_SEED + 1)
    compared = 0
    async with Node.open(path) as node:
        newest: dict[str, str] = {}
        for c in range(sizes.callers):
            row = raw.execute(
                "SELECT id FROM episodes WHERE vault = ? AND caller = ? "
                "ORDER BY ts DESC, ord DESC LIMIT 1",
                (VAULT, caller_name(c)),
            ).fetchone()
            newest[caller_name(c)] = row[0]
        callers: dict[str, Any] = {}
        for name, token in meta["tokens"].items():
            callers[name] = await node.authenticate(token)
        for label, k in zip(labels(sizes), (sizes.k_long, sizes.k_short), strict=True):
            progress(f"episodes: {label}")
            order = list(newest)
            rng.shuffle(order)
            n = sizes.warmup + sizes.walks
            starts = [order[i % len(order)] for i in range(n)]
            seconds: list[float] = []
            baseline: list[float] = []
            spent = 0.0
            for i, name in enumerate(starts):
                start, caller = newest[name], callers[name]
                took = [0.0, 0.0]
                for side in (0, 1) if i % 2 == 0 else (1, 0):
                    t0 = time.perf_counter()
                    if side == 0:
                        answer = await node.work_episode_chain(caller, id=start, k=k)
                    else:
                        found = hop_by_hop(raw, start, k, name, int(time.time() * 1000))
                    took[side] = time.perf_counter() - t0
                _compare(answer, found, start, k)
                compared += 1
                if i >= sizes.warmup:
                    seconds.append(took[0])
                    baseline.append(took[1])
                    spent += sum(took)
                    if spent > sizes.budget_s and len(seconds) >= sizes.min_walks:
                        progress(f"episodes: {label}: stopping after {len(seconds)} walks")
                        break
            note = (
                f"{k} episodes a walk, more behind; p95 {quantile(seconds, 0.95) * 1000:.3f} ms, "
                f"hop-by-hop p95 {quantile(baseline, 0.95) * 1000:.3f} ms; starts: the newest "
                f"episode of {min(len(seconds), len(order))} callers"
            )
            result.latencies.append(Latency(label, tuple(seconds), tuple(baseline), note=note))
    raw.close()
    return compared


def _compare(
    answer: dict[str, Any], found: tuple[list[Any], bool] | None, start: str, k: int
) -> None:
    """memlane's chain must be the hop-by-hop chain: the same ids in the same order, both cut
    short at ``k`` with more behind."""
    if found is None or not answer["available"]:
        raise RuntimeError(f"the walk from {start} found nothing: {answer} / {found}")
    ids = [e["id"] for e in answer["chain"]]
    raw_ids = [row[_ID] for row in found[0]]
    if ids != raw_ids or answer["truncated"] != found[1]:
        raise RuntimeError(
            f"the chains from {start} differ: memlane {len(ids)} episodes (truncated "
            f"{answer['truncated']}), hop by hop {len(raw_ids)} (truncated {found[1]})"
        )
    if len(ids) != k or not found[1]:
        raise RuntimeError(f"the walk from {start} has {len(ids)} passing hops, not {k}+")


def _warm(path: Path) -> float:
    """Read the store's files once, so both sides read from the OS page cache; the seconds."""
    t0 = time.perf_counter()
    for f in sorted(path.glob(f"{DB_FILE}*")):
        with open(f, "rb") as src:
            while src.read(1 << 24):
                pass
    return time.perf_counter() - t0


def run(*, quick: bool, workdir: Path) -> Result:
    """Build (or reuse) the cached store, then time the walks; ``quick`` is a smoke run."""
    del workdir  # the store is cached outside the run's temporary directory
    sizes = QUICK if quick else FULL
    path, meta, built = build(sizes)
    smoke = SMOKE if quick else ""
    result = Result(
        f"episodes — {sizes.episodes:,} episodes of {sizes.callers:,} callers, Python "
        f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} "
        f"CPUs{smoke}",
        bounds=list(bounds(sizes)),
    )
    warm_s = _warm(path)
    compared = asyncio.run(_measure(path, meta, sizes, result))
    how, where = cached_at(path, built)
    kinds = meta["kinds"]
    result.notes += [
        f"store {how} ({where}, {meta['db_mib']:,.0f} MiB): {kinds.get('episode.record', 0):,} "
        f"records, {kinds.get('episode.amend', 0):,} amendments, "
        f"{kinds.get('episode.forget', 0):,} forgets from {meta['writers']} writers, received "
        f"in batches of {sizes.batch:,} in {meta['build_s']:,.0f} s (node.receive "
        f"{meta['receive_s']:,.0f} s, {meta['entries'] / meta['receive_s']:,.0f} entries/s; "
        f"generating and sealing took {meta['seal_s']:,.0f} s in a second process, meanwhile; "
        f"the builder's peak RSS "
        f"{meta['build_rss_mib']:,.0f} MiB)",
        f"checked: memlane's chain equals the hop-by-hop chain (ids, order, cut short at k) "
        f"on all {compared:,} walks",
        "memlane: Node.work_episode_chain(caller, id=..., k=...) for the episode's owner "
        "(read:workspace, response_format detailed); raw: stdlib sqlite3, read-only, one "
        "SELECT by (vault, id) per hop, the pass checks in Python",
        f"ms = milliseconds per walk; ratio = median / raw median; memlane and raw alternate "
        f"walk by walk on the same start after a warm-up; the store's files were read once "
        f"before ({warm_s:.1f} s), so both read from the OS page cache",
    ]
    return result
