"""The export and import benchmark stays runnable: a ``--quick`` run (on the sync benchmark's
smoke stores, ``_smoke.SYNC``, built into a temporary cache) prints every row, ratio and check
with a verdict, imports every SR it exported and leaves nothing behind.

Nothing here looks at a figure: speed is for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import exchange
from tests.bench._smoke import SYNC, run_smoke


def test_quick_run_prints_every_row_ratio_and_check(tmp_path: Path) -> None:
    cache, work = tmp_path / "cache", tmp_path / "work"
    constants = {"tests.bench.sync.QUICK": SYNC}
    done = run_smoke("exchange", "--dir", str(work), constants=constants, cache=cache)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for label in exchange.ROWS:
        row = re.compile(rf"{re.escape(label)}\s+[\d,]+(\.\d)?\s+entries/s\s+[\d,]+\s+1\s")
        assert any(row.match(line) for line in lines), f"no row {label!r} in\n{done.stdout}"
    for ratio in exchange.RATIOS:
        line_re = re.compile(rf"{re.escape(ratio.label)}\s+\d+\.\d\d\s.*\s(PASS|FAIL)$")
        assert any(line_re.match(line) for line in lines), f"no ratio {ratio.label!r}"
    for label in exchange.CHECKS:
        check = re.compile(rf"{re.escape(label)}\s+\S.*\s(PASS|FAIL)$")
        assert any(check.match(line) for line in lines), f"no check {label!r} in\n{done.stdout}"
    wrote = re.search(
        r"^SRs the import wrote\s+([\d,]+)\s+= ([\d,]+)\s+PASS$", done.stdout, re.MULTILINE
    )
    assert wrote is not None, done.stdout
    assert wrote.group(1) == wrote.group(2) != "0"
    assert not list(work.iterdir()), "the run left files behind"
