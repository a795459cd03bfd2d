"""``make demo`` runs ``python -m node.demo``: three served nodes that find each other by
zeroconf, an agent writing on A and one reading on C over MCP, B restarted mid-way.  Its
transcript numbers each step once, in order, and shows a call's arguments whole or cut after a
whole word with an ellipsis."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from node.demo.transcript import ARGUMENTS_SHOWN, arguments
from node.tools.catalog import by_name

_STEP = re.compile(r"^(\d+)\. ", re.M)
_CALL = re.compile(r"^   agent on [A-C] → (\w+) (.*)$", re.M)
_CHAIN = re.compile(r"^     \S+  (.*)$", re.M)  # an episode of the chain, its summary whole


def transcript_problems(out: str) -> list[str]:
    """What is wrong with the transcript's numbering and its calls' arguments."""
    numbers = [int(n) for n in _STEP.findall(out)]
    problems = [] if numbers == list(range(1, len(numbers) + 1)) else [f"steps {numbers}"]
    notes = {w for summary in _CHAIN.findall(out) for w in re.findall(r"\w+", summary)}
    for tool, shown in _CALL.findall(out):
        words = notes | set(_argument_names(tool))
        problems += [f"{shown!r}: {why}" for why in _cut_problems(shown, words)]
    return problems


def _argument_names(tool: str) -> list[str]:
    spec = by_name(tool)
    return [] if spec is None else list(spec.input_schema.get("properties", {}))


def _cut_problems(shown: str, words: set[str]) -> list[str]:
    if len(shown) > ARGUMENTS_SHOWN:
        return ["too long"]
    try:
        json.loads(shown)
        return []  # whole
    except json.JSONDecodeError:
        pass
    if not shown.endswith("…"):
        return ["cut without an ellipsis"]
    last = re.search(r"(\w+)…$", shown)
    if last is not None and last[1] not in words:
        return [f"cut mid-word ({last[1]!r})"]
    return []


def test_long_arguments_are_cut_after_a_whole_word():
    note = "rollback plan: revert TLS, drain the canary"
    shown = arguments({"title": note, "text": note, "tags": ["gateway"]})
    assert shown == f'{{"title": "{note}", "text": "rollback plan…'
    assert arguments({"summary": note}) == json.dumps({"summary": note})
    assert arguments({"k": "abcdefgh ijklmnop"}, limit=16) == '{"k": "abcdefgh…'
    steps = f"1. a\n   agent on A → e_write {shown}\n     0193  {note}\n2. b\n"
    assert transcript_problems(steps) == []
    cut_mid_word = '{"title": "rollback plan: revert TLS, drain the canary", "text": "rollback pl'
    numbered_twice = f"1. a\n2. b\n2. c\n   agent on A → e_write {cut_mid_word}\n"
    assert transcript_problems(numbered_twice) == [
        "steps [1, 2, 2]",
        f"{cut_mid_word!r}: cut without an ellipsis",
    ]


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
    assert "\n9. log verify on A, B and C: " in out
    assert "a chain of 4 episodes" in out
    verified = re.findall(r"ok \((\d+) entries in (\d+) logs\)", out)
    assert len(verified) == 3
    assert len(set(verified)) == 1
    assert transcript_problems(out) == []
