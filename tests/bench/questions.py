"""The questions benchmark (docs/benchmarks.md §questions): an agent's plain-language questions
asked of ``find`` on a large store, beside raw SQLite FTS5 and tantivy on the same texts.

The development split's turns, written as ``quality`` writes them (one SR a turn, its speaker
and words, conversational, its session's time as content time), are replicated to 100,000
and 1,000,000 SRs (``--quick``: 3,000): copy 0 of each conversation is the turns as they
are; copy k ≥ 1 renames its two speakers with two of 500 generated names (the prefix and
every whole-word mention) and moves its content times 30–1,500 days back, seeded.  The store
is built through the node's receive path (sealed by four foreign writers of its mesh, as
``timeline`` builds its store) and cached under ``.bench-cache/``, with a raw FTS5 table
(``porter unicode61``) and a tantivy index (``en_stem``) of the same texts beside it.

A seeded sample of 300 of the split's questions (categories 1–4: they name copy 0's
speakers) is asked three ways, alternating question by question (the order rotating):
``Node.e_timeline(caller, action="find", query=Q)`` with every default for a reader token
(``read:workspace``, not admin); FTS5 ``bm25()`` over the question's words OR-ed (stop words
left out, as ``quality``'s raw rows), top 20; tantivy over the same words, top 20.  Then the
same questions over MCP HTTP against the node served in-process (information), and, in a
child process of its own, memlane alone: its peak RSS.  Nothing here asserts on a figure.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import platform
import random
import re
import socket
import sqlite3
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from node.identity import DB_FILE
from node.node import Node
from node.schema import MIGRATIONS, SCHEMA_VERSION
from protocol.timefmt import parse_instant
from tests.bench import quality
from tests.bench.common import (
    SMOKE,
    Check,
    Report,
    Timed,
    Writers,
    cached,
    cached_at,
    in_child,
    peak_rss_mib,
    progress,
    receive_batch,
    table,
    verdict,
)

__all__ = ["ENGINES", "FULL", "QUICK", "Sizes", "build", "payload", "run"]

MEMLANE, FTS5, TANTIVY = "memlane find", "raw FTS5 bm25()", "tantivy"
ENGINES = (MEMLANE, FTS5, TANTIVY)
HTTP = "memlane find over MCP HTTP"
TOP = 20  # the peers' depth: find's default page size
# The targets, at TARGET_SRS: memlane's median and p99 each ≤ 10 × tantivy's, its median
# ≤ 0.1 × raw FTS5's, and memlane alone within 600 MiB.
TARGET_SRS = 1_000_000
VERSUS_TANTIVY = 10.0
VERSUS_FTS5 = 0.1
RSS_MIB = 600.0
BUILD_VERSION = "questions-store-1"  # bump when what the builder writes changes

WORKSPACE = "team"
READER = "reader"
WRITERS = 4
NAMES = 500
SHIFT_DAYS = (30, 1_500)
DAY_MS = 86_400_000
START_MS = parse_instant("2024-01-01T00:00:00Z").ms  # ingest times: two years from here
SPAN_MS = 730 * DAY_MS
_SEED = 20_261_205


@dataclass(frozen=True, slots=True)
class Sizes:
    srs: int
    name: str
    questions: int = 300
    warmup: int = 20  # questions asked of each engine, untimed, first
    batch: int = 2_000  # entries per node.receive while building


FULL = (Sizes(100_000, "questions-100k"), Sizes(1_000_000, "questions-1m"))
QUICK = (Sizes(3_000, "questions-3k", questions=30, warmup=3),)


def cache_key(sizes: Sizes) -> str:
    schema = hashlib.sha256("".join(MIGRATIONS).encode()).hexdigest()[:16]
    return f"{BUILD_VERSION}/schema-{SCHEMA_VERSION}-{schema}/srs-{sizes.srs}"


# -- the corpus ----------------------------------------------------------------------------


def _names(rng: random.Random) -> list[str]:
    """``NAMES`` distinct pronounceable capitalised names."""
    consonants, vowels = "bcdfghjklmnprstvz", "aeiou"
    out: dict[str, None] = {}
    while len(out) < NAMES:
        syllables = rng.randint(2, 3)
        name = "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables))
        out[name.capitalize()] = None
    return list(out)


def _speakers(conv: quality.Conversation) -> list[str]:
    """The conversation's speakers, as its turns' texts begin ("Caroline: …")."""
    return list(dict.fromkeys(t.text.partition(": ")[0] for t in conv.turns))


@dataclass(frozen=True, slots=True)
class Written:
    text: str
    content_ms: int | None


def texts(conversations: Sequence[quality.Conversation], n: int) -> Iterator[Written]:
    """The ``n`` SRs' texts and content times, in order: copies of the conversations in
    turn, copy 0 of each first."""
    rng = random.Random(_SEED)
    names = _names(rng)
    speakers = [_speakers(c) for c in conversations]
    made = 0
    for copy in range(n):
        conv = conversations[copy % len(conversations)]
        k = copy // len(conversations)
        renamed = _renaming(speakers[copy % len(conversations)], rng.sample(names, 2))
        shift = rng.randint(*SHIFT_DAYS) * DAY_MS if k else 0
        for turn in conv.turns:
            text = renamed(turn.text) if k else turn.text
            when = None if turn.content_time is None else parse_instant(turn.content_time).ms
            yield Written(text, None if when is None else when - shift)
            made += 1
            if made == n:
                return


def _renaming(speakers: Sequence[str], names: Sequence[str]) -> Callable[[str], str]:
    """A text with each speaker's every whole-word mention renamed."""
    mapping = dict(zip(speakers, names, strict=False))  # (a monologue has one speaker)
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, mapping)) + r")\b")
    return lambda text: pattern.sub(lambda m: mapping[m[0]], text)


