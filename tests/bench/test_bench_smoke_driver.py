"""The driver benchmark stays runnable: a ``--quick`` run prints both rows and the ratio.
Nothing here looks at a figure."""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import driver
from tests.bench.common import run_bench


def test_quick_run_prints_both_rows_and_the_ratio(tmp_path: Path) -> None:
    done = run_bench("--quick", "--dir", str(tmp_path), "driver")
    assert done.returncode == 0, done.stderr
    for label in (driver.THREAD, driver.AIOSQLITE):
        row = rf"^{re.escape(label)}\s+[\d,]+\s+entries/s\s+320\s+1\s"
        assert re.search(row, done.stdout, re.MULTILINE), f"no row {label!r} in\n{done.stdout}"
    ratio = r"^aiosqlite / connection thread\s+\d+\.\d\d\s+\(info\)$"
    assert re.search(ratio, done.stdout, re.MULTILINE), done.stdout
    assert not list(tmp_path.iterdir()), "the run left files behind"
