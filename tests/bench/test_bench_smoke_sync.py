"""The sync benchmark stays runnable: a ``--quick`` run (on the smoke sizes, ``_smoke.SYNC``:
a couple of thousand entries, the stores built into a temporary cache) prints every row, ratio
and check with a verdict, syncs every entry and leaves nothing behind.

Nothing here looks at a figure: speed is for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import sync
from tests.bench._smoke import SYNC, run_smoke


def test_quick_run_prints_every_row_ratio_and_check(tmp_path: Path) -> None:
    cache, work = tmp_path / "cache", tmp_path / "work"
    constants = {"tests.bench.sync.QUICK": SYNC}
    done = run_smoke("sync", "--dir", str(work), constants=constants, cache=cache)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for label in sync.ROWS:
        row = re.compile(rf"{re.escape(label)}\s+[\d,]+(\.\d)?\s+entries/s\s+[\d,]+\s+1\s")
        assert any(row.match(line) for line in lines), f"no row {label!r} in\n{done.stdout}"
    for ratio in sync.RATIOS:
        verdict = r"(PASS|FAIL)" if ratio.target is not None else r"\(info\)"
        line_re = re.compile(rf"{re.escape(ratio.label)}\s+\d+\.\d\d\s.*\s{verdict}$")
        assert any(line_re.match(line) for line in lines), f"no ratio {ratio.label!r}"
    for label in sync.CHECKS:
        check = re.compile(rf"{re.escape(label)}\s+\S.*\s(PASS|FAIL|\(info\))$")
        assert any(check.match(line) for line in lines), f"no check {label!r} in\n{done.stdout}"
    assert "the same row counts as the synced receiver" in done.stdout
    assert f"({SYNC.entries:,} entries of {SYNC.writers} writers" in done.stdout, done.stdout
    assert re.search(r"^peak RSS of the run: [\d,]+ MiB$", done.stdout, re.MULTILINE)
    assert not list(work.iterdir()), "the run left files behind"
    assert (cache / SYNC.name / "meta.json").exists(), "not cached"
