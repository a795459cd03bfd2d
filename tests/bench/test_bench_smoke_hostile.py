"""The hostile-input benchmark stays runnable: a ``--quick`` run replays every attack against a
served node on loopback, small, and prints each one's figures against its bounds, with a
verdict on each, and the serve process stopped cleanly.

Nothing here looks at a figure: the full-size replay is for ``make bench``
(docs/benchmarks.md §Hostile input).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import hostile
from tests.bench.common import SMOKE, run_bench


def test_quick_run_prints_every_attack_with_its_bounds_and_verdicts(tmp_path: Path) -> None:
    done = run_bench("--quick", "--dir", str(tmp_path), "hostile")
    assert done.returncode == 0, done.stderr
    assert SMOKE in done.stdout.splitlines()[0]
    for attack in (*hostile.ATTACKS, hostile.PROCESS):
        lines = re.findall(
            rf"^{re.escape(attack)}\s.*\s(PASS|FAIL|\(info\))$", done.stdout, re.MULTILINE
        )
        assert "PASS" in lines or "FAIL" in lines, f"no bounded row for {attack!r}:\n{done.stdout}"
    assert re.search(r"^serve process\s+serve exit on SIGTERM\s+0\s", done.stdout, re.MULTILINE)
    assert "Traceback" not in done.stderr
