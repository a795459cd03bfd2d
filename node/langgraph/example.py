"""``python -m node.langgraph.example``: one LangGraph graph, no LLM, run on two machines of
one mesh (docs/langgraph.md §Example) — here two served nodes on this machine, on loopback.

Node A is initialised as the mesh authority and served; node B joins it by invite and is served
dialling A.  The same graph runs on each, over a ``MemlaneStore`` of its own node's data
directory (beside ``memlane serve``, as an application runs beside its node): on A it
remembers a user's facts, on B it is asked a question about that user and recalls them —
B's graph finds what A's stored, once A's serve has sent it over.  Prints each step; exits 0
only if B's graph found every fact, as A's graph stored it.

``--dir DIR`` keeps the two data directories in DIR (``a``, ``b``: new ones; default: a
temporary directory, removed).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from node.demo.nodes import Served, memlane
from node.demo.transcript import Steps
from node.langgraph.store import MemlaneStore

__all__ = ["Context", "Memory", "build_graph", "main"]

WORKSPACE = "team"
QUESTION = "when does Ada deploy?"
FOUND_WITHIN = 30.0  # seconds for B's graph to find A's facts (A's serve looks every second)
SERVE = ("--mcp-http", "127.0.0.1:0", "--health-listen", "127.0.0.1:0", "--discovery", "off")
SCOPES = ("--scope", "read:workspace", "--scope", "write:workspace")
FACTS: tuple[dict[str, Any], ...] = (
    {"topic": "editor", "text": "Ada writes in Helix with the dark theme", "confidence": 0.9},
    {"topic": "deploys", "text": "Ada deploys on Tuesdays, never on Fridays", "confidence": 0.8},
    {"topic": "coffee", "text": "Ada takes her coffee black", "confidence": 0.4},
)


class Memory(TypedDict, total=False):
    """The graph's state: facts to remember, a question, and what was recalled for it."""

    facts: list[dict[str, Any]]
    question: str
    recalled: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Context:
    """Who the graph runs for, and on which machine."""

    user: str
    machine: str


def remember(state: Memory, runtime: Runtime[Context]) -> Memory:
    """Store each fact under the user's namespace, keyed by its topic."""
    assert runtime.store is not None
    namespace = ("users", runtime.context.user)
    for fact in state.get("facts", []):
        runtime.store.put(namespace, fact["topic"], fact | {"by": runtime.context.machine})
    return {}


def recall(state: Memory, runtime: Runtime[Context]) -> Memory:
    """The user's facts held with some confidence, the most relevant to the question first."""
    assert runtime.store is not None
    found = runtime.store.search(
        ("users", runtime.context.user),
        query=state.get("question"),
        filter={"confidence": {"$gte": 0.5}},
    )
    return {"recalled": [item.value for item in found]}


def build_graph(store: MemlaneStore) -> CompiledStateGraph[Memory, Context, Memory, Memory]:
    """remember → recall, over ``store``: as a graph takes any ``BaseStore``."""
    graph = StateGraph(Memory, context_schema=Context)
    graph.add_node("remember", remember)
    graph.add_node("recall", recall)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    return graph.compile(store=store)


async def _mesh(base: Path, served: list[Served], steps: Steps) -> tuple[Served, Served]:
    """A and B, each served as it would be on its own machine; ``served`` holds each once it
    runs, so the caller stops what started even when a later step fails."""
    a, b = base / "a", base / "b"
    memlane("init", "--data", str(a))
    listen = ("--sync-listen", "127.0.0.1:0", "--join-listen", "127.0.0.1:0")
    served.append(node_a := await Served.start("a", a, *SERVE, *listen))
    steps.say(f"node A is the mesh authority, syncing at {node_a.shown['sync']}")
    invite = memlane("mesh", "invite", "--data", str(a), "--label", "b")
    memlane("init", "--data", str(b), "--join", invite, "--authority", node_a.shown["join"])
    served.append(node_b := await Served.start("b", b, *SERVE, "--peer", node_a.shown["sync"]))
    steps.say("node B joined by invite, and is served dialling A")
    return node_a, node_b


def _token(data: Path, principal: str) -> str:
    return memlane(
        "token",
        "create",
        "--data",
        str(data),
        "--principal",
        principal,
        "--workspace",
        WORKSPACE,
        *SCOPES,
    )


async def _recalled_on_b(store: MemlaneStore, question: str, want: int) -> list[dict[str, Any]]:
    """B's graph asked ``question`` until it recalls ``want`` facts."""
    graph, context = build_graph(store), Context("ada", "B")
    deadline = time.monotonic() + FOUND_WITHIN
    while True:
        out = await graph.ainvoke({"question": question}, context=context)
        recalled: list[dict[str, Any]] = out.get("recalled", [])
        if len(recalled) >= want or time.monotonic() > deadline:
            return recalled
        await asyncio.sleep(0.2)


async def _run(base: Path) -> bool:
    steps, served = Steps(), list[Served]()
    try:
        node_a, node_b = await _mesh(base, served, steps)
        with (
            MemlaneStore(node_a.data, _token(node_a.data, "planner")) as on_a,
            MemlaneStore(node_b.data, _token(node_b.data, "assistant")) as on_b,
        ):
            context = Context("ada", "A")
            out = await build_graph(on_a).ainvoke({"facts": list(FACTS)}, context=context)
            steps.say(
                f"A's graph remembered {len(FACTS)} facts about ada, and recalls "
                f"{len(out.get('recalled', []))} held with confidence ≥ 0.5"
            )
            started = time.monotonic()
            recalled = await _recalled_on_b(on_b, QUESTION, 2)
            steps.say(
                f"B's graph, asked {QUESTION!r}, recalls {len(recalled)} facts "
                f"{time.monotonic() - started:.1f} s later:"
            )
            for fact in recalled:
                print(f"   {fact['topic']}: {fact['text']} (stored on {fact['by']})", flush=True)
    finally:
        for node in reversed(served):
            await node.stop()
    want = [f | {"by": "A"} for f in FACTS if f["confidence"] >= 0.5]
    return sorted(recalled, key=lambda f: f["topic"]) == sorted(want, key=lambda f: f["topic"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m node.langgraph.example", description=__doc__)
    parser.add_argument("--dir", type=Path, default=None, help="keep the data directories here")
    args = parser.parse_args(argv)
    try:
        if args.dir is not None:
            args.dir.mkdir(parents=True, exist_ok=True)
            ok = asyncio.run(_run(args.dir))
        else:
            with tempfile.TemporaryDirectory(prefix="memlane-langgraph-") as tmp:
                ok = asyncio.run(_run(Path(tmp)))
    except (RuntimeError, TimeoutError) as exc:
        print(f"\nfailed: {exc}")
        ok = False
    print("\nexample", "passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
