"""One peer node, one row (docs/mesh.md §The peer table): two ``memlane serve`` processes on
loopback that each name the other as a static peer both dial, and the two links meet; one is
kept.  ``memlane peers`` then lists the other node once, with the direction of the link in use;
``/metrics`` has one series per peer node in every ``memlane_peer_*`` family (Prometheus
refuses a scrape that repeats one), and ``/healthz`` counts peer nodes, not connection
records.  Also the table's fold on its own: the records of one node key, their counts, their
newest error."""

from __future__ import annotations

import json
import re
import socket
from collections import Counter
from typing import Any

import pytest

from node.mesh.peers import DuplicateLink, PeerState, PeerTable
from tests.node.servekit import get, memlane, peers, poll, serve, setup, stop

_SAMPLE = re.compile(r"^([a-z_]+)(\{[^}]*\})? (\d+)$")


def free_port() -> int:
    """A loopback port nothing listens on now (the node started next binds it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def series(base: str) -> Counter[str]:
    """Every sample's name and labels in a scrape of ``/metrics``, counted."""
    status, text = get(base + "/metrics")
    assert status == 200
    found: Counter[str] = Counter()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            match = _SAMPLE.match(line)
            assert match, line
            found[match[1] + (match[2] or "")] += 1
    return found


def settled(data: Any, other: str, health: str) -> dict[str, Any] | None:
    """The one row of ``other`` on this node, once the node shows just that peer, connected,
    and its health counts one known, connected peer node."""
    rows = peers(data)["peers"]
    if len(rows) != 1 or rows[0]["node_id"] != other or rows[0]["state"] != "live":
        return None
    status, body = get(health + "/healthz")
    if status != 200 or json.loads(body)["peers"] != {"known": 1, "connected": 1}:
        return None
    row: dict[str, Any] = rows[0]
    return row


def test_two_nodes_dialling_each_other_show_one_row_and_one_series(tmp_path):
    site = setup(tmp_path)
    one_at, two_at = (f"127.0.0.1:{free_port()}" for _ in range(2))
    first, one = serve(site["one"], "--sync-listen", one_at, "--peer", two_at)
    running = [first]
    try:
        second, two = serve(site["two"], "--sync-listen", two_at, "--peer", one_at)
        running.append(second)
        assert (one["sync"], two["sync"]) == (one_at, two_at)
        row_one = poll(
            "one row for two on one", lambda: settled(site["one"], site["two_id"], one["health"])
        )
        row_two = poll(
            "one row for one on two", lambda: settled(site["two"], site["one_id"], two["health"])
        )
        # One link is kept: dialled by one node, so outbound there and inbound on the other.
        assert {row_one["direction"], row_two["direction"]} == {"inbound", "outbound"}
        dialled = row_one if row_one["direction"] == "outbound" else row_two
        assert dialled["address"] in (one_at, two_at)
        for row in (row_one, row_two):  # the link not kept is no error of the node's
            assert "already connected" not in (row["last_error"] or "")
            assert "replaced by" not in (row["last_error"] or "")

        for shown, other, row in ((one, site["two_id"], row_one), (two, site["one_id"], row_two)):
            scraped = series(shown["health"])
            assert [name for name, count in scraped.items() if count > 1] == []
            peer_series = [s for s in scraped if s.startswith("memlane_peer_")]
            assert all(f'peer="{other}"' in s for s in peer_series)
            link = f'memlane_peer_connected{{peer="{other}",connection="{row["direction"]}"}}'
            assert scraped[link] == 1
            for family in (
                "memlane_peer_received_entries_total",
                "memlane_peer_sent_entries_total",
                "memlane_peer_rounds_total",
                "memlane_peer_connected",
            ):
                assert sum(1 for s in peer_series if s.startswith(family + "{")) == 1, family
            lag = [s for s in peer_series if s.startswith("memlane_peer_lag_entries{")]
            assert sorted(lag) == [
                f'memlane_peer_lag_entries{{peer="{other}",direction="{side}"}}'
                for side in ("in", "out")
            ]
    finally:
        codes = [stop(proc) for proc in reversed(running)]
    for code, err in codes:
        assert code == 0, err


def row_of(data: Any, address: str, state: str) -> dict[str, Any] | None:
    """The row dialled at ``address`` on this node once it is in ``state`` and says why (or,
    live, whatever it says)."""
    for row in peers(data)["peers"]:
        if (row["address"], row["state"]) == (address, state) and (
            state == "live" or row["last_error"]
        ):
            found: dict[str, Any] = row
            return found
    return None


def test_a_links_last_error_shows_with_its_time_until_the_link_is_live(tmp_path):
    site = setup(tmp_path)
    two_at = f"127.0.0.1:{free_port()}"
    first, _ = serve(site["one"], "--peer", two_at)  # two is down: the dial fails
    running = [first]
    try:
        failed = poll("a failed dial on one", lambda: row_of(site["one"], two_at, "backoff"))
        assert failed["last_error"] == f"cannot connect to {two_at}: Connection refused"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", failed["last_error_at"])
        shown = memlane("peers", "--data", str(site["one"])).stdout
        assert re.search(rf"cannot connect to {two_at}: Connection refused \(\d+ s ago\)", shown)

        second, _ = serve(site["two"], "--sync-listen", two_at)
        running.append(second)
        live = poll("the link live on one", lambda: row_of(site["one"], two_at, "live"))
        assert (live["node_id"], live["last_error"], live["last_error_at"]) == (
            site["two_id"],
            None,
            None,
        )
        assert "cannot connect" not in memlane("peers", "--data", str(site["one"])).stdout
    finally:
        codes = [stop(proc) for proc in reversed(running)]
    for code, err in codes:
        assert code == 0, err


def test_the_records_of_one_node_fold_into_one() -> None:
    own, theirs = b"\x03" * 32, b"\x02" * 32  # theirs is smaller: the link it dials is kept
    table = PeerTable(own)
    dialled = table.dialled("127.0.0.1:7411")
    assert [(n.node_id, n.state, n.direction) for n in table.nodes()] == [
        (None, PeerState.BACKOFF, "outbound")  # a peer to dial, its node not known yet
    ]
    inbound = table.open(None, "127.0.0.1:50000")
    assert len(table.nodes()) == 1  # a connection that has not said hello is no node yet
    table.identify(inbound, theirs)
    inbound.received, inbound.rounds = 5, 1
    table.open(dialled, dialled.address)
    with pytest.raises(DuplicateLink):
        table.identify(dialled, theirs)
    dialled.received = 3  # what its earlier connections brought
    table.closed(dialled, "already connected to node …")
    (node,) = table.nodes()
    assert (node.node_id, node.state, node.direction, node.address) == (
        inbound.node_id,
        PeerState.SYNCING,
        "inbound",
        "127.0.0.1:50000",
    )
    assert (node.received, node.rounds, node.connected) == (8, 1, True)
    assert node.last_error is None  # the link not kept is no error of the node's
    assert dialled.last_error is None

    table.closed(inbound, "the connection was cut")
    (node,) = table.nodes()  # the dialled record speaks for it now: it will dial again
    assert (node.state, node.direction, node.connected) == (PeerState.BACKOFF, "outbound", False)
    assert node.last_error == "the connection was cut"
    table.forget(inbound)
    (node,) = table.nodes()
    assert (node.received, node.rounds) == (8, 1)  # counters never go back
    assert node.last_error == "the connection was cut"
    table.forget(dialled)
    assert table.nodes() == []
