"""``make demo`` runs ``python -m node.demo``: it must pass, and show the agent's session."""

from __future__ import annotations

import subprocess
import sys


def test_the_demo_passes_and_shows_an_agent_session():
    result = subprocess.run(
        [sys.executable, "-m", "node.demo"], capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout, result.stderr)
    out = result.stdout
    assert out.rstrip().endswith("demo passed")
    assert "MCP over streamable HTTP at http://127.0.0.1:" in out
    assert "12 tools: e_timeline, e_audit, work_episode_chain" in out
    assert "chain: ['wrote the rollback plan', 'measured the gateway']" in out
    assert "refused: {'error': 'invalid k: must be an integer from 1 to 200'}" in out
    assert "log verify: ok" in out
