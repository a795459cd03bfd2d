"""The fleet benchmark stays runnable, and its small run is the fleet's check in ``make test``:
three served nodes in network namespaces, two agents on each over MCP, every fault of the
nemesis once (a kill -9, a pause, a partition, halves, a split, packet loss, a full disk).
It fails if anything acknowledged is missing on any node, if the nodes do not come to one
frontier and the same answers, or if an error is not explained by a fault
(tests/node/test_fleet_smoke.py shows, in detail, that a partition cuts).  The figures are for
``make bench`` (docs/benchmarks.md §fleet)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench._fleet_faults import KINDS
from tests.bench.common import SMOKE, run_bench
from tests.node.netns import network_or_skip


def test_quick_run_loses_nothing_and_converges_through_every_fault(tmp_path: Path) -> None:
    network_or_skip()
    done = run_bench("--quick", "--dir", str(tmp_path), "fleet")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert SMOKE in out.splitlines()[0]
    checks = re.findall(r"^(\S.*?)\s{2,}.*\s(PASS|FAIL|\(info\))$", out, re.MULTILINE)
    assert len(checks) >= 10, out
    assert [label for label, v in checks if v == "FAIL"] == [], out
    assert re.search(r"^acknowledged writes missing on some node\s+0\s+0\s+PASS$", out, re.M), out
    faults = dict(re.findall(r"^(\w+) \S+\s+\d+\s+[\d.]+\s+(.+?)\s+[\d.]+$", out, re.MULTILINE))
    assert set(faults) == set(KINDS), out
    acknowledged = re.search(r"acknowledged: (\d+) SR writes .* and (\d+) episodes", out)
    assert acknowledged, out
    assert int(acknowledged[1]) > 0, out
    assert int(acknowledged[2]) > 0, out
    assert "Traceback" not in done.stderr
