"""The timeline benchmark (docs/benchmarks.md): e_timeline's reading actions on a large store.

A store of 1,000,000 SRs (``--quick``: 20,000) is built once through memlane's real receive
path and cached under ``.bench-cache/`` in the repository (``MEMLANE_BENCH_CACHE`` moves it),
keyed by a version string that changes with the schema, so a schema change rebuilds it.  Then
each query runs through ``Node.e_timeline`` for a reader (``read:workspace`` on "team", not an
admin), beside the raw SQLite query on the same file (stdlib ``sqlite3``, read-only, without
authority filtering), alternating the two run by run so a change in the machine's load falls
on both.  Nothing here asserts on speed; the targets are printed, not enforced.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import itertools
import os
import platform
import random
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.identity import DB_FILE
from node.node import Node
from node.schema import MIGRATIONS, SCHEMA_VERSION
from node.store.reader import READ_CACHE
from protocol.clock import Hlc
from protocol.kinds import encode_payload
from protocol.signing import SigningKey, seal
from protocol.timefmt import format_instant, parse_instant
from tests.bench.common import (
    SMOKE,
    Bound,
    Latency,
    Result,
    cached,
    cached_at,
    peak_rss_mib,
    progress,
    receive_batch,
)

__all__ = ["BOUNDS", "FULL", "QUERIES", "QUICK", "Sizes", "build", "run"]

# Query labels, in print order; the smoke test checks that each one is printed.
LIST = "list newest 50"
WINDOW = "window, one day"
FIND_COMMON = "find, common term"
FIND_RARE = "find, rare term"
INTERSECT = "intersect two tags"
TRAVERSE = "traverse"
QUERIES = (LIST, WINDOW, FIND_COMMON, FIND_RARE, INTERSECT, TRAVERSE)

# The targets: list and window ≤ 1 ms median and ≤ 10× raw; find ≤ 2.5× raw;
# intersect and traverse ≤ 5 ms.
BOUNDS = (
    Bound(LIST, "median", 1.0),
    Bound(LIST, "ratio", 10.0),
    Bound(WINDOW, "median", 1.0),
    Bound(WINDOW, "ratio", 10.0),
    Bound(FIND_COMMON, "ratio", 2.5),
    Bound(FIND_RARE, "ratio", 2.5),
    Bound(INTERSECT, "median", 5.0),
    Bound(TRAVERSE, "median", 5.0),
)

# Bump when what the builder writes changes (the schema's own changes are in the key already).
BUILD_VERSION = "timeline-store-2"


@dataclass(frozen=True, slots=True)
class Sizes:
    srs: int = 1_000_000
    batch: int = 2_000  # entries per node.receive
    runs: int = 30  # timed runs of each query (after the warm-up)
    warmup: int = 3
    budget_s: float = 90.0  # a query stops early (at ≥ min_runs) once it has taken this long
    min_runs: int = 7
    name: str = "timeline-1m"


FULL = Sizes()
QUICK = Sizes(
    srs=20_000, batch=2_000, runs=5, warmup=1, budget_s=5.0, min_runs=3, name="timeline-20k"
)

WORKSPACE = "team"
READER = "user07"  # the reading caller: read:workspace, not admin
VOCABULARY = 5_000
TAG_SET = 200
OWNERS = 50
WRITERS = 4
PRIVATE_SHARE = 0.05
LINK_SHARE = 0.15
DAY_MS = 86_400_000
START_MS = parse_instant("2023-06-01T00:00:00Z").ms  # ingest and content times: two years
SPAN_MS = 730 * DAY_MS  # ... ending 2025-05-31, in the past
_SEED = 20_240_601
_KIND = "sr.put"


def cache_key(sizes: Sizes) -> str:
    """The version of the cached store: the builder's, the schema's, and the size."""
    schema = hashlib.sha256("".join(MIGRATIONS).encode()).hexdigest()[:16]
    return f"{BUILD_VERSION}/schema-{SCHEMA_VERSION}-{schema}/srs-{sizes.srs}/batch-{sizes.batch}"


# -- the corpus ----------------------------------------------------------------------------


def _words(rng: random.Random, count: int, *, closed: bool) -> list[str]:
    """``count`` distinct pronounceable words: open syllables (consonant-vowel) for the
    vocabulary, a closing consonant for tags, so no tag is a vocabulary word."""
    consonants, vowels = "bcdfghjklmnprstvz", "aeiou"
    syllables = [c + v for c in consonants for v in vowels]
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 3)))
        if closed:
            word += rng.choice("nrstx")
        if word not in seen:
            seen.add(word)
            out.append(word)
    return out


def _zipf(n: int, s: float = 1.0) -> list[float]:
    """Cumulative Zipf weights for ranks 1..n."""
    return list(itertools.accumulate(1.0 / r**s for r in range(1, n + 1)))


@dataclass(frozen=True, slots=True)
class Corpus:
    """The deterministic content of the store: SR ``i`` is a function of ``i`` and a seeded
    generator walked in order."""

    n: int
    vocab: list[str]
    tags: list[str]
    owners: list[str]

    @classmethod
    def make(cls, n: int) -> Corpus:
        rng = random.Random(_SEED)
        return cls(
            n,
            _words(rng, VOCABULARY, closed=False),
            _words(rng, TAG_SET, closed=True),
            [f"user{i:02d}" for i in range(OWNERS)],
        )

    def wall(self, i: int) -> int:
        """SR ``i``'s ingest time (its entry's clock): spread evenly, non-decreasing."""
        step = SPAN_MS // self.n
        return START_MS + i * SPAN_MS // self.n + (i * 7_919) % max(step, 1)

    def sr_id(self, i: int) -> str:
        value = self.wall(i) << 80 | 0x7 << 76 | 0b10 << 62 | i
        h = f"{value:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    @property
    def anchor(self) -> int:
        """The SR traverse starts from: it links to three earlier SRs and a dozen later ones
        link to it."""
        return self.n // 2

    def _incoming_step(self) -> int:
        return max(self.n // 25, 1)

    def payloads(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(wall, sr.put payload) of every SR, in order."""
        rng = random.Random(_SEED + 1)
        words, cum_words = self.vocab, _zipf(len(self.vocab))
        tags, cum_tags = self.tags, _zipf(len(self.tags))
        anchor, step = self.anchor, self._incoming_step()
        for i in range(self.n):
            wall = self.wall(i)
            drawn = rng.choices(words, cum_weights=cum_words, k=rng.randint(3, 8) + 30)
            cut = rng.randint(5, 30)
            title_n = len(drawn) - 30
            payload: dict[str, Any] = {
                "sr_id": self.sr_id(i),
                "workspace": WORKSPACE,
                "principal": self.owners[rng.randrange(len(self.owners))],
                "create": True,
                "title": " ".join(drawn[:title_n]),
                "text": " ".join(drawn[title_n : title_n + cut]),
                "tags": list(
                    dict.fromkeys(rng.choices(tags, cum_weights=cum_tags, k=rng.randint(1, 4)))
                ),
                "content_time": max(0, wall - rng.randrange(30 * DAY_MS)),
            }
            links: list[int] = []
            if i and rng.random() < LINK_SHARE:
                links = [rng.randrange(i) for _ in range(rng.randint(1, 3))]
            if i == anchor:
                links = [i - 1, i - 7, i - 100]
            elif i > anchor and (i - anchor) % step == 0:
                links.append(anchor)
            if links:
                payload["links"] = list(dict.fromkeys(self.sr_id(j) for j in links if j >= 0))
            if rng.random() < PRIVATE_SHARE:
                payload["visibility"] = "private"
            yield wall, payload


