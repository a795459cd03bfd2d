"""The quality benchmark (docs/benchmarks.md): how much of a question's evidence
``e_timeline find`` puts before the one asking, on LoCoMo, beside raw SQLite FTS5 ``bm25()``.

Each conversation of the LoCoMo split (``--locomo DIR``; default ``$MEMLANE_LOCOMO``, else
``../shared/data/locomo-dev/`` beside the repository) goes into a fresh node, one SR per turn
written through ``Node.e_write`` (conversational, its session's time as content time); each of
its questions of categories 1–4 is asked with ``e_timeline(action="find", query=question)`` and
nothing else, as an agent new to the node would ask it.  The same turns, spelled the same way,
go into in-memory FTS5 tables (``unicode61`` and ``porter unicode61``) queried with the
question's words OR-ed, stop words left out — the protocol of the split's README, whose
reference figures these raw rows reproduce.  Figures are means over questions, by category.
Several node configurations can stand side by side (``CONFIGS``: a name and the text of its
``config.toml``); on one with an embedder every turn is embedded before the first question is
asked.  Nothing here asserts on a figure; the targets are printed, not enforced.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import platform
import re
import sqlite3
import statistics
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from node.access.callers import Caller
from node.config import CONFIG_FILE
from node.errors import NodeError
from node.node import Node
from tests.bench.common import SMOKE, Check, progress, table, tail, verdict

__all__ = [
    "CATEGORIES",
    "CONFIGS",
    "DEFAULT",
    "RAW",
    "STOP_WORDS",
    "Conversation",
    "Missing",
    "Question",
    "Report",
    "Turn",
    "default_locomo",
    "labels",
    "load",
    "ndcg",
    "raw_query",
    "run",
    "turn_text",
]

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# (name, config.toml): each a row of its own; the first is the default the others must beat.
# The default weight, 0.25, is the best of a sweep on this split (docs/benchmarks.md §quality),
# so its checks are not independent evidence for it; 0.5 weighs the legs alike.
CONFIGS: tuple[tuple[str, str], ...] = (
    ("memlane (default)", ""),
    ("memlane (wordllama)", '[search]\nembedder = "wordllama"\n'),
    ("memlane (wordllama, weight 0.5)", '[search]\nembedder = "wordllama"\nfusion_weight = 0.5\n'),
)
DEFAULT = CONFIGS[0][0]
RAW = (("raw FTS5 unicode61", "unicode61"), ("raw FTS5 porter", "porter unicode61"))
PORTER = RAW[1][0]
PAGE_METRICS = ("page-1 recall", "page-1 hit")
RANK_METRICS = ("R@10", "R@20", "H@10", "H@20", "nDCG@10")
TOLERANCE = 0.005  # the default's page-1 figures against raw porter's @20 ones
SLACK = 0.01  # how far below the default another configuration may fall in one category
DEPTH = 20  # the deepest cut measured (R@20): ranks 1..DEPTH are gathered from find's pages
MAX_PAGES = 5  # at most this many pages are asked for ranks 1..DEPTH (one when ranked)
QUICK_QUESTIONS = 30
EMBED_TIMEOUT = 900.0  # seconds a conversation's SRs may take to be embedded before its questions

# Common English stop words, left out of the raw query: the commonest function words, the
# forms of do, the question words and the personal pronouns.  With this list and the text of
# ``turn_text`` the raw rows come within 0.01 of the split README's reference figures; NLTK's
# 179 words score about 0.01 lower, no list at all 0.03–0.05 lower (docs/benchmarks.md).
STOP_WORDS = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "that",
        "the",
        "to",
        "was",
        "were",
        "will",
        "with",  # the commonest
        "did",
        "do",
        "does",
        "how",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "he",
        "her",
        "him",
        "his",
        "i",
        "me",
        "my",
        "our",
        "she",
        "their",
        "them",
        "they",
        "us",
        "we",
        "you",
        "your",
    )
)
_WORD = re.compile(r"[^\W_]+")  # a word as FTS5's unicode61 cuts it: letters and digits
_SESSION = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")  # "D:11:26" is D11:26 misspelled (one question)
_WHEN = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"


def default_locomo() -> Path:
    """``$MEMLANE_LOCOMO``, else ``shared/data/locomo-dev`` beside the repository."""
    env = os.environ.get("MEMLANE_LOCOMO")
    root = Path(__file__).resolve().parents[2]
    return Path(env) if env else root.parent / "shared/data/locomo-dev"


# -- the data ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    text: str  # as every retriever holds it (``turn_text``)
    content_time: str | None


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]  # dia_ids of turns of its conversation


@dataclass(frozen=True, slots=True)
class Conversation:
    name: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    dropped: tuple[str, ...] = ()  # evidence ids naming no turn


def turn_text(turn: dict[str, Any]) -> str:
    """A turn as one text: its speaker (the questions name people), its words, and what a
    shared photo shows — BLIP's caption and the search query that found the photo, which the
    README's reference figures count (without them the raw rows fall 0.02–0.04 short)."""
    text = f"{turn['speaker']}: {turn['text']}"
    shown = [x for x in (turn.get("blip_caption"), turn.get("query")) if x]
    return f"{text} [shared a photo: {'; '.join(shown)}]" if shown else text


