"""What ``memlane serve`` logs at ``info`` (docs/operations.md §Logs), read from the stderr of
real served nodes on loopback: a node joins the authority online, then the two sync.  The join
line names the node by its id (``xxxx-xxxx-xxxx-xxxx``), as everything else does; each side
logs its link opening and, when the nodes stop, closing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.node.servekit import connected, memlane, poll, serve, stop


def _lines(err: str) -> list[dict[str, Any]]:
    """The JSON log lines of a served node's stderr (not a terminal: JSON, one a line)."""
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


def _events(lines: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["event"] == event]


def _joined(authority: Path, data: Path, join_at: str) -> str:
    invite = memlane("mesh", "invite", "--data", str(authority)).stdout.strip()
    done = memlane("init", "--data", str(data), "--join", invite, "--authority", join_at, "--json")
    node_id: str = json.loads(done.stdout)["node_id"]
    return node_id


def test_info_logs_the_join_by_node_id_and_links_opening_and_closing(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    memlane("init", "--data", str(one))
    one_id = json.loads(memlane("mesh", "members", "--data", str(one), "--json").stdout)[0]
    first, shown = serve(one, "--sync-listen", "127.0.0.1:0", "--join-listen", "127.0.0.1:0")
    running = [first]
    try:
        two_id = _joined(one, two, shown["join"])
        second, _ = serve(two, "--peer", shown["sync"])
        running.append(second)
        poll("the link on two", lambda: connected(two, one_id["node_id"]))
        poll("the link on one", lambda: connected(one, two_id))
    finally:
        codes = [stop(proc) for proc in reversed(running)]
    (two_code, two_err), (one_code, one_err) = codes
    assert (one_code, two_code) == (0, 0), (one_err, two_err)
    on_one, on_two = _lines(one_err), _lines(two_err)

    assert [line["node"] for line in _events(on_one, "a node joined")] == [two_id]
    for lines, other, direction in (
        (on_one, two_id, "inbound"),
        (on_two, one_id["node_id"], "outbound"),
    ):
        opened = _events(lines, "sync link opened")
        assert [(e["peer"], e["direction"], e["level"]) for e in opened] == [
            (f"peer:{other}", direction, "info")
        ]
        closed = _events(lines, "sync link closed")
        assert [(e["peer"], e["level"]) for e in closed] == [(f"peer:{other}", "info")]
    assert _events(on_two, "sync link opened")[0]["address"] == shown["sync"]
