"""The serving benchmark of bundle imports stays runnable: a ``--quick`` run (the sync
benchmark's small stores, built into a temporary cache) prints every row, ratio and check with a
verdict, imports every entry beside the writer and leaves nothing behind.

Nothing here looks at a figure: speed is for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import bundle_serving
from tests.bench.common import run_bench


def test_quick_run_prints_every_row_ratio_and_check(tmp_path: Path) -> None:
    cache, work = tmp_path / "cache", tmp_path / "work"
    done = run_bench("--quick", "--dir", str(work), "bundle_serving", cache=cache)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for label in bundle_serving.ROWS:
        row = re.compile(rf"{re.escape(label)}\s+[\d,]+(\.\d)?\s+entries/s\s+3,000\s+1\s")
        assert any(row.match(line) for line in lines), f"no row {label!r} in\n{done.stdout}"
    for ratio in bundle_serving.RATIOS:
        line_re = re.compile(rf"{re.escape(ratio.label)}\s+\d+\.\d\d\s.*\s\(info\)$")
        assert any(line_re.match(line) for line in lines), f"no ratio {ratio.label!r}"
    for label in bundle_serving.CHECKS:
        check = re.compile(rf"{re.escape(label)}\s+\S.*\s(PASS|FAIL|\(info\))$")
        assert any(check.match(line) for line in lines), f"no check {label!r} in\n{done.stdout}"
    assert re.search(
        r"^writes during the import \(refused\)\s+[\d,]+ \(0\)", done.stdout, re.MULTILINE
    ), done.stdout
    assert not list(work.iterdir()), "the run left files behind"
