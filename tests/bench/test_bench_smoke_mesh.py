"""The mesh benchmark stays runnable: a ``--quick`` run (one seed of a 12-node mesh, its
partial and its full run) prints each run's row, the ratios partial / full as information and
the convergence check with a verdict, and leaves nothing behind.

Nothing here looks at a figure: they are for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import mesh
from tests.bench._smoke import run_smoke

_NUMBER = r"[\d,]+(\.\d)?"


def test_quick_run_prints_every_run_ratio_and_check(tmp_path: Path) -> None:
    work = tmp_path / "work"
    done = run_smoke("mesh", "--dir", str(work), constants={"tests.bench.mesh.QUICK": mesh.QUICK})
    assert done.returncode == 0, done.stderr
    out = done.stdout
    nodes = mesh.QUICK.nodes
    for seed in mesh.QUICK.seeds:
        for mode in mesh.MODES:
            cells = rf"\s+{nodes}\s+\d+" + rf"\s+{_NUMBER}" * len(mesh.COLUMNS)
            row = rf"^seed {seed} {mode}{cells}$"
            assert re.search(row, out, re.MULTILINE), f"no row seed {seed} {mode} in\n{out}"
        ratios = r"\s+(\d+\.\d\d|-)" * len(mesh.RATIOS)
        assert re.search(rf"^seed {seed}{ratios}\s+\(info\)$", out, re.MULTILINE), out
    for name, _ in mesh.RATIOS:
        assert name in out, f"no ratio {name!r} in\n{out}"
    assert out.rstrip().endswith("every run converged: PASS"), out
    assert "QUICK" in out
    assert not list(work.iterdir()), "the run left files behind"
