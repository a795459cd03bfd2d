"""The semantic benchmark stays runnable: a ``--quick`` run (a small store, received and embedded
with wordllama from its wheel into a temporary cache) prints every query with its BM25-only
baseline and ratio, every bound with a verdict, the vector index's counts and the peak RSS.

Nothing here looks at a figure: speed is for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.bench import semantic
from tests.bench._smoke import SEMANTIC, run_smoke

_MS = r"[\d,]+\.\d+"


@pytest.mark.extra("semantic")
def test_quick_run_prints_every_query_and_bound(tmp_path: Path) -> None:
    cache, work = tmp_path / "cache", tmp_path / "work"
    constants = {"tests.bench.semantic.QUICK": SEMANTIC}
    done = run_smoke("semantic", "--dir", str(work), constants=constants, cache=cache)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "QUICK" in lines[0]
    assert lines[2].split()[:5] == ["query", "median", "ms", "p90", "ms"], lines[2]
    assert "BM25 median ms" in lines[2], lines[2]
    for label in semantic.QUERIES:
        row = re.compile(
            rf"{re.escape(label)}\s+{_MS}\s+{_MS}\s+{_MS}\s+{_MS}\s+\d+\.\d\d\s+\d+\s+[\d,]+ MiB"
        )
        assert any(row.match(line) for line in lines), f"no row {label!r} in\n{done.stdout}"
    for bound in semantic.BOUNDS:
        line_re = re.compile(rf"{re.escape(bound.label)}\s+\d+\.\d+\s+≤ 2×\s+(PASS|FAIL)$")
        assert any(line_re.match(line) for line in lines), f"no bound {bound.label!r}"
    n = f"{SEMANTIC.srs:,}"
    assert re.search(
        rf"^note: store built by this run .*: {n} SRs received in [\d,]+ s, "
        r"embedded in [\d,.]+ s",
        done.stdout,
        re.MULTILINE,
    )
    assert re.search(
        rf"^note: index: wordllama:\S+, {n} vectors stored, 0 queued; {n} held",
        done.stdout,
        re.MULTILINE,
    ), done.stdout
    assert re.search(
        r"^note: vector leg answers: [\d,]+, of which 0 fell back to BM25 "
        r"\(semantic_used false\) and 0 had",
        done.stdout,
        re.MULTILINE,
    )
    assert re.search(r"^peak RSS of the run: [\d,]+ MiB$", done.stdout, re.MULTILINE)
    assert not list(work.iterdir()), "the run left files behind"
    assert (cache / SEMANTIC.name / "meta.json").exists(), "the store was not cached"