# -- building the store --------------------------------------------------------------------


def _writer_key(w: int) -> SigningKey:
    return SigningKey(bytes([0x40 + w]) * 32)


async def _build(path: Path, sizes: Sizes) -> dict[str, Any]:
    """Initialise a node at ``path`` and receive every SR of the corpus, sealed by
    ``WRITERS`` foreign writers for the node's mesh, ``sizes.batch`` at a time."""
    info = await Node.init(path)
    corpus = Corpus.make(sizes.srs)
    keys = [_writer_key(w) for w in range(WRITERS)]
    epochs = [bytes([w + 1]) * 8 for w in range(WRITERS)]
    seqs: list[int] = [0] * WRITERS
    prevs: list[bytes | None] = [None] * WRITERS
    word_df: dict[str, int] = {}
    tag_df: dict[str, int] = {}
    pair_df: dict[tuple[str, str], int] = {}
    seal_s = receive_s = 0.0
    stored = 0
    async with Node.open(path) as node:
        for key in keys:  # the writers are members of the mesh
            await node.membership.admit_member(key.public)
        issued = await node.create_token(READER, WORKSPACE, ("read:workspace",))
        batch: list[tuple[bytes, bytes | None]] = []
        started = time.perf_counter()
        payloads = corpus.payloads()
        for i, (wall, payload) in enumerate(payloads):
            seen = set(payload["title"].split()) | set(payload["text"].split())
            for word in seen:
                word_df[word] = word_df.get(word, 0) + 1
            for tag in payload["tags"]:
                tag_df[tag] = tag_df.get(tag, 0) + 1
            for pair in itertools.combinations(sorted(payload["tags"]), 2):
                pair_df[pair] = pair_df.get(pair, 0) + 1
            t0 = time.perf_counter()
            w = i % WRITERS
            seqs[w] += 1
            data = encode_payload(_KIND, payload)
            entry = seal(
                keys[w],
                mesh=info.mesh,
                epoch=epochs[w],
                seq=seqs[w],
                prev=prevs[w],
                hlc=Hlc(wall, 0),
                kind=_KIND,
                payload=data,
            )
            prevs[w] = entry.id
            batch.append((entry.raw, entry.payload))
            seal_s += time.perf_counter() - t0
            if len(batch) == sizes.batch or i == corpus.n - 1:
                receive_s += await receive_batch(node, batch)
                stored += len(batch)
                batch = []
                if stored % 100_000 == 0 or stored == corpus.n:
                    took = time.perf_counter() - started
                    progress(
                        f"timeline: built {stored:,} of {corpus.n:,} SRs in {took:,.0f} s "
                        f"(sealing {seal_s:,.0f} s, receiving {receive_s:,.0f} s)"
                    )
        total = time.perf_counter() - started
        token = issued.token
    return {
        "key": cache_key(sizes),
        "srs": corpus.n,
        "token": token,
        "build_s": total,
        "seal_s": seal_s,
        "receive_s": receive_s,
        "build_rss_mib": peak_rss_mib(),
        "word_df": word_df,
        "tag_df": tag_df,
        "pair_df": {" ".join(k): v for k, v in pair_df.items()},
    }


