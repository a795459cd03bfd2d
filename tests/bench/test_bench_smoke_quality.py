"""The quality benchmark stays runnable: a ``--quick`` run on the LoCoMo split (when it is at
its default place) prints every retriever's figures, every check with a verdict, and the peak
RSS; without data it says where it looked, in one line, and exits non-zero.

Nothing here looks at a figure: recall is for ``make bench`` (docs/benchmarks.md).  The data
is never copied into the repository; these tests read it where it lies.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.bench import quality
from tests.bench._smoke import locomo
from tests.bench.common import run_bench

_FIGURE = r"(\d\.\d{3}|—)"  # a mean, or a dash for a category without questions


def _rows(label: str, metrics: tuple[str, ...], lines: list[str]) -> list[str]:
    """The metrics of ``label`` with no line of figures in ``lines``."""
    cells = r"\s+".join([_FIGURE] * (len(quality.CATEGORIES) + 1))
    return [
        m
        for m in metrics
        if not any(re.match(rf"{re.escape(label)}\s+{re.escape(m)}\s+{cells}", x) for x in lines)
    ]


def test_quick_run_prints_every_row_and_check(tmp_path: Path) -> None:
    data = locomo()
    done = run_bench("--quick", "--dir", str(tmp_path), "--locomo", str(data), "quality")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    memlane = quality.PAGE_METRICS + quality.RANK_METRICS
    assert _rows(quality.DEFAULT, memlane, lines) == [], done.stdout
    for label, _ in quality.RAW:
        assert _rows(label, quality.RANK_METRICS, lines) == [], done.stdout
    for name, _ in quality.CONFIGS[1:]:  # figures, or a row saying it is not available
        assert any(x.startswith(name) for x in lines), f"no row {name!r} in\n{done.stdout}"
    for label in quality.labels()["checks"]:
        check = re.compile(rf"{re.escape(label)}\s+\S.*\s(PASS|FAIL|\(info\))$")
        assert any(check.match(x) for x in lines), f"no check {label!r} in\n{done.stdout}"
    assert "QUICK" in lines[0]
    assert re.search(r"^peak RSS of the run: [\d,]+ MiB$", done.stdout, re.MULTILINE)
    assert re.search(r"^note: the run took [\d.]+ s$", done.stdout, re.MULTILINE)
    assert not list(tmp_path.iterdir()), "the run left files behind"


@pytest.mark.parametrize("where", ["empty", "absent"])
def test_without_data_it_says_where_it_looked(tmp_path: Path, where: str) -> None:
    data = tmp_path / "locomo"
    if where == "empty":
        data.mkdir()
    done = run_bench("--quick", "--dir", str(tmp_path / "work"), "--locomo", str(data), "quality")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.strip() == (
        f"quality: no LoCoMo conversations (*.json) in {data}; point --locomo DIR or "
        "MEMLANE_LOCOMO at the split"
    )
    assert "Traceback" not in done.stderr
