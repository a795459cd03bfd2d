"""The start-up benchmark stays runnable: a ``--quick`` run prints each command's row beside
``python -c pass`` and the bound on each command it bounds, with a verdict.

Nothing here looks at a figure: speed is for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import startup
from tests.bench.common import run_bench

_MS = r"[\d,]+\.\d+"


def test_quick_run_prints_every_command_and_its_bound(tmp_path: Path) -> None:
    done = run_bench("--quick", "--dir", str(tmp_path), "startup")
    assert done.returncode == 0, done.stderr
    for name in startup.COMMANDS:
        row = rf"^{re.escape(name)}\s+{_MS}\s+{_MS}\s+{_MS}\s+{_MS}\s+\d+\.\d\d\s+3\s"
        assert re.search(row, done.stdout, re.MULTILINE), f"no row {name!r} in\n{done.stdout}"
    for name in startup.BOUNDED:
        bound = rf"^{re.escape(name)}: median\s+{_MS}\s+≤ 500 ms\s+(PASS|FAIL)$"
        assert re.search(bound, done.stdout, re.MULTILINE), f"no bound for {name!r}"
