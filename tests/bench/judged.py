"""The judged benchmark (docs/benchmarks.md §judged): find on a record-style memory — the
project's own judged set (``tests/judged/``: a knowledge graph in the MCP reference memory
server's format, and queries with the records a person would expect first).

The graph is imported through ``Node.import_file`` (``mcp-memory``: an entity's name is the
title, its observations the text, its type the tag, its relations lines of its text); each
query is asked with ``e_timeline(action="find", query=Q)``, the ranking read from ``rank``.
It is asked once per field weighting (``WEIGHTINGS``: title, text, tags), the node's
``FIELD_WEIGHTS`` set for each in turn, beside raw FTS5 ``bm25()`` over the same three
columns (porter, the query's words OR-ed).  Figures: P@1, MRR@10, nDCG@10, R@10, overall and
by kind of query.  Nothing here asserts on a figure.
"""

from __future__ import annotations

import asyncio
import json
import math
import platform
import sqlite3
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from node.node import Node
from node.views import scoring as find_module
from tests.bench import quality
from tests.bench.common import SMOKE, Check, table, tail, verdict

__all__ = ["DATA", "WEIGHTINGS", "Judged", "label", "load", "metrics", "run"]

DATA = Path(__file__).resolve().parents[1] / "judged"
UNWEIGHTED = (1.0, 1.0, 1.0)
# (title, text, tags): the rule's default first, then the unweighted rule, then the sweep.
WEIGHTINGS: tuple[tuple[float, float, float], ...] = (
    find_module.FIELD_WEIGHTS,
    *dict.fromkeys(
        w
        for w in (
            UNWEIGHTED,
            (2.0, 1.0, 1.0),
            (3.0, 1.0, 1.0),
            (4.0, 1.0, 1.0),
            (2.0, 1.0, 1.5),
            (3.0, 1.0, 1.5),
            (3.0, 1.0, 2.0),
            (4.0, 1.0, 2.0),
        )
        if w != find_module.FIELD_WEIGHTS
    ),
)
METRICS = ("P@1", "MRR@10", "nDCG@10", "R@10")
DEPTH = 10


@dataclass(frozen=True, slots=True)
class Judged:
    query: str
    relevant: frozenset[str]  # titles
    kind: str


def load(directory: Path = DATA) -> list[Judged]:
    found = json.loads((directory / "queries.json").read_text())
    return [Judged(q["query"], frozenset(q["relevant"]), q["kind"]) for q in found]


def metrics(relevant: frozenset[str], ranked: Sequence[str]) -> dict[str, float]:
    top = list(ranked[:DEPTH])
    first = next((i for i, t in enumerate(top) if t in relevant), None)
    gain = sum(1 / math.log2(i + 2) for i, t in enumerate(top) if t in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), DEPTH)))
    return {
        "P@1": float(bool(top) and top[0] in relevant),
        "MRR@10": 0.0 if first is None else 1 / (first + 1),
        "nDCG@10": gain / ideal,
        "R@10": len(relevant & set(top)) / len(relevant),
    }


@dataclass(slots=True)
class Ranked:
    label: str
    answers: list[tuple[Judged, list[str]]] = field(default_factory=list)

    def mean(self, metric: str, kind: str | None = None) -> float:
        values = [metrics(j.relevant, r)[metric] for j, r in self.answers if kind in (None, j.kind)]
        return statistics.fmean(values) if values else math.nan


def label(w: tuple[float, float, float]) -> str:
    title, text, tags = w
    name = f"memlane, title ×{title:g}, text ×{text:g}, tags ×{tags:g}"
    return name + (" (default)" if w == WEIGHTINGS[0] else "")


async def _memlane(workdir: Path, judged: Sequence[Judged]) -> list[Ranked]:
    await Node.init(workdir / "node")
    out = []
    async with Node.open(workdir / "node") as node:
        issued = await node.create_token("judge", "w", ("read:workspace", "write:workspace"))
        caller = await node.authenticate(issued.token)
        report = await node.import_file(caller, DATA / "memory.jsonl", "mcp-memory")
        assert report.written, "the judged graph imported nothing"
        kept = find_module.FIELD_WEIGHTS
        try:
            for weights in WEIGHTINGS:
                find_module.FIELD_WEIGHTS = weights
                ranked = Ranked(label(weights))
                for j in judged:
                    answer = await node.e_timeline(caller, action="find", query=j.query)
                    by_rank = sorted(answer["results"], key=lambda r: r["rank"])
                    ranked.answers.append((j, [r["title"] for r in by_rank]))
                out.append(ranked)
        finally:
            find_module.FIELD_WEIGHTS = kept
    return out


def _raw(judged: Sequence[Judged]) -> Ranked:
    """FTS5 bm25() over title, text and tags (porter), as the importer lays them out."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE r USING fts5 (title, text, tags, tokenize='porter unicode61')")
    for line in (DATA / "memory.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e.get("type") == "entity":
            db.execute(
                "INSERT INTO r VALUES (?, ?, ?)",
                (e["name"], "\n".join(e["observations"]), e["entityType"]),
            )
    out = Ranked("raw FTS5 bm25(), porter")
    for j in judged:
        match = quality.raw_query(j.query)
        rows = (
            db.execute(
                f"SELECT title FROM r WHERE r MATCH ? ORDER BY bm25(r) LIMIT {DEPTH}", (match,)
            ).fetchall()
            if match
            else []
        )
        out.answers.append((j, [t for (t,) in rows]))
    return out


@dataclass(slots=True)
class Report:
    title: str
    rows: list[Ranked]
    kinds: list[str]
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        header = ["ranker", *METRICS, *(f"MRR {k}" for k in self.kinds), "'gateway' first"]
        lines = [
            [
                r.label,
                *(f"{r.mean(m):.3f}" for m in METRICS),
                *(f"{r.mean('MRR@10', k):.3f}" for k in self.kinds),
                _gateway(r)[:1][0] if _gateway(r) else "nothing",
            ]
            for r in self.rows
        ]
        body = table(header, lines, right=set(range(1, len(header))))
        return "\n".join([self.title, "", *body, *tail(self.checks, self.notes)])


def _gateway(ranked: Ranked) -> list[str]:
    return next(r for j, r in ranked.answers if j.query == "gateway")


def _checks(rows: list[Ranked]) -> list[Check]:
    default = rows[0]
    plain = next(r for r in rows if r.label.startswith(label(UNWEIGHTED)))
    gateway = _gateway(default)
    return [
        Check(
            "default MRR@10 beside the unweighted rule's",
            f"{default.mean('MRR@10'):.3f}",
            f"≥ {plain.mean('MRR@10'):.3f}",
            verdict(default.mean("MRR@10") >= plain.mean("MRR@10")),
        ),
        Check(
            "'gateway': the record titled Gateway first",
            gateway[0] if gateway else "nothing",
            "Gateway",
            verdict(bool(gateway) and gateway[0] == "Gateway"),
        ),
    ]


def run(*, quick: bool, workdir: Path) -> Report:
    judged = load()
    if quick:
        judged = judged[:12]
    rows = asyncio.run(_memlane(workdir, judged))
    rows.append(_raw(judged))
    kinds = sorted({j.kind for j in judged})
    report = Report(
        f"judged — find on the project's judged record-style set ({len(judged)} queries), "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}"
        f"{SMOKE if quick else ''}",
        rows,
        kinds,
    )
    report.checks = _checks(rows)
    report.notes.append(
        "P@1: the first result is relevant; MRR@10: 1 / the first relevant rank (0 beyond 10); "
        "nDCG@10 binary gains; R@10 the relevant share in the first 10; means over queries"
    )
    return report