def _build_in_child(directory: str, sizes: Sizes) -> dict[str, Any]:
    return asyncio.run(_build(Path(directory) / "node", sizes))


def build(sizes: Sizes) -> tuple[Path, dict[str, Any], bool]:
    """The cached store for ``sizes``: its node directory, its metadata, whether it was
    built now."""
    root, meta, built = cached(
        sizes.name, cache_key(sizes), f"store of {sizes.srs:,} SRs", _build_in_child, sizes
    )
    return root / "node", meta, built


# -- the queries -----------------------------------------------------------------------------

_RAW_LIST = (
    "SELECT shown FROM srs WHERE workspace = ? AND live = 1 "
    "ORDER BY ingest_time DESC, sr_id DESC LIMIT 50"
)
_RAW_WINDOW = (
    "SELECT shown FROM srs WHERE workspace = ? AND live = 1 "
    "AND ingest_time >= ? AND ingest_time < ? ORDER BY ingest_time DESC, sr_id DESC LIMIT 50"
)
_RAW_FIND = (
    "SELECT rowid, bm25(sr_fts) FROM sr_fts WHERE sr_fts MATCH ? ORDER BY bm25(sr_fts) LIMIT 50"
)
_RAW_INTERSECT = (
    "SELECT shown FROM srs WHERE workspace = ? AND live = 1 "
    "AND EXISTS (SELECT 1 FROM sr_tags t WHERE t.tag = ? AND t.sr_id = srs.sr_id) "
    "AND EXISTS (SELECT 1 FROM sr_tags t WHERE t.tag = ? AND t.sr_id = srs.sr_id) "
    "ORDER BY ingest_time DESC, sr_id DESC LIMIT 50"
)
_RAW_TRAVERSE = (
    "SELECT shown FROM srs WHERE sr_id IN "
    "(SELECT dst FROM sr_links WHERE src = ? UNION SELECT src FROM sr_links WHERE dst = ?) "
    "ORDER BY ingest_time DESC, sr_id DESC LIMIT 50"
)