def _sr_id(wall: int, i: int) -> str:
    value = wall << 80 | 0x7 << 76 | 0b10 << 62 | i
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# -- building the store and the peers' indexes ------------------------------------------------


def payload(sr_id: str, i: int, sr: Written) -> dict[str, Any]:
    """The ``sr.put`` of turn ``sr`` as the ``i``-th SR of the corpus (seven principals)."""
    out: dict[str, Any] = {
        "sr_id": sr_id,
        "workspace": WORKSPACE,
        "principal": f"agent{i % 7}",
        "create": True,
        "text": sr.text,
        "conversational": True,
    }
    if sr.content_ms is not None:
        out["content_time"] = max(0, sr.content_ms)
    return out


async def _build_node(path: Path, sizes: Sizes, written: Sequence[Written]) -> dict[str, Any]:
    info = await Node.init(path)
    writers = Writers(info.mesh, WRITERS, 0x60)
    receive_s = 0.0
    started = time.perf_counter()
    async with Node.open(path) as node:
        for key in writers.keys:
            await node.membership.admit_member(key.public)
        issued = await node.create_token(READER, WORKSPACE, ("read:workspace",))
        batch: list[tuple[bytes, bytes | None]] = []
        for i, sr in enumerate(written):
            wall = START_MS + i * SPAN_MS // len(written)
            batch.append(writers.sealed(i, wall, payload(_sr_id(wall, i), i, sr)))
            if len(batch) == sizes.batch or i == len(written) - 1:
                receive_s += await receive_batch(node, batch)
                batch = []
                if (i + 1) % 100_000 == 0:
                    progress(f"{sizes.name}: received {i + 1:,} SRs")
    return {
        "token": issued.token,
        "srs": len(written),
        "build_s": time.perf_counter() - started,
        "receive_s": receive_s,
    }


def _build_fts5(path: Path, written: Sequence[Written]) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE VIRTUAL TABLE turns USING fts5 (text, tokenize='porter unicode61')")
    with db:
        db.executemany(
            "INSERT INTO turns (rowid, text) VALUES (?, ?)",
            ((i, sr.text) for i, sr in enumerate(written)),
        )
    db.close()


def _tantivy_schema() -> Any:
    import tantivy  # the bench extra; imported where used

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", stored=False, tokenizer_name="en_stem")
    builder.add_integer_field("n", stored=True, indexed=False)
    return builder.build()


def _build_tantivy(path: Path, written: Sequence[Written]) -> None:
    import tantivy

    path.mkdir()
    index = tantivy.Index(_tantivy_schema(), path=str(path))
    writer = index.writer(heap_size=200_000_000, num_threads=1)
    for i, sr in enumerate(written):
        writer.add_document(tantivy.Document(text=sr.text, n=i))
    writer.commit()
    writer.wait_merging_threads()


