"""``memlane windows list`` (docs/cli.md): the rows a caller's tool calls filed, as lines or as
the CallWindowRow's JSON, filtered by tool, turn and call, the latest row of each call, refusals
exiting 1 with the tool's text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from node.node import Node
from tests.node.clikit import fails, make_token, ok, run
from tests.node.windowkit import LA_NAME, NOW_TEXT, M

pytestmark = pytest.mark.asyncio


def context(call_id: str, turn: int, **more: object) -> dict[str, object]:
    return {"turn": turn, "toolCallId": call_id, "now": NOW_TEXT, "zone": LA_NAME} | more


async def test_windows_list(tmp_path: Path) -> None:
    data = tmp_path / "node"
    ok(run("init", "--data", data))
    token = make_token(data, "read:workspace")
    window = {"source": "answered", "mention": 0, "range": M}
    async with Node.open(data) as node:
        alice = await node.authenticate(token)
        await node.e_timeline(alice, action="list", turn=context("c1", 1, open=[[M]]))
        await node.e_timeline(alice, action="list", turn=context("c1", 1, windows=[window]))
        await node.e_timeline(alice, action="changes", since="2026-10-01", turn=context("c2", 2))

    def windows(*argv: str) -> str:
        return ok(run("windows", "list", "--data", data, "--token", token, *argv))

    lines = windows().splitlines()
    assert re.split(r" {2,}", lines[0]) == [
        "TURN",
        "TOOL CALL ID",
        "TOOL NAME",
        "HOW",
        "WHY/REFUSED",
        "ASKED",
    ]
    assert lines[1].split() == ["1", "c1", "e_timeline", "not-filled", "open-reading", "—"]
    assert lines[2].split()[:4] == ["1", "c1", "e_timeline", "filled"]
    assert lines[2].endswith(f"{M['from']} .. {M['to']}")
    assert lines[-1] == "page 1 (3 shown, no more)"
    latest = json.loads(windows("--latest", "--json"))
    assert [(r["toolCallId"], r["how"]) for r in latest["rows"]] == [
        ("c1", "filled"),
        ("c2", "model"),
    ]
    assert latest["rows"][1]["asked"] == {
        "from": "2026-10-01T00:00:00.001Z",
        "to": latest["rows"][1]["asked"]["to"],
    }
    assert [r["turn"] for r in json.loads(windows("--turn", "2", "--json"))["rows"]] == [2]
    assert json.loads(windows("--tool", "e_audit", "--json"))["rows"] == []
    refused = run("windows", "list", "--data", data, "--token", token, "--turn", "-1")
    assert fails(refused).strip() == "invalid turn: must be an integer from 0 to 9007199254740991"