def _sessions(body: dict[str, Any]) -> list[tuple[str | None, list[dict[str, Any]]]]:
    """(date_time, turns) of each session, in session order."""
    numbered = sorted(
        (int(m[1]), key) for key in body if (m := _SESSION.fullmatch(key)) and body[key]
    )
    return [(body.get(f"{key}_date_time"), body[key]) for _, key in numbered]


def _instants(when: str | None, n: int) -> list[str | None]:
    """The session's start, then one second on per turn, in order (UTC: the data has no
    zone)."""
    try:
        start = datetime.strptime(when or "", _WHEN).replace(tzinfo=UTC)
    except ValueError:
        return [None] * n
    return [(start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(n)]


def _evidence(items: Iterable[str], known: set[str]) -> tuple[frozenset[str], list[str]]:
    """A question's evidence as dia_ids of its turns ("D8:6; D9:17" is two), and the ids
    naming no turn."""
    found = [m for item in items for m in re.split(r"[;,\s]+", item) if m]
    ids = [f"D{m[1]}:{m[2]}" if (m := _DIA_ID.fullmatch(x)) else x for x in found]
    return frozenset(i for i in ids if i in known), [i for i in ids if i not in known]


def _conversation(path: Path) -> Conversation:
    raw = json.loads(path.read_text())
    body = raw.get("conversation", raw)  # locomo10.json nests it; the per-file split does not
    turns = [
        Turn(t["dia_id"], turn_text(t), when)
        for date_time, items in _sessions(body)
        for t, when in zip(items, _instants(date_time, len(items)), strict=True)
    ]
    known = {t.dia_id for t in turns}
    questions, dropped = [], []
    for qa in raw["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        evidence, unknown = _evidence(qa.get("evidence", []), known)
        dropped += unknown
        if evidence:  # nothing to find: no figure means anything
            questions.append(Question(qa["question"], qa["category"], evidence))
    return Conversation(path.stem, tuple(turns), tuple(questions), tuple(dropped))


def load(directory: Path) -> list[Conversation]:
    """Every conversation file (``*.json``) of ``directory``, by name."""
    return [_conversation(p) for p in sorted(directory.glob("*.json"))]


# -- the figures -------------------------------------------------------------------------------


def ndcg(evidence: frozenset[str], ranked: Sequence[str], k: int = 10) -> float:
    """Binary gains, log2 discount; the ideal ranks min(|evidence|, k) relevant first."""
    gain = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in evidence)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(evidence), k)))
    return gain / ideal


def _figures(
    evidence: frozenset[str], ranked: Sequence[str], page: Sequence[str] | None
) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in (10, 20):
        found = len(evidence & set(ranked[:k]))
        out[f"R@{k}"], out[f"H@{k}"] = found / len(evidence), float(found > 0)
    out["nDCG@10"] = ndcg(evidence, ranked)
    if page is not None:
        found = len(evidence & set(page))
        out["page-1 recall"], out["page-1 hit"] = found / len(evidence), float(found > 0)
    return out


@dataclass(slots=True)
class Retrieved:
    """One retriever's figures for each question, by category."""

    label: str
    asked: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    note: str = ""

    def mean(self, metric: str, category: int | None = None) -> float:
        values = [f[metric] for c, f in self.asked if category in (None, c)]
        return statistics.fmean(values) if values else math.nan

    def metrics(self) -> tuple[str, ...]:
        """The figures it has: none when it was not available; page-1 ones for memlane."""
        if not self.asked:
            return ()
        return (PAGE_METRICS if PAGE_METRICS[0] in self.asked[0][1] else ()) + RANK_METRICS


