"""find's page rule, score and rank against a brute-force reference (docs/tools/e_timeline.md
§find).

Random stores of SRs — private ones, another workspace's, local deletions, SRs that score
exactly alike and SRs that share a millisecond — and random questions from three callers who
read different parts of them.  The reference knows only what was written: it cuts and stems
each SR with SQLite's own FTS5 ``porter`` tokenizer (a table of its own, not the node's),
scores BM25F (fields weighted and normalised apart) over what the caller can read, ranks by
score then ``sr_id``, cuts page p from ranks (p−1)·size+1 … p·size and orders the page by
time.  The node must give the same SRs, order, ranks, scores and ``has_more``.
"""

from __future__ import annotations

import math
import random
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from node.access.callers import Caller
from node.node import Node
from node.views.scoring import FIELD_WEIGHTS
from protocol.clock import Hlc
from tests.node.helpers import CallerFactory, ForeignWriter, Wall, sr_payload

WORDS = ("run", "runs", "running", "dog", "dogs", "cat", "quiet", "quietly", "fig", "plum")
ORDERS = ("ingest_time_desc", "ingest_time_asc", "content_time_desc", "content_time_asc")
_K1, _B = 1.2, 0.75
W = FIELD_WEIGHTS
_WORD = re.compile(r"[^\W_]+")


@dataclass
class Sr:
    sr_id: str
    workspace: str
    private: bool
    title: str
    text: str
    tags: list[str]
    conversational: bool
    ingest: int
    content: int | None
    deleted: bool = False

    def readable_by(self, caller: Caller) -> bool:
        mine = not self.private or caller.is_admin or caller.principal == "remote"
        return self.workspace == caller.workspace and not self.deleted and mine

    def lengths(self) -> tuple[int, int, int]:
        """Its length by field: the words of its title, of its text, and its tags."""
        return len(_WORD.findall(self.title)), len(_WORD.findall(self.text)), len(self.tags)


