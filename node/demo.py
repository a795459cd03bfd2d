"""``make demo``: a node in a temporary directory, a few hundred entries written through the
Python API, an agent's session over MCP (``node.demo_agent``), the log's heads and the audit
feed printed, and the whole log verified.  Exits 0 only if every check holds."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from node.authority import Caller
from node.demo_agent import agent_session
from node.node import Node
from protocol.timefmt import format_instant

__all__ = ["main"]


async def _author(node: Node) -> bool:
    alice_t = await node.create_token("alice", "research", ["read:workspace", "write:workspace"])
    bob_t = await node.create_token("bob", "research", ["write:workspace", "admin:workspace"])
    alice, bob = await node.authenticate(alice_t.token), await node.authenticate(bob_t.token)
    writes = [
        node.e_write(alice, title=f"finding {i}", text=f"observation number {i}", tags=["demo"])
        for i in range(200)
    ]
    written = await asyncio.gather(*writes)
    first = written[0]["sr_id"]
    await node.e_correct(alice, sr_id=first, text="observation number 0, corrected", reason="typo")
    await node.e_adjust(bob, sr_id=first, tags=["demo", "reviewed"])
    await node.e_delete(bob, sr_id=written[1]["sr_id"])
    steps = [(await node.work_record(alice, summary=f"step {i}", tool="search", status="ok"))["id"]
             for i in range(100)]  # fmt: skip
    print("wrote 200 SRs (1 corrected, 1 adjusted, 1 deleted) and 100 episodes as alice/bob")
    return await _episodes(node, alice, steps)


async def _episodes(node: Node, alice: Caller, steps: list[str]) -> bool:
    """Amend the newest step, forget the third newest, and walk back from the newest: the
    walk stops where the forgotten one was, and says nothing about it."""
    await node.work_result(alice, id=steps[-1], status="done", task_result=1.0)
    await node.work_forget(alice, id=steps[-3])
    walk = await node.work_episode_chain(alice, id=steps[-1], k=5, response_format="concise")
    print("\nwork_episode_chain from the newest step (k=5, concise), the third newest forgotten:")
    for episode in walk["chain"]:
        print(f"  {episode['id']}  {episode['summary']:<8} {episode['status']:<4} "
              f"prev_id {episode.get('prev_id')}")  # fmt: skip
    print(f"  truncated: {walk['truncated']}")
    shown = [e["summary"] for e in walk["chain"]]
    return shown == ["step 99", "step 98"] and "prev_id" not in walk["chain"][-1]


async def _show(node: Node) -> None:
    reader = node.store.reader
    assert reader is not None
    print(f"\nnode {node.info.node_id}, mesh {node.info.mesh.hex()}")
    for log in await reader.select_logs():
        print(f"  log {log.writer.hex()[:16]}…/{log.epoch.hex()}  head seq {log.head_seq}  "
              f"id {log.head_id.hex()[:16] if log.head_id else '-'}…")  # fmt: skip
    events = await reader.select_audit(gt=0, limit=100_000)
    print(f"\naudit feed {node.info.feed_id}: {len(events)} events; the last five:")
    for ev in events[-5:]:
        print(f"  #{ev.seq:<4} {ev.event:<16} {format_instant(ev.at)}  {ev.subject or ''}")


async def _run(base: Path) -> bool:
    info = await Node.init(base / "node")
    print(f"initialised node {info.node_id} in {base / 'node'}")
    async with Node.open(base / "node") as node:
        walked = await _author(node)
        agent = await agent_session(node)
        await _show(node)
        report = await node.verify()
    print(f"\nlog verify: {'ok' if report.ok else 'FAILED'} — {report.entries} entries in "
          f"{report.logs} logs, every chain, signature and payload hash checked")  # fmt: skip
    for problem in report.problems:
        print(f"  {problem}")
    return agent and walked and report.ok and report.entries == 1 + 200 + 2 + 100 + 2 + 4


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="memlane-demo-") as tmp:
        ok = asyncio.run(_run(Path(tmp)))
    print("\ndemo", "passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
