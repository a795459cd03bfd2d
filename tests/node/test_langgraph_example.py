"""docs/langgraph.md §Example runs ``python -m node.langgraph.example``: two served nodes of one
mesh, a graph on each over a ``MemlaneStore`` of its own node; B's graph recalls what A's stored.
Run here exactly so (with ``--dir``, to look at B's data directory after): it exits 0, prints
its steps, and B holds the facts as entries A's node key signed — they came by sync, not from a
write on B.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

from tests.extras import need

need("langgraph", module=True)

from node.langgraph.example import FACTS, QUESTION  # noqa: E402
from node.node import Node  # noqa: E402
from node.views.items import item_id  # noqa: E402
from protocol.kinds import decode_payload  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


async def _writers_of_facts(data: Path) -> tuple[bytes, dict[str, set[bytes]]]:
    """The node's own key, and for each fact's topic the writers of its item's entries."""
    ids = {item_id("team", ("users", "ada"), f["topic"]): f["topic"] for f in FACTS}
    writers: dict[str, set[bytes]] = {}
    async with Node.open(data) as node:
        for entry in await node.entries():
            if entry.header.kind == "sr.put" and entry.payload is not None:
                topic = ids.get(decode_payload("sr.put", entry.payload)["sr_id"])
                if topic is not None:
                    writers.setdefault(topic, set()).add(entry.header.writer)
        return node.key.public, writers


def test_the_example_runs_as_the_docs_say(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "node.langgraph.example", "--dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert [int(n) for n in re.findall(r"^(\d+)\. ", out, re.M)] == [1, 2, 3, 4], out
    assert f"B's graph, asked {QUESTION!r}, recalls 2 facts" in out
    for fact in FACTS:
        shown = f"   {fact['topic']}: {fact['text']} (stored on A)" in out
        assert shown == (fact["confidence"] >= 0.5), out
    assert out.rstrip().endswith("example passed")

    a_key, _ = asyncio.run(_writers_of_facts(tmp_path / "a"))
    b_key, on_b = asyncio.run(_writers_of_facts(tmp_path / "b"))
    assert a_key != b_key
    assert on_b == {f["topic"]: {a_key} for f in FACTS}
