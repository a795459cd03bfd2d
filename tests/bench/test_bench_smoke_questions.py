"""The questions benchmark stays runnable: a ``--quick`` run (a store of 800 SRs of the
LoCoMo split and 10 questions, built into a temporary cache) prints each engine's median, p90
and p99, every check with a verdict, and the peak RSS.

Nothing here looks at a figure: speed is for ``make bench`` (docs/benchmarks.md).  The data
is read where it lies (never copied into the repository).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import questions
from tests.bench._smoke import locomo, run_smoke

_MS = r"[\d,]+(\.\d+)?"
SMALL = (questions.Sizes(800, "questions-800", questions=10, warmup=2),)


def test_quick_run_prints_every_engine_and_check(tmp_path: Path) -> None:
    data = locomo()
    cache, work = tmp_path / "cache", tmp_path / "work"
    done = run_smoke(
        "questions",
        "--dir",
        str(work),
        "--locomo",
        str(data),
        constants={"tests.bench.questions.QUICK": SMALL},
        cache=cache,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for label in (*questions.ENGINES, questions.HTTP):
        row = re.compile(rf"{re.escape(label)}\s+{_MS}\s+{_MS}\s+{_MS}\s+10\b")
        assert any(row.match(x) for x in lines), f"no row {label!r} in\n{done.stdout}"
    for check in ("median / tantivy's", "p99 / tantivy's", "median / FTS5's", "peak RSS"):
        found = re.compile(rf"800: .*{re.escape(check)}.*\s\(info\)$")
        assert any(found.match(x) for x in lines), f"no check {check!r} in\n{done.stdout}"
    assert "QUICK" in lines[0]
    assert re.search(r"^memlane alone \(its own process\): median .* MiB$", done.stdout, re.M)
    assert re.search(r"^on disk: the store [\d,]+ bytes per SR", done.stdout, re.M)
    assert re.search(r"^peak RSS of the run: [\d,]+ MiB$", done.stdout, re.MULTILINE)
    assert (cache / "questions-800" / "meta.json").exists(), "the store was not cached"