def _build(directory: str, sizes: Sizes, locomo: str) -> dict[str, Any]:
    root = Path(directory)
    written = list(texts(quality.load(Path(locomo)), sizes.srs))
    meta = asyncio.run(_build_node(root / "node", sizes, written))
    t0 = time.perf_counter()
    _build_fts5(root / "fts5.db", written)
    meta["fts5_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    _build_tantivy(root / "tantivy", written)
    meta["tantivy_s"] = time.perf_counter() - t0
    meta["build_rss_mib"] = peak_rss_mib()
    return meta


def build(sizes: Sizes, locomo: Path) -> tuple[Path, dict[str, Any], bool]:
    """The cached store of ``sizes``: its folder, its metadata, whether it was built now."""
    what = f"store of {sizes.srs:,} SRs with its FTS5 and tantivy twins"
    return cached(sizes.name, cache_key(sizes), what, _build, sizes, str(locomo))


# -- asking ------------------------------------------------------------------------------------


def sample(conversations: Sequence[quality.Conversation], n: int) -> list[str]:
    """A seeded sample of ``n`` of the split's questions (categories 1–4)."""
    every = [q.text for c in conversations for q in c.questions]
    return random.Random(_SEED).sample(every, min(n, len(every)))


def _words(question: str) -> list[str]:
    """The question's words as the raw rows take them: lower case, stop words left out."""
    found = quality.raw_query(question)
    return [w.strip('"') for w in found.split(" OR ")] if found else []


Ask = Callable[[str], Awaitable[int]]


class _Peers:
    """The raw FTS5 table and the tantivy index, opened for reading."""

    def __init__(self, root: Path) -> None:
        import tantivy

        self.db = sqlite3.connect(f"file:{root / 'fts5.db'}?mode=ro", uri=True)
        self.index = tantivy.Index(_tantivy_schema(), path=str(root / "tantivy"))
        self.index.reload()
        self.searcher = self.index.searcher()

    async def fts5(self, question: str) -> int:
        match = quality.raw_query(question)
        if not match:
            return 0
        sql = f"SELECT rowid FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT {TOP}"
        return len(self.db.execute(sql, (match,)).fetchall())

    async def tantivy(self, question: str) -> int:
        words = _words(question)
        if not words:
            return 0
        query = self.index.parse_query(" OR ".join(words), ["text"])
        return len(self.searcher.search(query, TOP).hits)


async def _alternate(asks: dict[str, Ask], questions: Sequence[str], warmup: int) -> list[Timed]:
    """Each question asked of every engine in turn, the order rotating question by question,
    after ``warmup`` questions asked of each untimed."""
    for question in questions[:warmup]:
        for ask in asks.values():
            await ask(question)
    timed = {label: Timed(label) for label in asks}
    labels = list(asks)
    for i, question in enumerate(questions):
        for label in labels[i % len(labels) :] + labels[: i % len(labels)]:
            t0 = time.perf_counter()
            got = await asks[label](question)
            timed[label].seconds.append(time.perf_counter() - t0)
            timed[label].results += got
    return list(timed.values())


async def _side_by_side(
    root: Path, meta: dict[str, Any], questions: Sequence[str], warmup: int
) -> list[Timed]:
    peers = _Peers(root)
    async with Node.open(root / "node") as node:
        caller = await node.authenticate(meta["token"])
        assert caller.has("read:workspace")
        assert not caller.is_admin

        async def memlane(question: str) -> int:
            answer = await node.e_timeline(caller, action="find", query=question)
            return len(answer["results"])

        asks = {MEMLANE: memlane, FTS5: peers.fts5, TANTIVY: peers.tantivy}
        timed = await _alternate(asks, questions, warmup)
        http = await _over_http(node, meta["token"], questions, warmup)
    peers.db.close()
    return [*timed, http]


async def _over_http(node: Node, token: str, questions: Sequence[str], warmup: int) -> Timed:
    """The questions over MCP streamable HTTP, the SDK's client, the node served here."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from node.mcp.http import http_server

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    out = Timed(HTTP)
    async with http_server(node, listener) as endpoint:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(endpoint.url, http_client=http)) as client,
        ):
            for i, question in enumerate([*questions[:warmup], *questions]):
                t0 = time.perf_counter()
                await client.call_tool("e_timeline", {"action": "find", "query": question})
                if i >= warmup:
                    out.seconds.append(time.perf_counter() - t0)
    return out


def _alone(node_dir: str, token: str, questions: list[str]) -> dict[str, Any]:
    """In a child process: memlane alone asks the questions; its seconds and peak RSS."""

    async def ask() -> list[float]:
        async with Node.open(Path(node_dir)) as node:
            caller = await node.authenticate(token)
            seconds = []
            for question in questions:
                t0 = time.perf_counter()
                await node.e_timeline(caller, action="find", query=question)
                seconds.append(time.perf_counter() - t0)
            return seconds

    seconds = asyncio.run(ask())
    return {"seconds": seconds, "rss_mib": peak_rss_mib()}


# -- what the index costs ----------------------------------------------------------------------

INDEX_TABLES = ("sr_segments", "sr_postings", "sr_index_docs", "sr_terms", "sr_scopes", "sr_lanes")


def sizes_of(db_file: Path) -> dict[str, int]:
    """Bytes on disk (``dbstat``: pages, with their indexes) of the whole store, the text
    index, FTS5 (``sr_fts``'s tables) and the rest by table."""
    with sqlite3.connect(f"file:{db_file}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT coalesce(m.tbl_name, d.name), sum(d.pgsize) FROM dbstat d "
            "LEFT JOIN sqlite_master m ON m.name = d.name GROUP BY 1"
        ).fetchall()
    by_table = {str(name): int(size) for name, size in rows}
    return {
        "store": sum(by_table.values()),
        "text index": sum(by_table.get(t, 0) for t in INDEX_TABLES),
        "FTS5": sum(v for k, v in by_table.items() if k.startswith("sr_fts")),
    }


# -- the report --------------------------------------------------------------------------------


def _ms(value: float) -> str:
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def _section(sizes: Sizes, timed: Sequence[Timed], alone: dict[str, Any]) -> list[str]:
    rows = [
        [
            t.label,
            _ms(t.median_ms),
            _ms(t.quantile_ms(0.9)),
            _ms(t.quantile_ms(0.99)),
            str(len(t.seconds)),
            f"{t.results / len(t.seconds):.1f}" if t.label != HTTP else "",
        ]
        for t in timed
    ]
    head = ["", f"{sizes.srs:,} SRs, {len(timed[0].seconds)} questions"]
    header = ["engine", "median ms", "p90 ms", "p99 ms", "questions", "results/question"]
    alone_ms = _ms(statistics.median(alone["seconds"]) * 1000)
    said = f"memlane alone (its own process): median {alone_ms} ms, peak RSS "
    return [
        *head,
        *table(header, rows, right={1, 2, 3, 4, 5}),
        said + f"{alone['rss_mib']:,.0f} MiB",
    ]


def _checks(sizes: Sizes, timed: Sequence[Timed], alone: dict[str, Any]) -> list[Check]:
    by = {t.label: t for t in timed}
    m, f, t = by[MEMLANE], by[FTS5], by[TANTIVY]
    aimed = sizes.srs == TARGET_SRS

    def check(label: str, value: float, limit: float, unit: str = "×") -> Check:
        shown = f"{value:,.0f} MiB" if unit == "MiB" else f"{value:.2f}"
        target = f"≤ {limit:g} {unit}" if unit == "MiB" else f"≤ {limit:g}"
        return Check(
            f"{sizes.srs:,}: {label}", shown, target, verdict(value <= limit) if aimed else "(info)"
        )

    return [
        check("median / tantivy's", m.median_ms / t.median_ms, VERSUS_TANTIVY),
        check("p99 / tantivy's", m.quantile_ms(0.99) / t.quantile_ms(0.99), VERSUS_TANTIVY),
        check("median / FTS5's", m.median_ms / f.median_ms, VERSUS_FTS5),
        check("memlane alone, peak RSS", alone["rss_mib"], RSS_MIB, "MiB"),
    ]


def run(*, quick: bool, workdir: Path, locomo: Path | None = None) -> Report:
    """Build (or reuse) each size's store, then ask the questions; ``quick`` is a smoke run."""
    del workdir  # the stores are cached outside the run's temporary directory
    locomo = locomo or quality.default_locomo()
    conversations = quality.load(locomo)
    report = Report(
        f"questions — Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"tantivy {version('tantivy')}, {os.cpu_count()} CPUs{SMOKE if quick else ''}"
    )
    for sizes in QUICK if quick else FULL:
        questions = sample(conversations, sizes.questions)
        root, meta, built = build(sizes, locomo)
        progress(f"{sizes.name}: asking {len(questions)} questions three ways")
        timed = asyncio.run(_side_by_side(root, meta, questions, sizes.warmup))
        alone = in_child(_alone, str(root / "node"), meta["token"], questions)
        report.lines += _section(sizes, timed, alone)
        report.checks += _checks(sizes, timed, alone)
        cost = sizes_of(root / "node" / DB_FILE)
        report.lines.append(
            f"on disk: the store {cost['store'] / sizes.srs:,.0f} bytes per SR "
            f"({cost['store'] / 2**20:,.0f} MiB); the text index "
            f"{cost['text index'] / sizes.srs:,.0f} bytes per SR "
            f"({cost['text index'] / cost['store']:.1%} of the store); FTS5 "
            f"{cost['FTS5'] / sizes.srs:,.0f} bytes per SR"
        )
        how, where = cached_at(root, built)
        report.notes.append(
            f"{sizes.srs:,} SRs: store {how} ({where}): received in {meta['receive_s']:,.0f} s, "
            f"FTS5 twin {meta['fts5_s']:,.0f} s, tantivy twin {meta['tantivy_s']:,.0f} s"
        )
    report.notes += [
        f"the questions: a seeded sample of the split's categories 1–4 ({locomo}); find for "
        f"{READER!r}, read:workspace on {WORKSPACE!r} (not admin), every default",
        f"peers: FTS5 porter unicode61 and tantivy en_stem over the same texts, the question's "
        f"words OR-ed (stop words out), top {TOP}; alternating question by question",
        f"targets hold at {TARGET_SRS:,} SRs; other sizes print (info)",
    ]
    return report