class Stemmer:
    """SQLite's porter tokenizer over unicode61, on a connection of the test's own."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            "CREATE VIRTUAL TABLE t USING fts5 (x, tokenize='porter unicode61 remove_diacritics 2')"
        )
        self.db.execute("CREATE VIRTUAL TABLE v USING fts5vocab (t, instance)")

    def terms(self, text: str) -> list[str]:
        self.db.execute("INSERT INTO t (rowid, x) VALUES (1, ?)", (text,))
        found = [t for (t,) in self.db.execute("SELECT term FROM v ORDER BY offset")]
        self.db.execute("DELETE FROM t")
        return found


def store(foreign: ForeignWriter, start: int, rng: random.Random) -> tuple[list[Any], list[Sr]]:
    """~90 SRs: a tenth private, a tenth elsewhere, a fifth copies of one text (ties), four
    to a millisecond."""
    entries, srs = [], []
    for n in range(90):
        sr_id = f"0190a000-0000-7000-8000-{rng.randrange(10**12):012d}"
        copy = n % 5 == 0
        sr = Sr(
            sr_id=sr_id,
            workspace="elsewhere" if n % 10 == 7 else "team",
            private=n % 10 == 3,
            title="dogs run" if copy else " ".join(rng.sample(WORDS, 2)),
            text="quiet fig" if copy else " ".join(rng.choices(WORDS, k=rng.randint(1, 9))),
            tags=[]
            if copy
            else sorted(set(rng.sample(("fig", "Plum", "cats"), rng.randint(0, 2)))),
            conversational=rng.random() < 0.5,
            ingest=start + n // 4,
            content=None if rng.random() < 0.3 else start - rng.randrange(10**6),
        )
        fields: dict[str, Any] = {
            "title": sr.title,
            "text": sr.text,
            "tags": sr.tags,
            "conversational": sr.conversational,
        }
        if sr.private:
            fields["visibility"] = "private"
        if sr.content is not None:
            fields["content_time"] = sr.content
        payload = sr_payload(sr_id, sr.workspace, **fields)
        entries.append(foreign.next("sr.put", payload, hlc=Hlc(sr.ingest, n % 4)))
        srs.append(sr)
    return entries, srs


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def reference(
    srs: list[Sr], stem: Stemmer, caller: Caller, args: dict[str, Any]
) -> tuple[list[tuple[str, int, float]], bool]:
    """(sr_id, rank, score) of the page in its order, and whether more ranks follow."""
    readable = [s for s in srs if s.readable_by(caller)]
    bags = {
        s.sr_id: [Counter(stem.terms(f)) for f in (s.title, s.text, " ".join(s.tags))]
        for s in readable
    }
    wanted = list(dict.fromkeys(stem.terms(args["query"])))
    n = len(readable)
    average = [sum(s.lengths()[f] for s in readable) / n if n else 0.0 for f in range(3)]
    df = {t: sum(1 for b in bags.values() if any(f[t] for f in b)) for t in wanted}
    scored = []
    for s in readable:
        if args.get("is_conversational_only") and not s.conversational:
            continue
        norm = [
            (1 - _B) + _B * s.lengths()[f] / average[f] if average[f] else 1.0 for f in range(3)
        ]
        parts = []
        for t in sorted(wanted):
            tf = [f[t] for f in bags[s.sr_id]]
            if any(tf):
                x = W[0] * tf[0] / norm[0] + W[1] * tf[1] / norm[1]
                x = x + W[2] * tf[2] / norm[2]
                parts.append(_idf(n, df[t]) * x * (_K1 + 1) / (x + _K1))
        if parts:
            scored.append((-sum(parts), s))
    scored.sort(key=lambda p: (p[0], p[1].sr_id))
    size, page = args["page_size"], args["page"]
    chosen = [
        (rank, s, -score)
        for rank, (score, s) in enumerate(scored, 1)
        if (page - 1) * size < rank <= page * size
    ]
    field, _, way = args["order_by"].rpartition("_")

    def when(s: Sr) -> int:
        return s.ingest if field == "ingest_time" else (s.content or s.ingest)

    chosen.sort(key=lambda c: (when(c[1]), c[1].sr_id), reverse=way == "desc")
    return [(s.sr_id, rank, score) for rank, s, score in chosen], len(scored) > page * size


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_find_pages_ranks_and_scores_match_the_reference(
    node: Node, wall: Wall, foreign: ForeignWriter, make_caller: CallerFactory, seed: int
) -> None:
    rng = random.Random(seed)
    entries, srs = store(foreign, wall.now - 60_000, rng)
    assert (await node.receive(entries, source="peer")).stored == len(entries)
    admin = await make_caller("root", "team", ("read:workspace", "admin:workspace"))
    for sr in rng.sample([s for s in srs if s.workspace == "team"], 8):
        await node.e_delete(admin, sr_id=sr.sr_id)
        sr.deleted = True
    callers = [
        admin,
        await make_caller("alice", "team", ("read:workspace",)),
        await make_caller("remote", "team", ("read:workspace",)),
    ]
    stem, compared, paged = Stemmer(), 0, 0
    for _ in range(60):
        caller = rng.choice(callers)
        args = {
            "action": "find",
            "query": " ".join(rng.sample(WORDS, rng.randint(1, 3))),
            "order_by": rng.choice(ORDERS),
            "page_size": rng.choice((1, 3, 7, 20)),
            "page": rng.randint(1, 4),
            "is_conversational_only": rng.random() < 0.3,
            "shed_idf_noise": False,
        }
        expected, more = reference(srs, stem, caller, args)
        answer = await node.e_timeline(caller, **args)
        got = [(r["sr_id"], r["rank"], r["score"]) for r in answer["results"]]
        assert [g[:2] for g in got] == [e[:2] for e in expected], args
        assert all(
            g[2] == pytest.approx(e[2], abs=1e-6) for g, e in zip(got, expected, strict=True)
        ), args
        assert answer["has_more"] is more, args
        compared += len(got)
        paged += args["page"] > 1 and bool(got)
    assert compared > 200, "the questions found too little to compare"
    assert paged > 5, "too few later pages held results"
