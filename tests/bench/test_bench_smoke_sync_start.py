"""The cold-start sync benchmark stays runnable: a ``--quick`` run (300 entries a node) prints
both rows and the ratio, and leaves nothing behind.  Nothing here looks at a figure."""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import sync_start
from tests.bench.common import run_bench


def test_quick_run_prints_both_rows_and_the_ratio(tmp_path: Path) -> None:
    cache, work = tmp_path / "cache", tmp_path / "work"
    done = run_bench("--quick", "--dir", str(work), "sync_start", cache=cache)
    assert done.returncode == 0, done.stderr
    for label in sync_start.ROWS:
        row = rf"{re.escape(label)}\s+[\d,.]+\s+entries/s\s+903\s+1\s"
        assert re.search(row, done.stdout, re.MULTILINE), f"no row {label!r} in\n{done.stdout}"
    assert re.search(r"^zeroconf / static peers\s+\d+\.\d\d\s+\(info\)$", done.stdout, re.MULTILINE)
    assert not list(work.iterdir()), "the run left files behind"
