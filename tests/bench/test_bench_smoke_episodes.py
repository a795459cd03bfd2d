"""The episode chain benchmark stays runnable: a ``--quick`` run (a small store, built into a
temporary cache) prints both walks with their hop-by-hop baseline and ratio, the bound with a
verdict, and the note saying memlane's chains were compared with the hop-by-hop ones.

Nothing here looks at a figure: speed is for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import episodes
from tests.bench.common import run_bench

_MS = r"[\d,]+\.\d+"


def test_quick_run_prints_both_walks_the_bound_and_the_check(tmp_path: Path) -> None:
    cache, work = tmp_path / "cache", tmp_path / "work"
    done = run_bench("--quick", "--dir", str(work), "episodes", cache=cache)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    sizes = episodes.QUICK
    for label, k in zip(episodes.labels(sizes), (sizes.k_long, sizes.k_short), strict=True):
        row = re.compile(
            rf"{re.escape(label)}\s+{_MS}\s+{_MS}\s+{_MS}\s+{_MS}\s+\d+\.\d\d\s+\d+\s+[\d,]+ MiB"
            rf"\s+{k} episodes a walk, more behind; p95 {_MS} ms, hop-by-hop p95 {_MS} ms"
        )
        assert any(row.match(line) for line in lines), f"no row {label!r} in\n{done.stdout}"
    for bound in episodes.bounds(sizes):
        line_re = re.compile(rf"{re.escape(bound.label)}\s+\d+\.\d+\s+≤ .*\s(PASS|FAIL)$")
        assert any(line_re.match(line) for line in lines), f"no bound {bound.label!r}"
    checked = re.search(
        r"^note: checked: memlane's chain equals the hop-by-hop chain .* on all ([\d,]+) walks$",
        done.stdout,
        re.MULTILINE,
    )
    assert checked, f"no correctness check in\n{done.stdout}"
    assert int(checked[1].replace(",", "")) == 2 * (sizes.warmup + sizes.walks)
    assert re.search(r"^note: store built by this run .* forgets from", done.stdout, re.MULTILINE)
    assert re.search(r"^peak RSS of the run: [\d,]+ MiB$", done.stdout, re.MULTILINE)
    assert not list(work.iterdir()), "the run left files behind"
    assert (cache / sizes.name / "meta.json").exists(), "the store was not cached"
