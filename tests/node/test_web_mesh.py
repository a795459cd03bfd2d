"""The mesh page (docs/web.md §Pages), served by uvicorn on loopback and asked over real HTTP:
two real nodes of one mesh syncing over mutual TLS on loopback (``SyncService``, as ``memlane
serve`` runs it), and the first node's page shows the other as a live peer and both nodes'
logs with the heads each holds; a token without ``admin:workspace`` gets 403 and nothing of the
node, the same page whatever the node holds; the latest audit events are those e_audit shows
the caller, another workspace's left out."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from node.address import Listen
from node.mesh import service as sync_service
from node.mesh.service import SyncService
from node.node import Node
from tests.node.bundlekit import caller
from tests.node.helpers import CallerFactory
from tests.node.servekit import certified_mesh
from tests.node.synckit import FAST, converged
from tests.node.webkit import ask, served


async def _saved_live(node: Node, other: str) -> None:
    """Until the peer snapshot the node's service saved shows ``other`` live.  Saving it moves
    nothing a test can wait on (no new entry), so it is looked at as servekit's ``poll`` does,
    at the service's own interval (patched short)."""
    for _ in range(200):
        saved = json.loads((await node.reader().state(sync_service.PEERS_STATE)) or b"{}")
        if any(p["node_id"] == other and p["state"] == "live" for p in saved.get("peers", [])):
            return
        await asyncio.sleep(sync_service.LOOK_INTERVAL)
    pytest.fail(f"{other} not saved live")


async def _own_head(node: Node) -> tuple[int, str]:
    """The last seq and head entry of the node's own log, as it holds them."""
    (log,) = [r for r in await node.reader().select_logs() if r.writer == node.key.public]
    assert log.head_id is not None
    return log.head_seq, log.head_id.hex()


async def _two_nodes(dirs: dict[str, Path]) -> dict[str, object]:
    async with Node.open(dirs["one"]) as one, Node.open(dirs["two"]) as two:
        first, second = SyncService(one, options=FAST), SyncService(two, options=FAST)
        await first.start(Listen("127.0.0.1", 0), [])
        assert first.address is not None
        await second.start(None, [Listen(*first.address)])
        try:
            await one.e_write(await caller(one), title="from one", text="a")
            await two.e_write(await caller(two, principal="bob"), title="from two", text="b")
            await converged([one, two], [first.sync, second.sync])
            await _saved_live(one, two.info.node_id)
            admin = (await one.create_token("root", "team", ("admin:workspace",))).token
            reader = (await one.create_token("alice", "team", ("read:workspace",))).token
            async with served(one) as port:
                shown = await ask(port, "GET", "/mesh", cookie=f"memlane_token={admin}")
                refused = await ask(port, "GET", "/mesh", cookie=f"memlane_token={reader}")
            return {
                "page": shown,
                "refused": refused,
                "one": one.info.node_id,
                "two": two.info.node_id,
                "heads": [await _own_head(n) for n in (one, two)],
            }
        finally:
            await second.close()
            await first.close()


def test_the_mesh_page_of_two_syncing_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sync_service, "LOOK_INTERVAL", 0.05)  # the snapshot is saved sooner
    dirs = certified_mesh(tmp_path, ["one", "two"])
    seen = asyncio.run(_two_nodes(dirs))
    page, one, two = seen["page"], seen["one"], seen["two"]
    assert page.status == 200
    body = page.body
    assert f'node <code class="node-id">{one}</code>' in body
    logs = body[body.index("<h3>Logs</h3>") : body.index("<h3>Members</h3>")]
    for node_id, (seq, head), role in zip(
        (one, two), seen["heads"], (" (this node)", ""), strict=True
    ):
        assert re.search(
            rf"<code>{node_id}</code>{re.escape(role)}</td>\s*<td><code>[0-9a-f]+"
            rf'</code></td><td class="num">{seq}</td>\s*<td><code>{head}</code>',
            logs,
        ), (node_id, seq, head)
    assert "(authority)" in logs  # the authority's own log, which admitted two
    members = body[body.index("<h3>Members</h3>") : body.index("<h3>Peers</h3>")]
    assert f"<code>{one}</code> (this node)" in members
    assert f"<code>{two}</code>" in members
    peers = body[body.index("<h3>Peers</h3>") : body.index("<h3>Latest audit events</h3>")]
    assert "sync serving, listening at 127.0.0.1:" in peers
    assert re.search(
        rf"<code>{two}</code></td><td>[^<]*</td><td>inbound</td>\s*<td>live</td>", peers
    ), peers
    audit = body[body.index("<h3>Latest audit events</h3>") :]
    assert "<td>sr_synced</td>" in audit
    assert "<td>sr_written</td>" in audit
    refused = seen["refused"]
    assert refused.status == 403
    assert "this call needs the admin:workspace scope on workspace team" in refused.body
    for hidden in (one, two, "<table"):
        assert hidden not in refused.body


@pytest.mark.asyncio
async def test_without_admin_the_page_is_refused_alike_whatever_the_node_holds(
    node: Node, make_caller: CallerFactory
) -> None:
    reader = (await node.create_token("alice", "team", ("read:workspace",))).token
    writer = (await node.create_token("bob", "team", ("write:workspace", "read:workspace"))).token
    async with served(node) as port:
        empty = [
            await ask(port, "GET", "/mesh", cookie=f"memlane_token={t}") for t in (reader, writer)
        ]
        await node.e_write(await make_caller("bob"), title="<script>alert(1)</script>", text="x")
        await node.e_write(await make_caller("carol", workspace="elsewhere"), title="y", text="y")
        full = [
            await ask(port, "GET", "/mesh", cookie=f"memlane_token={t}") for t in (reader, writer)
        ]
    for before, after in zip(empty, full, strict=True):
        assert (before.status, after.status) == (403, 403)
        assert before.body == after.body
        assert node.info.node_id not in after.body
    assert "<script>" not in full[0].body


@pytest.mark.asyncio
async def test_the_latest_audit_events_are_the_callers_newest_first(
    node: Node, make_caller: CallerFactory
) -> None:
    """Sixty SRs of team with forty of another workspace between them: the admin of team is
    shown team's newest fifty, the others' none — e_audit's rule, counted back past them."""
    alice, carol = await make_caller("alice"), await make_caller("carol", workspace="elsewhere")
    team: list[str] = []
    for i in range(60):
        team.append((await node.e_write(alice, title=f"t{i}", text="a"))["sr_id"])
        if i % 3 == 0:
            for _ in range(2):
                await node.e_write(carol, title="other", text="b", visibility="private")
    admin = await make_caller("root", scopes=("admin:workspace",))
    audit = (await node.look("mesh", admin))["audit"]
    assert [(e["event"], e["subject"]) for e in audit] == [
        ("sr_written", sr) for sr in reversed(team[10:])
    ]
    page = await node.look("mesh", admin)
    assert page["node_id"] == node.info.node_id
    assert page["peers"] == []
    assert page["sync"] == {"serving": False, "listen": None, "at": None}
