"""Discovery by zeroconf (docs/operations.md §Discovery): ``memlane serve`` processes on
loopback, no static peers, find the nodes of their mesh through real multicast DNS and converge;
a node of another mesh advertising on the same network is ignored, and refused when it dials
in.  Plus the pure parts: what a resolved service counts as, and what a listener advertises."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest

from node.address import Listen
from node.mesh.candidates import Candidates
from node.mesh.discovery import Sighting, advertised_addresses, sighting
from node.mesh.peers import PeerTable
from node.mesh.service import DiscoverySettings, SyncService
from node.node import Node
from node.refusals import REFUSALS
from tests.node.mcpkit import TIMEOUT
from tests.node.servekit import (
    Advertiser,
    certified_mesh,
    closed_port,
    connected,
    issue,
    memlane,
    node_id_of,
    peers,
    poll,
    serve,
    setup,
    stop,
)

T = TypeVar("T")
LOOPBACK_ONLY = '[discovery]\ninterfaces = ["127.0.0.1"]\n'
DISCOVER = ("--sync-listen", "127.0.0.1:0", "--discovery", "on")


def timeline_ids(data: Path, token: str) -> set[str]:
    listed = memlane("timeline", "list", "--data", str(data), "--token", token, "--json").stdout
    return {row["sr_id"] for row in json.loads(listed)["results"]}


@pytest.mark.parametrize("count", [2, 3])
def test_served_nodes_find_each_other_and_converge(tmp_path, count):
    names = ["one", "two", "three"][:count]
    dirs = certified_mesh(tmp_path, names)
    ids = {name: asyncio.run(node_id_of(dirs[name])) for name in names}
    writer = asyncio.run(issue(dirs["one"], "alice", ["read:workspace", "write:workspace"]))
    reader = asyncio.run(issue(dirs[names[-1]], "bob", ["read:workspace"]))
    running = []
    try:
        for name in names:
            (dirs[name] / "config.toml").write_text(LOOPBACK_ONLY)
            proc, _ = serve(dirs[name], *DISCOVER)
            running.append(proc)
        for a in names:  # every pair linked, found by zeroconf alone
            for b in names:
                if a != b:
                    poll(f"{b} on {a}'s table", lambda a=a, b=b: connected(dirs[a], ids[b]))
        written = json.loads(
            memlane(
                "write",
                "--data",
                str(dirs["one"]),
                "--token",
                writer,
                "--title",
                "found by zeroconf",
                "--json",
            ).stdout
        )
        last = dirs[names[-1]]
        poll("the SR on the last node", lambda: written["sr_id"] in timeline_ids(last, reader))
        code, err = stop(running.pop())  # its service goes: the others stop dialling it

        def dropped() -> bool:
            rows = peers(dirs["one"])["peers"]
            return not any(
                r["node_id"] == ids[names[-1]] and r["direction"] == "outbound" for r in rows
            )

        assert code == 0, err
        poll("the stopped node dropped from the first's dialled peers", dropped)
    finally:
        codes = [stop(proc) for proc in reversed(running)]
    assert all(code == 0 for code, _ in codes), codes


def test_a_node_of_another_mesh_is_ignored_and_refused(tmp_path):
    dirs = certified_mesh(tmp_path, ["one", "two"])
    stranger = tmp_path / "stranger"
    memlane("init", "--data", str(stranger))
    ids = {
        name: asyncio.run(node_id_of(path)) for name, path in {**dirs, "stranger": stranger}.items()
    }
    running = []
    try:
        shown = {}
        for name, path in (*dirs.items(), ("stranger", stranger)):
            path.joinpath("config.toml").write_text(LOOPBACK_ONLY)
            extra = ("--peer", shown["one"]["sync"]) if name == "stranger" else ()
            proc, shown[name] = serve(path, *DISCOVER, *extra)
            running.append(proc)
        poll("two on one's table", lambda: connected(dirs["one"], ids["two"]))

        def refused() -> str | None:
            rows = peers(stranger)["peers"]
            return rows[0]["last_error"] if rows and rows[0]["last_error"] else None

        assert poll("the stranger's dial refused", refused)
        for name in ("one", "two"):  # neither dialled it, nor kept its refused connection
            rows = peers(dirs[name])["peers"]
            assert ids["stranger"] not in {row["node_id"] for row in rows}, name
            assert shown["stranger"]["sync"] not in {row["address"] for row in rows}, name
        assert all(row["state"] not in ("syncing", "live") for row in peers(stranger)["peers"])
        assert len(peers(stranger)["peers"]) == 1  # only its static peer: nothing discovered
    finally:
        codes = [stop(proc) for proc in reversed(running)]
    assert all(code == 0 for code, _ in codes), codes


# -- the pure parts ------------------------------------------------------------------------------

MESH, KEY = bytes(range(16)), bytes(range(32))


def props(**overrides: bytes | None) -> dict[bytes, bytes | None]:
    found: dict[bytes, bytes | None] = {
        b"v": b"1",
        b"mesh": MESH.hex().encode(),
        b"node": KEY.hex().encode(),
    }
    found.update({k.encode(): v for k, v in overrides.items()})
    return found


def test_a_sighting_needs_a_memlane_service():
    seen = sighting("n", props(), ["127.0.0.1", "192.0.2.7"], 7401)
    assert seen is not None
    assert (seen.mesh, seen.key, seen.host, seen.port) == (MESH, KEY, "192.0.2.7", 7401)
    assert sighting("n", props(), ["127.0.0.1"], 7401).host == "127.0.0.1"  # type: ignore[union-attr]
    for bad in (
        props(v=b"2"),
        props(mesh=b"zz"),
        props(mesh=b"00"),
        props(node=None),
        props(node=KEY[:31].hex().encode()),
    ):
        assert sighting("n", bad, ["127.0.0.1"], 7401) is None
    assert sighting("n", props(), [], 7401) is None
    assert sighting("n", props(), ["127.0.0.1"], 0) is None


def test_what_a_listener_advertises():
    assert advertised_addresses("127.0.0.1", []) == ["127.0.0.1"]
    assert advertised_addresses("0.0.0.0", ["127.0.0.1", "::1"]) == ["127.0.0.1"]
    every = advertised_addresses("0.0.0.0", [])
    assert every
    assert all(not a.startswith("127.") for a in every) or every == ["127.0.0.1"]


# -- what the sync service does with sightings --------------------------------------------------


def test_sightings_dialled_within_the_cap_and_dropped_when_gone(tmp_path):
    one = certified_mesh(tmp_path, ["one"])["one"]

    async def scenario() -> None:
        async with Node.open(one) as node:
            service = SyncService(node)
            await service.start(
                Listen("127.0.0.1", 0),
                [Listen("127.0.0.1", 9)],
                DiscoverySettings(("127.0.0.1",), max_peers=2),
            )
            try:
                mesh, own = node.info.mesh, node.key.public

                def seen(name: str, port: int, key: bytes = KEY, in_mesh: bytes = mesh) -> None:
                    service.sighted(Sighting(name, in_mesh, key, "127.0.0.1", port))

                seen("self", 1, key=own)
                seen("stranger", 2, in_mesh=MESH)
                seen("static", 9)
                assert service.discovered == {}  # itself, another mesh, a static peer
                seen("n1", 11)
                seen("n1", 11)  # again: nothing new
                seen("n2", 12)
                seen("n3", 13)  # over the cap: it waits
                assert sorted(service.discovered) == ["n1", "n2"]
                assert sorted(service.candidates.waiting) == ["n3"]  # type: ignore[union-attr]
                dialled = {p.address for p in service.sync.peers}
                assert dialled == {"127.0.0.1:9", "127.0.0.1:11", "127.0.0.1:12"}
                seen("n1", 21)  # moved
                assert service.discovered["n1"].address == "127.0.0.1:21"
                service.vanished("n2")  # n3 takes its place
                service.vanished("n2")  # gone twice: nothing more
                assert sorted(service.discovered) == ["n1", "n3"]
                service.vanished("n3")
                assert sorted(service.discovered) == ["n1"]

                def settled(table: PeerTable) -> bool:
                    return {p.address for p in table} == {"127.0.0.1:9", "127.0.0.1:21"}

                async with asyncio.timeout(10):  # hung-up diallers leave the table
                    await service.sync.peers.wait_for(settled)
            finally:
                await service.close()

    asyncio.run(scenario())


def test_discovered_nodes_that_do_not_link_take_turns(tmp_path):
    """Two places, three waiting: each round the unlinked dialled nodes go behind every node
    evicted fewer times; a new sighting displaces the waiting node evicted most often, or is
    ignored when none was; a node seen again keeps its place."""
    one = certified_mesh(tmp_path, ["one"])["one"]
    ports = {f"n{i}": closed_port() for i in range(1, 8)}

    async def scenario() -> None:
        async with Node.open(one) as node:
            service = SyncService(node)
            await service.start(None, [], None)
            now = [0.0]
            turns = Candidates(
                max_peers=2,
                max_waiting=3,
                evict_after=10.0,
                hang_up=service.sync.hang_up,
                dial=lambda seen: service.sync.dial(seen.host, seen.port),
                linked=lambda peer: peer.key is not None and service.sync.peers.linked(peer.key),
                clock=lambda: now[0],
            )

            def seen(name: str, port: int | None = None) -> None:
                turns.sighted(Sighting(name, node.info.mesh, KEY, "127.0.0.1", port or ports[name]))

            def places() -> tuple[list[str], list[str]]:
                return sorted(turns.dialled), list(turns.waiting)

            def rotated() -> tuple[list[str], list[tuple[str, int]]]:
                now[0] += 10
                turns.rotate()
                waiting = [(name, w.strikes) for name, w in turns.waiting.items()]
                return sorted(turns.dialled), waiting

            try:
                for name in ("n1", "n2", "n3", "n4", "n5", "n6"):
                    seen(name)  # n6: every place waiting, none evicted yet: ignored
                assert places() == (["n1", "n2"], ["n3", "n4", "n5"])
                evicted = REFUSALS.get("discovery_evicted")
                assert rotated() == (["n3", "n4"], [("n5", 0), ("n1", 1), ("n2", 1)])
                seen("n7")  # displaces n1, evicted most often and longest ago
                seen("n2", 9)  # seen again at a new address: keeps its place
                assert [(n, w.seen.port) for n, w in turns.waiting.items()] == [
                    ("n5", ports["n5"]),
                    ("n2", 9),
                    ("n7", ports["n7"]),
                ]
                assert rotated() == (["n5", "n7"], [("n2", 1), ("n3", 1), ("n4", 1)])
                assert REFUSALS.get("discovery_evicted") == evicted + 4
                turns.vanished("n5")  # its place goes to the first waiting
                assert places() == (["n2", "n7"], ["n3", "n4"])
                dialled = {p.address for p in service.sync.peers if p.state.value != "closed"}
                assert f"127.0.0.1:{ports['n7']}" in dialled
            finally:
                await service.close()

    asyncio.run(scenario())


# -- advertisements that never link -------------------------------------------------------------

SQUATTERS = 8  # half at closed ports, half at a TCP listener that never answers TLS
SQUATTED = LOOPBACK_ONLY + 'max_peers = 4\nevict_after = "1s"\n'


async def mesh_and_key(data: Path) -> tuple[bytes, bytes]:
    async with Node.open(data) as node:
        return node.info.mesh, node.key.public


def evictions(health: str) -> float:
    with urllib.request.urlopen(f"{health}/metrics", timeout=TIMEOUT) as answer:
        text = answer.read().decode()
    (line,) = [x for x in text.splitlines() if 'limit="discovery_evicted"' in x]
    return float(line.split()[-1])


def test_advertisements_that_never_link_give_their_places_to_a_real_node(tmp_path):
    """Services claiming the mesh's id take every one of the four places first; each is
    evicted after a second without a link, and the real node, advertised after them, is
    dialled and syncs."""
    site = setup(tmp_path)
    one, two = site["one"], site["two"]
    mesh, key = asyncio.run(mesh_and_key(one))
    written = json.loads(
        memlane(
            "write",
            "--data",
            str(one),
            "--token",
            site["writer"],
            "--title",
            "past the squatters",
            "--json",
        ).stdout
    )
    (two / "config.toml").write_text(SQUATTED)
    silent = socket.create_server(("127.0.0.1", 0), backlog=SQUATTERS)  # accepts, says nothing
    ports = [closed_port() for _ in range(SQUATTERS // 2)]
    ports += [silent.getsockname()[1]] * (SQUATTERS - len(ports))
    squatters = [(f"squatter-{n}", mesh, os.urandom(32), port) for n, port in enumerate(ports)]
    advertiser = Advertiser()
    running: list[subprocess.Popen[str]] = []
    try:
        with ThreadPoolExecutor(3) as pool:  # at once: each takes a second or two
            started = [
                pool.submit(serve, one, "--sync-listen", "127.0.0.1:0", "--discovery", "off"),
                pool.submit(serve, two, *DISCOVER),
            ]
            pool.submit(advertiser.advertise, squatters).result()
            (real, shown), (proc, seen) = (f.result() for f in started)
        running += [real, proc]
        squatted = {f"127.0.0.1:{port}" for port in ports}

        def full() -> bool:  # every place taken by a squatter
            rows = peers(two)["peers"]
            return sum(r["address"] in squatted for r in rows if r["direction"] == "outbound") >= 4

        poll("the squatters dialled", full)
        port = int(shown["sync"].rsplit(":", 1)[1])
        advertiser.advertise([(f"memlane-{site['one_id']}", mesh, key, port)])
        poll("the SR synced", lambda: written["sr_id"] in timeline_ids(two, site["reader"]))
        poll("the real node on the table", lambda: connected(two, site["one_id"]))
        assert evictions(seen["health"]) >= 4
    finally:
        advertiser.close()
        silent.close()
        with ThreadPoolExecutor(2) as pool:
            codes = list(pool.map(stop, running))
    assert all(code == 0 for code, _ in codes), codes