# -- raw FTS5 ----------------------------------------------------------------------------------


def raw_query(question: str) -> str:
    """The question's words, lower case, stop words left out, each quoted (no word is read
    as FTS5 syntax), OR-ed; empty when nothing is left."""
    words = dict.fromkeys(w for w in _WORD.findall(question.lower()) if w not in STOP_WORDS)
    return " OR ".join(f'"{w}"' for w in words)


def _raw(label: str, tokenizer: str, conversations: Sequence[Conversation]) -> Retrieved:
    out = Retrieved(label)
    db = sqlite3.connect(":memory:")
    try:
        for n, conv in enumerate(conversations):
            db.execute(f"CREATE VIRTUAL TABLE turns{n} USING fts5 (text, tokenize='{tokenizer}')")
            db.executemany(
                f"INSERT INTO turns{n} (rowid, text) VALUES (?, ?)",
                [(i, t.text) for i, t in enumerate(conv.turns)],
            )
            for q in conv.questions:
                match = raw_query(q.text)
                rows = db.execute(
                    f"SELECT rowid FROM turns{n} WHERE turns{n} MATCH ? "
                    f"ORDER BY bm25(turns{n}) LIMIT {DEPTH}",
                    (match,),
                )
                ranked = [conv.turns[i].dia_id for (i,) in rows] if match else []
                out.asked.append((q.category, _figures(q.evidence, ranked, None)))
    finally:
        db.close()
    return out


# -- memlane -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Seen:
    """What a configuration's answers looked like, beyond the figures."""

    written: int = 0
    write_s: float = 0.0
    find_s: list[float] = field(default_factory=list)
    pages: int = 0
    unranked: int = 0  # answers whose results carried no rank
    empty: list[str] = field(default_factory=list)  # questions answered with nothing
    shed: Counter[str] = field(default_factory=Counter)  # term → questions it was shed from
    shed_questions: int = 0
    model: str = ""  # the embedder's model, where the configuration names one
    embed_s: float = 0.0  # waiting for every SR to be embedded, before the questions
    semantic: int = 0  # answers that said semantic_used / semantic_pending
    unused: int = 0  # ... of which semantic_used was false
    pending: int = 0  # ... and semantic_pending above 0


async def _write(node: Node, caller: Caller, conv: Conversation, seen: Seen) -> dict[str, str]:
    """One SR per turn, in order; sr_id → dia_id."""
    sr_ids = {}
    t0 = time.perf_counter()
    for turn in conv.turns:
        written = await node.e_write(
            caller, text=turn.text, conversational=True, content_time=turn.content_time
        )
        sr_ids[written["sr_id"]] = turn.dia_id
    seen.write_s += time.perf_counter() - t0
    seen.written += len(conv.turns)
    return sr_ids


def _by_rank(results: list[dict[str, Any]]) -> dict[int, str] | None:
    ranks = [r.get("rank") for r in results]
    if not all(isinstance(r, int) for r in ranks):
        return None
    return {int(r["rank"]): r["sr_id"] for r in results}


async def _ask(
    node: Node, caller: Caller, question: str, seen: Seen
) -> tuple[list[str], list[str]]:
    """(ranked sr_ids, the first page's sr_ids): the ranking is ``rank`` order over ranks
    1..DEPTH, read from as many pages as hold them; without ranks, the first page's order."""
    t0 = time.perf_counter()
    answer = await node.e_timeline(caller, action="find", query=question)
    seen.find_s.append(time.perf_counter() - t0)
    seen.pages += 1
    first = [r["sr_id"] for r in answer["results"]]
    if not first:
        seen.empty.append(question)
    if shed := answer.get("shed_terms"):
        seen.shed.update(shed)
        seen.shed_questions += 1
    if "semantic_used" in answer:
        seen.semantic += 1
        seen.unused += not answer["semantic_used"]
        seen.pending += answer.get("semantic_pending", 0) > 0
    ranks = _by_rank(answer["results"])
    if ranks is None:
        seen.unranked += 1
        return first, first
    page = 1
    while answer["has_more"] and page < MAX_PAGES and not set(range(1, DEPTH + 1)) <= ranks.keys():
        page += 1
        answer = await node.e_timeline(caller, action="find", query=question, page=page)
        seen.pages += 1
        ranks |= _by_rank(answer["results"]) or {}
    return [ranks[r] for r in sorted(ranks) if r <= DEPTH], first


