"""The benchmarks stay runnable and honest: a ``--quick`` run (of ingest, on the smoke sizes
``_smoke.INGEST``) prints every row and ratio, and the raw limit writes the rows memlane
writes, authentic and in memlane's schema.

Nothing here looks at a figure: speed is for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import msgpack
import pytest

from node.node import Node
from protocol.entry import Entry
from protocol.kinds import decode_payload
from protocol.signing import authenticate, linked
from tests.bench import ingest
from tests.bench._smoke import INGEST, run_smoke
from tests.bench.common import run_bench
from tests.bench.ingest import RawLog

ROOT = Path(__file__).resolve().parents[2]
AUTHORED_TABLES = (
    "logs",
    "headers",
    "payloads",
    "sr_versions",
    "srs",
    "sr_tags",
    "sr_fts",
    "audit",
)


@pytest.mark.extra("bench")
def test_quick_run_prints_every_row_and_ratio(tmp_path: Path) -> None:
    constants = {"tests.bench.ingest.QUICK": INGEST}
    done = run_smoke("ingest", "--dir", str(tmp_path), constants=constants)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for label in ingest.ROWS:
        row = re.compile(rf"{re.escape(label)}\s+[\d,]+(\.\d)?\s+(entries|events)/s\s")
        assert any(row.match(line) for line in lines), f"no row {label!r} in\n{done.stdout}"
    for ratio in ingest.RATIOS:
        verdict = r"(PASS|FAIL)" if ratio.target is not None else r"\(info\)"
        line_re = re.compile(rf"{re.escape(ratio.label)}\s+\d+\.\d\d\s.*\s{verdict}$")
        assert any(line_re.match(line) for line in lines), f"no ratio {ratio.label!r}"
    assert re.search(r"^peak RSS of the run: [\d,]+ MiB$", done.stdout, re.MULTILINE)
    assert not list(tmp_path.iterdir()), "the run left files behind"


def test_an_unknown_benchmark_name_is_refused() -> None:
    done = run_bench("--quick", "no-such-benchmark")
    assert done.returncode == 2
    assert "ingest" in done.stderr
    assert done.stdout == ""


def _rows(db: sqlite3.Connection, sql: str) -> list[tuple[object, ...]]:
    return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in db.execute(sql)]


def test_raw_limit_writes_authentic_chained_rows(tmp_path: Path) -> None:
    work = [(f"author{i:02d}", ingest.sr_fields(i)) for i in range(5)]
    log = RawLog(tmp_path / "raw.db")
    log.write(work[:2])
    log.write(work[2:])
    log.close()
    with closing(sqlite3.connect(tmp_path / "raw.db")) as db:
        _check_raw_rows(db, work)


def _check_raw_rows(db: sqlite3.Connection, work: list[tuple[str, dict[str, Any]]]) -> None:
    stored = _rows(
        db, "SELECT h.id, h.raw, p.data FROM headers h JOIN payloads p USING (pos) ORDER BY pos"
    )
    entries = [Entry.decode(raw, data) for _, raw, data in stored]
    assert [e.id for e in entries] == [sid for sid, _, _ in stored]
    assert authenticate(entries, amortised=False) == [True] * 5
    assert all(linked(a, b) for a, b in itertools.pairwise(entries))
    payloads = [decode_payload("sr.put", e.payload or b"") for e in entries]
    assert [(p["principal"], p["title"], p["text"], p["tags"]) for p in payloads] == [
        (who, f["title"], f["text"], f["tags"]) for who, f in work
    ]
    assert _rows(db, "SELECT event, subject, principal, entry FROM audit ORDER BY seq") == [
        ("sr_written", p["sr_id"], p["principal"], e.id)
        for p, e in zip(payloads, entries, strict=True)
    ]
    assert _rows(db, "SELECT sr_id, workspace, owner FROM srs ORDER BY doc") == [
        (p["sr_id"], "team", p["principal"]) for p in payloads
    ]
    assert _rows(db, "SELECT sr_id, pos FROM sr_versions ORDER BY pos") == [
        (p["sr_id"], e.header.seq) for p, e in zip(payloads, entries, strict=True)
    ]
    assert _rows(db, "SELECT head_seq, head_id FROM logs") == [(5, entries[-1].id)]
    (hlc,) = db.execute("SELECT value FROM state WHERE key = 'hlc'").fetchone()
    last = entries[-1].header.hlc
    assert msgpack.unpackb(hlc) == [last.wall, last.counter]


async def _counts(node: Node) -> dict[str, int]:
    return {t: await node.reader().count(t) for t in AUTHORED_TABLES}


@pytest.mark.asyncio
async def test_raw_limit_writes_the_rows_memlane_writes(tmp_path: Path) -> None:
    await Node.init(tmp_path / "node")
    async with Node.open(tmp_path / "node") as node:
        caller = await ingest.author_caller(node, "author00")
        before = await _counts(node)
        results = [await node.e_write(caller, **ingest.sr_fields(i)) for i in range(3)]
        after = await _counts(node)
        reader = node.reader()
        authored = await reader.fetchall("SELECT data FROM payloads ORDER BY pos DESC LIMIT 1")
    log = RawLog(tmp_path / "raw.db")
    log.write([("author00", ingest.sr_fields(i)) for i in range(3)])
    log.close()
    with closing(sqlite3.connect(tmp_path / "raw.db")) as db:
        raw_counts = {t: _rows(db, f"SELECT count(*) FROM {t}")[0][0] for t in AUTHORED_TABLES}
        ((raw_payload,),) = _rows(db, "SELECT data FROM payloads ORDER BY pos DESC LIMIT 1")
    assert {t: after[t] - before[t] for t in AUTHORED_TABLES} == raw_counts
    assert all(r["created"] for r in results)
    mine, theirs = decode_payload("sr.put", raw_payload), decode_payload("sr.put", authored[0][0])
    assert mine.keys() == theirs.keys()
    assert {k: v for k, v in mine.items() if k != "sr_id"} == {
        k: v for k, v in theirs.items() if k != "sr_id"
    }
