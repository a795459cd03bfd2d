"""The walk benchmark stays runnable: a ``--quick`` run prints both counts with a verdict and
the files each walk ran, and the store's module count.  Nothing here looks at a figure."""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench.common import run_bench


def test_quick_run_prints_both_walks_and_their_files(tmp_path: Path) -> None:
    done = run_bench("--quick", "--dir", str(tmp_path), "walk")
    assert done.returncode == 0, done.stderr
    for label in ("e_write over MCP HTTP", "one received batch"):
        row = rf"^{re.escape(label)}: files of .*\s\d+\s+<= \d+\s+(PASS|FAIL)$"
        assert re.search(row, done.stdout, re.MULTILINE), f"no check {label!r} in\n{done.stdout}"
    assert re.search(r"^modules of node/store/\s+\d+\s+\(info\)$", done.stdout, re.MULTILINE)
    write = re.search(r"^note: e_write: (.*)$", done.stdout, re.MULTILINE)
    receive = re.search(r"^note: receive: (.*)$", done.stdout, re.MULTILINE)
    assert write, done.stdout
    assert {"node/tools/srs.py", "node/store/store.py"} <= set(write[1].split())
    assert receive, done.stdout
    assert "node/store/ingest.py" in receive[1].split()
    assert not list(tmp_path.iterdir()), "the run left files behind"
