"""The timeline benchmark stays runnable: a ``--quick`` run (on a smoke store,
``_smoke.TIMELINE``, built into a temporary cache) prints every query with its raw baseline and
ratio, every bound with a verdict, and the peak RSS.

Nothing here looks at a figure: speed is for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import timeline
from tests.bench._smoke import TIMELINE, run_smoke

ROOT = Path(__file__).resolve().parents[2]
_MS = r"[\d,]+\.\d+"


def test_quick_run_prints_every_query_and_bound(tmp_path: Path) -> None:
    cache, work = tmp_path / "cache", tmp_path / "work"
    constants = {"tests.bench.timeline.QUICK": TIMELINE}
    done = run_smoke("timeline", "--dir", str(work), constants=constants, cache=cache)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for label in timeline.QUERIES:
        row = re.compile(
            rf"{re.escape(label)}\s+{_MS}\s+{_MS}\s+{_MS}\s+{_MS}\s+\d+\.\d\d\s+\d+\s+[\d,]+ MiB"
        )
        assert any(row.match(line) for line in lines), f"no row {label!r} in\n{done.stdout}"
    for bound in timeline.BOUNDS:
        line_re = re.compile(rf"{re.escape(bound.label)}\s+\d+\.\d+\s+≤ .*\s(PASS|FAIL)$")
        assert any(line_re.match(line) for line in lines), f"no bound {bound.label!r}"
    assert re.search(r"^peak RSS of the run: [\d,]+ MiB$", done.stdout, re.MULTILINE)
    assert re.search(r"^note: store built by this run .* in [\d,]+ s", done.stdout, re.MULTILINE)
    assert f"timeline — {TIMELINE.srs:,} SRs" in lines[0], lines[0]
    assert not list(work.iterdir()), "the run left files behind"
    assert (cache / TIMELINE.name / "meta.json").exists(), "the store was not cached"
