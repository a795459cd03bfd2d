"""The judged benchmark stays runnable: a ``--quick`` run (the judged graph, its first 12
queries) prints every ranker's figures, both checks with a verdict, and the peak RSS.

Nothing here looks at a figure: ranking quality is for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import judged
from tests.bench.common import run_bench

_FIGURE = r"\d\.\d{3}"


def test_quick_run_prints_every_ranker_and_check(tmp_path: Path) -> None:
    done = run_bench("--quick", "--dir", str(tmp_path), "judged")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for weights in judged.WEIGHTINGS:
        row = re.compile(rf"{re.escape(judged.label(weights))}\s+" + r"\s+".join([_FIGURE] * 4))
        assert any(row.match(x) for x in lines), f"no row for {weights} in\n{done.stdout}"
    assert any(x.startswith("raw FTS5 bm25(), porter") for x in lines)
    for check in ("default MRR@10 beside the unweighted rule's", "'gateway': the record titled"):
        found = re.compile(rf"{re.escape(check)}.*\s(PASS|FAIL)$")
        assert any(found.match(x) for x in lines), f"no check {check!r} in\n{done.stdout}"
    assert "QUICK" in lines[0]
    assert re.search(r"^peak RSS of the run: [\d,]+ MiB$", done.stdout, re.MULTILINE)
    assert not list(tmp_path.iterdir()), "the run left files behind"
