"""The changes benchmark stays runnable: a ``--quick`` run (on two smoke stores,
``_smoke.CHANGES``, built into a temporary cache) prints every page and brute-force row with its
figures, every check with a verdict, and the peak RSS; and memlane's pages equal the
brute-force reference's.

Nothing here looks at a figure: speed is for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import changes
from tests.bench._smoke import CHANGES, run_smoke

ROOT = Path(__file__).resolve().parents[2]
_MS = r"[\d,]+(\.\d+)?"


def test_quick_run_prints_every_row_and_check(tmp_path: Path) -> None:
    cache, work = tmp_path / "cache", tmp_path / "work"
    constants = {"tests.bench.changes.QUICK": CHANGES}
    done = run_smoke("changes", "--dir", str(work), constants=constants, cache=cache)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    labels = changes.labels(CHANGES)
    for label in labels["rows"]:
        row = re.compile(rf"{re.escape(label)}\s+{_MS}\s+{_MS}\s+\d+\s+[\d,]+ MiB\s+\S")
        assert any(row.match(line) for line in lines), f"no row {label!r} in\n{done.stdout}"
    for label in labels["checks"]:
        check = re.compile(rf"{re.escape(label)}\s+\S.*\s(PASS|FAIL|\(info\))$")
        assert any(check.match(line) for line in lines), f"no check {label!r} in\n{done.stdout}"
    # Correctness, not speed: every page memlane answered equals the brute force's slice.
    assert re.search(
        r"^pages equal the brute force's\s+(\d+) of \1\s+all\s+PASS$", done.stdout, re.MULTILINE
    ), done.stdout
    assert "MISMATCH" not in done.stdout
    assert f"stores of {CHANGES.small:,} and {CHANGES.large:,} SRs" in lines[0], lines[0]
    assert re.search(r"^peak RSS of the run: [\d,]+ MiB$", done.stdout, re.MULTILINE)
    assert len(re.findall(r"^note: \S+ store made by this run", done.stdout, re.MULTILINE)) == 2
    assert not list(work.iterdir()), "the run left files behind"
    for srs in (CHANGES.small, CHANGES.large):
        assert (cache / f"{CHANGES.name}-{srs}" / "meta.json").exists(), "not cached"