@dataclass(frozen=True, slots=True)
class Query:
    label: str
    args: dict[str, Any]
    raw_sql: str
    raw_args: tuple[Any, ...]
    note: str


def _queries(corpus: Corpus, meta: dict[str, Any]) -> list[Query]:
    n = corpus.n
    word_df: dict[str, int] = meta["word_df"]
    tag_df: dict[str, int] = meta["tag_df"]
    by_df = sorted(word_df, key=lambda w: (word_df[w], w))
    common = min(by_df, key=lambda w: (abs(word_df[w] - n // 10), w))  # in ~10 % of SRs
    rare = by_df[0]  # the least frequent word of the vocabulary
    top_tags = sorted(tag_df, key=lambda t: (-tag_df[t], t))[:2]
    both = meta["pair_df"].get(" ".join(sorted(top_tags)), 0)
    day = START_MS + SPAN_MS // 2 // DAY_MS * DAY_MS
    in_day = _count_between(corpus, day, day + DAY_MS)
    anchor = corpus.sr_id(corpus.anchor)

    def share(k: int) -> str:
        return f"{k:,} SRs ({100 * k / n:.2g} %)"

    return [
        Query(LIST, {"action": "list", "page_size": 50}, _RAW_LIST, (WORKSPACE,), ""),
        Query(
            WINDOW,
            {
                "action": "list",
                "page_size": 50,
                "start_date": format_instant(day),
                "end_date": format_instant(day + DAY_MS),
            },
            _RAW_WINDOW,
            (WORKSPACE, day, day + DAY_MS),
            f"{share(in_day)} in the day",
        ),
        Query(
            FIND_COMMON,
            {"action": "find", "query": common, "shed_idf_noise": False, "page_size": 50},
            _RAW_FIND,
            (f'"{common}"',),
            f"{common!r} in {share(word_df[common])}",
        ),
        Query(
            FIND_RARE,
            {"action": "find", "query": rare, "shed_idf_noise": False, "page_size": 50},
            _RAW_FIND,
            (f'"{rare}"',),
            f"{rare!r} in {share(word_df[rare])}",
        ),
        Query(
            INTERSECT,
            {"action": "intersect", "match": top_tags, "shed_idf_noise": False, "page_size": 50},
            _RAW_INTERSECT,
            (WORKSPACE, *top_tags),
            f"{top_tags[0]!r} in {share(tag_df[top_tags[0]])}, {top_tags[1]!r} in "
            f"{share(tag_df[top_tags[1]])}, both {share(both)}",
        ),
        Query(
            TRAVERSE,
            {"action": "traverse", "sr_id": anchor, "page_size": 50},
            _RAW_TRAVERSE,
            (anchor, anchor),
            "",
        ),
    ]


def _count_between(corpus: Corpus, lo: int, hi: int) -> int:
    walls = _Walls(corpus)
    return bisect.bisect_left(walls, hi) - bisect.bisect_left(walls, lo)


class _Walls(Sequence[int]):
    """The (sorted) ingest times of the corpus, as a sequence for ``bisect``."""

    def __init__(self, corpus: Corpus) -> None:
        self._corpus = corpus

    def __len__(self) -> int:
        return self._corpus.n

    def __getitem__(self, i: Any) -> Any:
        return self._corpus.wall(i)


async def _timed(
    label: str,
    memlane: Callable[[], Awaitable[int]],
    raw: Callable[[], int],
    sizes: Sizes,
) -> tuple[list[float], list[float], int, int]:
    """Warm both up, then alternate them run by run; the seconds of each run, and how many
    results each gave."""
    got = raw_got = 0
    for _ in range(sizes.warmup):
        got, raw_got = await memlane(), raw()
    seconds: list[float] = []
    baseline: list[float] = []
    spent = 0.0
    for i in range(sizes.runs):
        for side in (0, 1) if i % 2 == 0 else (1, 0):
            t0 = time.perf_counter()
            if side == 0:
                got = await memlane()
            else:
                raw_got = raw()
            took = time.perf_counter() - t0
            (seconds if side == 0 else baseline).append(took)
            spent += took
        if spent > sizes.budget_s and i + 1 >= sizes.min_runs:
            progress(f"timeline: {label}: stopping after {i + 1} runs ({spent:.0f} s)")
            break
    return seconds, baseline, got, raw_got


async def _measure(path: Path, meta: dict[str, Any], sizes: Sizes, result: Result) -> None:
    corpus = Corpus.make(sizes.srs)
    raw = sqlite3.connect(f"file:{path / DB_FILE}?mode=ro", uri=True)
    raw.execute(READ_CACHE)  # the node's reader's page cache: like for like
    async with Node.open(path) as node:
        caller = await node.authenticate(meta["token"])
        assert caller.has("read:workspace")
        assert not caller.is_admin
        for q in _queries(corpus, meta):
            progress(f"timeline: {q.label}")

            async def memlane(args: dict[str, Any] = q.args) -> int:
                answer = await node.e_timeline(caller, **args)
                return len(answer["results"])

            def baseline(sql: str = q.raw_sql, args: tuple[Any, ...] = q.raw_args) -> int:
                return len(raw.execute(sql, args).fetchall())

            seconds, base, got, raw_got = await _timed(q.label, memlane, baseline, sizes)
            note = f"{got} results (raw {raw_got})" + (f"; {q.note}" if q.note else "")
            result.latencies.append(Latency(q.label, tuple(seconds), tuple(base), note=note))
    raw.close()


def run(*, quick: bool, workdir: Path) -> Result:
    """Build (or reuse) the cached store, then time every query; ``quick`` is a smoke run."""
    del workdir  # the store is cached outside the run's temporary directory
    sizes = QUICK if quick else FULL
    path, meta, built = build(sizes)
    smoke = SMOKE if quick else ""
    result = Result(
        f"timeline — {sizes.srs:,} SRs, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs{smoke}",
        bounds=list(BOUNDS),
    )
    asyncio.run(_measure(path, meta, sizes, result))
    how, where = cached_at(path, built)
    result.notes += [
        f"store {how} ({where}): {meta['srs']:,} SRs received in batches of "
        f"{sizes.batch:,} in {meta['build_s']:,.0f} s (sealing {meta['seal_s']:,.0f} s, "
        f"node.receive {meta['receive_s']:,.0f} s, {meta['srs'] / meta['receive_s']:,.0f} "
        f"entries/s; the builder's peak RSS {meta['build_rss_mib']:,.0f} MiB)",
        f"reader: {READER}, read:workspace on {WORKSPACE!r} (not admin); raw: stdlib sqlite3, "
        "read-only, the node reader's page cache (16 MiB), no authority filter",
        "ms = milliseconds per query; ratio = median / raw median; memlane and raw alternate "
        "run by run after a warm-up",
    ]
    return result