async def _conversation_node(
    path: Path, config: str, conv: Conversation, out: Retrieved, seen: Seen
) -> None:
    await Node.init(path)
    (path / CONFIG_FILE).write_text(config)
    async with Node.open(path) as node:
        issued = await node.create_token(
            "reader", f"locomo-{conv.name}", ("read:workspace", "write:workspace")
        )
        caller = await node.authenticate(issued.token)
        sr_ids = await _write(node, caller, conv, seen)
        if node.vectors is not None:  # every turn embedded before the first question
            seen.model = node.vectors.embedder.model
            t0 = time.perf_counter()
            node.vectors.wake()
            await asyncio.wait_for(node.vectors.settled(), EMBED_TIMEOUT)
            seen.embed_s += time.perf_counter() - t0
        for q in conv.questions:
            ranked, first = await _ask(node, caller, q.text, seen)
            figures = _figures(q.evidence, [sr_ids[s] for s in ranked], [sr_ids[s] for s in first])
            out.asked.append((q.category, figures))


async def _memlane(
    label: str, config: str, conversations: Sequence[Conversation], workdir: Path
) -> tuple[Retrieved, Seen]:
    out, seen = Retrieved(label), Seen()
    for n, conv in enumerate(conversations):
        progress(
            f"quality: {label}: conversation {conv.name}, {len(conv.turns)} turns, "
            f"{len(conv.questions)} questions"
        )
        try:
            await _conversation_node(workdir / f"{_slug(label)}-{n}", config, conv, out, seen)
        except NodeError as exc:  # a configuration this node refuses is a row, not a crash
            problems = getattr(exc, "problems", None) or [str(exc)]  # InvalidConfig lists them
            out.asked, out.note = [], f"not available: {'; '.join(problems)}"
            break
    if seen.unranked and not out.note:
        out.note = f"{seen.unranked} answers without rank: by-relevance figures in result order"
    return out, seen


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


# -- the report --------------------------------------------------------------------------------


@dataclass(slots=True)
class Missing:
    """No data where the benchmark looked: one line, and a failing exit status."""

    directory: Path
    exit_status: int = 1

    def __str__(self) -> str:
        return (
            f"quality: no LoCoMo conversations (*.json) in {self.directory}; point "
            "--locomo DIR or MEMLANE_LOCOMO at the split"
        )


@dataclass(slots=True)
class Report:
    title: str
    counts: dict[int, int]
    rows: list[Retrieved] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        header = ["retriever", "figure"]
        header += [f"{c} {name} ({self.counts.get(c, 0)})" for c, name in CATEGORIES.items()]
        header += [f"overall ({sum(self.counts.values())})", "note"]
        lines = []
        for row in self.rows:
            if not row.asked:  # a configuration the node refused: its note says why
                lines.append([row.label, "—", *[""] * (len(CATEGORIES) + 1), row.note])
            for i, metric in enumerate(row.metrics()):
                cells = [_cell(row.mean(metric, c)) for c in (*CATEGORIES, None)]
                lines.append([row.label, metric, *cells, row.note if i == 0 else ""])
        out = [self.title, ""]
        out += table(header, lines, right=set(range(2, len(CATEGORIES) + 3)))
        return "\n".join(out + tail(self.checks, self.notes))


def _cell(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.3f}"  # a category with no question


def labels() -> dict[str, list[str]]:
    """The rows and checks the table prints (the smoke test looks for each)."""
    rows = [name for name, _ in CONFIGS] + [label for label, _ in RAW]
    checks = [
        f"{DEFAULT} page-1 recall ≥ {PORTER} R@20 − {TOLERANCE:g}",
        f"{DEFAULT} page-1 hit ≥ {PORTER} H@20 − {TOLERANCE:g}",
    ]
    return {"rows": rows, "checks": checks + [c for n, _ in CONFIGS[1:] for c in _against(n)]}


def _against(name: str) -> tuple[str, str]:
    """The checks of a configuration beside the default."""
    return (
        f"{name} page-1 recall > {DEFAULT}'s",
        f"{name} page-1 recall, worst category − {DEFAULT}'s",
    )


def _checks(rows: dict[str, Retrieved]) -> list[Check]:
    names = labels()["checks"]
    default, porter = rows[DEFAULT], rows[PORTER]
    out = []
    for name, mine, theirs in (
        (names[0], "page-1 recall", "R@20"),
        (names[1], "page-1 hit", "H@20"),
    ):
        value, target = default.mean(mine), porter.mean(theirs) - TOLERANCE
        out.append(Check(name, f"{value:.3f}", f"≥ {target:.3f}", verdict(value >= target)))
    return out + [c for name, _ in CONFIGS[1:] for c in _beside(rows[name], default)]


