"""``memlane pending list`` and ``memlane pending clear`` through the command line
(docs/cli.md): per source its entries, bytes, oldest arrival and logs, control characters of
a source shown as escapes, the same as JSON; clearing by source and by age.  In-process
(tests/node/clikit.py)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

from node.node import Node
from tests.node.clikit import fails, ok, run, run_all
from tests.node.helpers import size, strangers

HOSTILE = "peer:\x1b]0;owned\x07\x1b[2J"  # a title change and a screen clear, if shown raw
HOUR = 3_600_000


async def fill(data: Path) -> dict[str, int]:
    """Two sources' waiting entries: one that arrived two hours ago, one now; their bytes."""
    now = time.time_ns() // 1_000_000
    sizes = {}
    for source, at, n in (("peer:old", now - 2 * HOUR, 2), (HOSTILE, now, 3)):
        async with Node.open(data, wall=lambda at=at: at) as node:
            entries = strangers(node.info.mesh, n)
            assert (await node.receive(entries, source=source)).pending == n
            sizes[source] = sum(map(size, entries))
    return sizes


def test_pending_list_shows_each_source_escaped_and_as_json(tmp_path: Path) -> None:
    data = tmp_path / "node"
    ok(run("init", "--data", data))
    empty = ok(run("pending", "list", "--data", data))
    assert empty.startswith("nothing waits in the pending area (at most 10,000 entries, 1,000")
    sizes = asyncio.run(fill(data))
    argv = ["pending", "list", "--data", str(data)]
    text, listed = run_all([argv, [*argv, "--json"]], tmp_path)
    lines = ok(text).splitlines()
    assert not {"\x1b", "\x07"} & set(ok(text))
    assert re.split(r" {2,}", lines[0]) == ["SOURCE", "ENTRIES", "BYTES", "OLDEST", "LOGS"]
    shown = {re.split(r" {2,}", line)[0]: re.split(r" {2,}", line)[1:] for line in lines[1:3]}
    assert shown["peer:\\x1b]0;owned\\x07\\x1b[2J"][::3] == ["3", "3"]
    assert shown["peer:old"][:2] == ["2", str(sizes["peer:old"])]
    assert lines[3].startswith(f"5 entries, {sum(sizes.values()):,} bytes waiting")
    answer = json.loads(ok(listed))
    assert answer["entries"] == 5
    assert answer["limits"]["pending_per_source"] == 1000
    by_source = {s["source"]: s for s in answer["sources"]}
    assert by_source[HOSTILE]["entries"] == 3  # JSON keeps the text exactly
    assert by_source["peer:old"]["bytes"] == sizes["peer:old"]
    instant = r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"
    assert re.fullmatch(instant, by_source["peer:old"]["oldest"])


def test_pending_clear_deletes_by_age_and_by_source(tmp_path: Path) -> None:
    data = tmp_path / "node"
    ok(run("init", "--data", data))
    asyncio.run(fill(data))
    assert "is not a duration" in fails(
        run("pending", "clear", "--older-than", "1y", "--data", data), 2
    )
    aged = ok(run("pending", "clear", "--older-than", "1h", "--data", data))
    assert aged == "cleared 2 entries from the pending area\n"
    answer = json.loads(ok(run("pending", "list", "--data", data, "--json")))
    assert [s["source"] for s in answer["sources"]] == [HOSTILE]
    other = json.loads(
        ok(run("pending", "clear", "--source", "peer:none", "--data", data, "--json"))
    )
    assert other == {"cleared": 0, "source": "peer:none", "older_than_ms": None}
    assert ok(run("pending", "clear", "--source", HOSTILE, "--data", data)).startswith("cleared 3")
    assert ok(run("pending", "list", "--data", data)).startswith("nothing waits")
