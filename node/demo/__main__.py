"""``make demo``: three nodes on this machine, each a real ``memlane serve`` process on loopback.

A is initialised as the mesh authority; B and C join it by invite.  With no static peers, the
three find each other by zeroconf and sync over mutual TLS.  An agent on A writes SRs and
episodes over MCP; B is stopped half-way and restarted, and catches up; an agent on C reads
everything back over MCP (e_timeline list and changes, the episode chain).  Finally every
log is verified and the three must hold the same entries.  Prints each step; exits 0 only if
every check holds.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from node.demo.agent import Agent
from node.demo.nodes import Served, memlane, until
from node.demo.transcript import Steps
from node.node import system_wall
from protocol.timefmt import format_instant

__all__ = ["main"]

CONFIG = '[discovery]\ninterfaces = ["127.0.0.1"]\n'  # zeroconf on loopback only
SERVE = (
    "--sync-listen",
    "127.0.0.1:0",
    "--mcp-http",
    "127.0.0.1:0",
    "--health-listen",
    "127.0.0.1:0",
    "--discovery",
    "on",
)
SCOPES = ("--scope", "read:workspace", "--scope", "write:workspace")


def _token(data: Path) -> str:
    return memlane(
        "token",
        "create",
        "--data",
        str(data),
        "--principal",
        "scout",
        "--workspace",
        "research",
        *SCOPES,
    )


async def _form_mesh(base: Path, steps: Steps) -> dict[str, Served]:
    nodes: dict[str, Served] = {}
    a = base / "a"
    memlane("init", "--data", str(a))
    a.joinpath("config.toml").write_text(CONFIG)
    nodes["a"] = await Served.start("a", a, *SERVE, "--join-listen", "127.0.0.1:0")
    steps.say(
        f"node A ({nodes['a'].node_id}) is the mesh authority, accepting joins at "
        f"{nodes['a'].shown['join']}"
    )
    for name in ("b", "c"):
        data = base / name
        invite = memlane("mesh", "invite", "--data", str(a), "--label", name)
        memlane(
            "init", "--data", str(data), "--join", invite, "--authority", nodes["a"].shown["join"]
        )
        data.joinpath("config.toml").write_text(CONFIG)
        nodes[name] = await Served.start(name, data, *SERVE)
        steps.say(f"node {name.upper()} ({nodes[name].node_id}) joined by invite")
    await until(_all_linked, nodes)
    steps.say("no static peers: the three found each other by zeroconf and linked over TLS")
    return nodes


async def _all_linked(nodes: dict[str, Served]) -> bool:
    counts = [await n.metric("memlane_open_connections") for n in nodes.values()]
    return all(c == 2 for c in counts)


async def _converged(nodes: dict[str, Served]) -> bool:
    held = {await n.metric("memlane_entries") for n in nodes.values()}
    return len(held) == 1


async def _run(base: Path) -> bool:
    steps = Steps()
    nodes = await _form_mesh(base, steps)
    try:
        writer = Agent("A", nodes["a"].shown["mcp_http"], _token(nodes["a"].data))
        reader = Agent("C", nodes["c"].shown["mcp_http"], _token(nodes["c"].data))
        async with writer, reader:
            since = format_instant(system_wall() - 1000)  # a second before the writes
            first = await writer.work(
                [
                    "gateway latency rose after the TLS change",
                    "rollback plan: revert TLS, drain the canary",
                ]
            )
            steps.say("A's agent wrote 2 SRs and 2 episodes over MCP")
            await until(_converged, nodes)
            held = await nodes["b"].metric("memlane_entries")
            steps.say(f"node B stops (SIGTERM) holding {held} entries; A's agent goes on writing")
            await nodes["b"].stop()
            second = await writer.work(["canary drained", "TLS change reverted"])
            print("   … and 2 more of each while B was down")
            nodes["b"] = await nodes["b"].restart()
            await until(_converged, nodes)
            steps.say(
                f"node B restarted and caught up: A, B and C hold "
                f"{await nodes['a'].metric('memlane_entries')} entries"
            )
            ok = await reader.read_back(since, first + second, steps)
    finally:
        for node in nodes.values():
            await node.stop()
    verified = [node.verify() for node in nodes.values()]
    steps.say(f"log verify on A, B and C: {', '.join(verified)}")
    return ok and all(v.startswith("ok") for v in verified) and len(set(verified)) == 1


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="memlane-demo-") as tmp:
        try:
            ok = asyncio.run(_run(Path(tmp)))
        except (RuntimeError, TimeoutError) as exc:
            print(f"\nfailed: {exc}")
            ok = False
    print("\ndemo", "passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
