"""The erase benchmark stays runnable: a ``--quick`` run (on a quarter of the timeline smoke
store, ``_smoke.TIMELINE``: 1,000 SRs, built into a temporary cache) prints its three rows,
and its checks with a verdict — the erased text found nowhere in the node's files among them.

Nothing here looks at a figure: speed is for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from tests.bench import erase
from tests.bench._smoke import TIMELINE, run_smoke

_NUM = r"[\d,]+(\.\d+)?"


def test_quick_run_prints_every_row_and_check(tmp_path: Path) -> None:
    store = replace(TIMELINE, srs=1_000, name="timeline-1k")  # a quarter of the timeline's
    constants = {"tests.bench.erase.QUICK": replace(erase.QUICK, store=store)}
    done = run_smoke(
        "erase", "--dir", str(tmp_path / "work"), constants=constants, cache=tmp_path / "cache"
    )
    assert done.returncode == 0, done.stderr
    for label in erase.ROWS:
        row = rf"^{re.escape(label)}\s+{_NUM}"  # its seconds (the WAL only where sampled)
        assert re.search(row, done.stdout, re.MULTILINE), f"no row {label!r} in\n{done.stdout}"
    assert re.search(rf"^{re.escape(erase.LEFT)}\s+0\s+0\s+PASS$", done.stdout, re.MULTILINE), (
        done.stdout
    )
    ratio = rf"^{re.escape(erase.RATIO)}\s+{_NUM}\s+≤ 1\.5\s+(PASS|FAIL)$"
    assert re.search(ratio, done.stdout, re.MULTILINE), done.stdout
    longest = rf"^{re.escape(erase.CHECKS[2])}\s+{_NUM} ms\s+\(info\)\s+\(info\)$"
    assert re.search(longest, done.stdout, re.MULTILINE), done.stdout
    wal = rf"^{re.escape(erase.CHECKS[3])}\s+{_NUM}\s+\(info\)\s+\(info\)$"
    assert re.search(wal, done.stdout, re.MULTILINE), done.stdout
