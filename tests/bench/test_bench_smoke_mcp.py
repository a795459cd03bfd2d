"""The MCP benchmark stays runnable: a ``--quick`` run (on a smoke store, ``_smoke.MCP``,
built into a temporary cache; two clients 0.3 s per era) prints the in-process row, every
HTTP row (memlane's and the SDK floor's) with its figures, the ratios with a verdict, and the
check that every HTTP client's answer equals the in-process one.

Nothing here looks at a figure: speed is for ``make bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import mcp
from tests.bench._smoke import MCP, run_smoke

_NUM = r"[\d,]+(\.\d+)?"


def test_quick_run_prints_every_row_the_ratios_and_the_check(tmp_path: Path) -> None:
    cache, work = tmp_path / "cache", tmp_path / "work"
    constants = {"tests.bench.mcp.QUICK": MCP}
    done = run_smoke("mcp", "--dir", str(work), constants=constants, cache=cache)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    sizes = MCP
    labels = mcp.labels(sizes)
    for label in labels["rows"]:
        row = re.compile(
            rf"{re.escape(label)}\s+{_NUM}\s+[\d,]+\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+[\d,]+ MiB\s+\S"
        )
        assert any(row.match(line) for line in lines), f"no row {label!r} in\n{done.stdout}"
    target = mcp.floor_ratio_label(mcp.TARGET_ERA[1], mcp.TARGET_ERA[0])
    assert target in labels["checks"]
    for label in labels["checks"][:-1]:  # the same-answer floor, SDK clients: the target
        verdict = r"≥ 0\.7\s+(PASS|FAIL)" if label == target else r"\(info\)\s+\(info\)"
        check = re.compile(rf"{re.escape(label)}\s+\d+\.\d+\s+{verdict}$")
        assert any(check.match(line) for line in lines), f"no ratio {label!r} in\n{done.stdout}"
    # Correctness, not speed: every HTTP client's first answer equals the in-process answer.
    answers = sizes.clients * len(sizes.modes)
    assert re.search(
        rf"^{mcp.SAME_ANSWERS}\s+{answers} of {answers}\s+all\s+PASS$", done.stdout, re.MULTILINE
    ), done.stdout
    assert "MISMATCH" not in done.stdout
    for mode in sizes.modes:  # each era's clients spoke their protocol
        label = re.escape(mcp.http_label(sizes, mode))
        assert re.search(
            rf"^{label}\s.*\s20\d\d-\d\d-\d\d; CPU a call: server", done.stdout, re.MULTILINE
        ), done.stdout
    assert re.search(r"^peak RSS of the run: [\d,]+ MiB$", done.stdout, re.MULTILINE)
    assert re.search(r"^note: store made by this run", done.stdout, re.MULTILINE)
    assert not list(work.iterdir()), "the run left files behind"
    assert (cache / f"{sizes.store.name}-{sizes.store.small}" / "meta.json").exists(), "not cached"
