"""``make demo`` runs ``python -m node.demo``: three served nodes that find each other by
zeroconf, an agent writing on A and one reading on C over MCP, B restarted mid-way."""

from __future__ import annotations

import re
import subprocess
import sys


def test_the_demo_passes_and_tells_what_happens():
    result = subprocess.run(
        [sys.executable, "-m", "node.demo"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, (result.stdout, result.stderr)
    out = result.stdout
    assert out.rstrip().endswith("demo passed")
    assert "found each other by zeroconf" in out
    assert "agent on A → work_record" in out
    assert "agent on C → work_episode_chain" in out
    stopped = re.search(r"node B stops \(SIGTERM\) holding (\d+) entries", out)
    caught_up = re.search(r"A, B and C hold (\d+) entries", out)
    assert stopped
    assert caught_up
    assert int(caught_up[1]) > int(stopped[1])  # B had missed entries, and caught up
    assert "C's agent reads: 4 SRs listed, 4 new since" in out
    assert "a chain of 4 episodes" in out
    verified = re.findall(r"ok \((\d+) entries in (\d+) logs\)", out)
    assert len(verified) == 3
    assert len(set(verified)) == 1
