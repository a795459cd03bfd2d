"""The langgraph benchmark stays runnable: a ``--quick`` run (300 items, fewer gets and
searches than ``--quick``'s) prints every rate of both stores, every search's latencies of
both (find's of memlane alone), and every check with a verdict.

Nothing here looks at a figure: speed is for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from tests.extras import need

need("langgraph", module=True)

from tests.bench import langgraph  # noqa: E402
from tests.bench._smoke import run_smoke  # noqa: E402

_NUM = r"[\d,]+(\.\d+)?"
SMALL = replace(langgraph.QUICK, items=300, gets=200, searches=10, warmup=2)


def test_quick_run_prints_every_row_and_check(tmp_path: Path) -> None:
    work = tmp_path / "work"
    constants = {"tests.bench.langgraph.QUICK": SMALL}
    done = run_smoke("langgraph", "--dir", str(work), constants=constants)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "300 items in 100 namespaces" in out.splitlines()[0], out
    assert "QUICK" in out.splitlines()[0], out
    stores = (langgraph.MEMLANE, langgraph.SQLITE)
    for label, calls in ((langgraph.PUT, 300), (langgraph.GET, 200)):
        for store in stores:
            row = rf"^{label}\s+{_NUM}\s+{store}\s+{calls}$"
            assert re.search(row, out, re.M), f"no {label} row of {store} in\n{out}"
    for label in (*langgraph.SEARCHES, langgraph.FIND):
        for store in stores if label != langgraph.FIND else stores[:1]:
            row = rf"^{re.escape(label)}\s+{store}\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+10$"
            assert re.search(row, out, re.M), f"no {label!r} of {store} in\n{out}"
    for check in langgraph.CHECKS:
        row = rf"^{re.escape(check)}\s+{_NUM}\s+\S*.*\s(PASS|FAIL|\(info\))$"
        assert re.search(row, out, re.M), f"no check {check!r} in\n{out}"
    assert re.search(r"^peak RSS of the run: [\d,]+ MiB$", out, re.M)
    assert not list(work.iterdir()), "the run left files behind"