def _beside(other: Retrieved, default: Retrieved) -> list[Check]:
    """Another configuration must find more overall and lose nowhere much."""
    beats, worst = _against(other.label)
    if not other.asked:
        return [
            Check(beats, "not available", "", "(info)"),
            Check(worst, "not available", "", "(info)"),
        ]
    value, base = other.mean("page-1 recall"), default.mean("page-1 recall")
    gap = min(other.mean("page-1 recall", c) - default.mean("page-1 recall", c) for c in CATEGORIES)
    return [
        Check(beats, f"{value:.3f}", f"> {base:.3f}", verdict(value > base)),
        Check(worst, f"{gap:+.3f}", f"≥ {-SLACK:g}", verdict(gap >= -SLACK)),
    ]


def _seen_notes(label: str, seen: Seen, questions: int) -> list[str]:
    if not seen.find_s:
        return []
    common = ", ".join(f"{t!r} ×{n}" for t, n in seen.shed.most_common(6))
    out = [
        f"{label}: {seen.written:,} SRs written in {seen.write_s:.1f} s; {len(seen.find_s):,} "
        f"finds (median {statistics.median(seen.find_s) * 1000:.1f} ms), {seen.pages:,} pages "
        f"asked in all",
        f"{label}: shed_idf_noise dropped terms from {seen.shed_questions} of {questions} "
        f"questions (most often {common or 'none'})",
    ]
    if seen.empty:
        out.append(f"{label}: {len(seen.empty)} questions answered nothing, e.g. {seen.empty[0]!r}")
    if seen.model:
        out.append(
            f"{label}: {seen.model}: every SR embedded before the questions (the worker "
            f"embedding while they were written, then {seen.embed_s:.1f} s in all until the "
            f"queue was empty); of {seen.semantic:,} answers with the vector leg, "
            f"{seen.pending} had semantic_pending > 0 and {seen.unused} semantic_used false"
        )
    return out


async def _measure(conversations: Sequence[Conversation], workdir: Path, report: Report) -> None:
    for label, config in CONFIGS:
        retrieved, seen = await _memlane(label, config, conversations, workdir)
        report.rows.append(retrieved)
        report.notes += _seen_notes(label, seen, len(retrieved.asked))
    t0 = time.perf_counter()
    report.rows += [_raw(label, tok, conversations) for label, tok in RAW]
    report.notes.append(f"raw FTS5: both tokenizers in {time.perf_counter() - t0:.1f} s")


def _quick(conversations: list[Conversation]) -> list[Conversation]:
    """The first conversation (all its turns) and its first questions."""
    first = conversations[0]
    return [replace(first, questions=first.questions[:QUICK_QUESTIONS])]


def run(*, quick: bool, workdir: Path, locomo: Path | None = None) -> Report | Missing:
    """Write every conversation into a node per configuration, ask every question; the same
    turns into raw FTS5 tables."""
    started = time.perf_counter()
    directory = locomo or default_locomo()
    conversations = load(directory) if directory.is_dir() else []
    if not conversations:
        return Missing(directory)
    if quick:
        conversations = _quick(conversations)
    questions = [q for c in conversations for q in c.questions]
    turns, plural = sum(len(c.turns) for c in conversations), "s" * (len(conversations) > 1)
    smoke = SMOKE if quick else ""
    report = Report(
        f"quality — e_timeline find beside raw FTS5 bm25() on LoCoMo ({directory}): "
        f"{len(conversations)} conversation{plural}, {turns:,} turns, {len(questions)} "
        f"questions; Python {platform.python_version()}, SQLite "
        f"{sqlite3.sqlite_version}{smoke}",
        dict(Counter(q.category for q in questions)),
    )
    asyncio.run(_measure(conversations, workdir, report))
    report.checks = _checks({r.label: r for r in report.rows})
    dropped = [d for c in conversations for d in c.dropped]
    report.notes += [
        "page-1 = find's first page at the default page size; R@k, H@k, nDCG@10 by relevance "
        "(find's rank; raw: bm25() order); means over questions; evidence ids naming no turn "
        f"left out ({', '.join(dropped) or 'none'}), questions with no evidence left out",
        f"the run took {time.perf_counter() - started:.1f} s",
    ]
    return report
