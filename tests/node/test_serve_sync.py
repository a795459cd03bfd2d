"""Sync run by ``memlane serve`` (docs/mesh.md §Running sync): two nodes of one mesh, each in a
real subprocess on loopback, the member dialling the authority over mutual TLS with the
certificate the authority issued it.  An SR written with ``memlane write`` on the first reaches
the second; ``memlane peers`` on each shows the other connected; SIGTERM stops both with exit 0
and leaves the peer table closed.  Also: ``[mesh]`` in config.toml, and a member node without
its certificate refused at start-up."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from node.address import Listen
from node.config import NodeConfig
from node.errors import ConfigError
from node.mesh import certs
from node.mesh.service import CA_FILE, NODE_CERT_FILE
from node.node import Node, system_wall
from tests.node.synckit import make_mesh
from tests.node.test_mcp import MEMLANE, TIMEOUT, read_line

CONVERGE = 20.0  # seconds for an SR or a connection to show up on the other node


def memlane(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(MEMLANE), *args], capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)  # fmt: skip
    if check:
        assert done.returncode == 0, done.stderr
    return done


def poll(what: str, probe: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + CONVERGE
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {CONVERGE} s")


def setup(root: Path) -> dict[str, Any]:
    """Two nodes of one mesh: ``one`` (the authority) and ``two`` (a member it admitted and
    certified); a writing token on one, a reading token on two."""

    async def run() -> dict[str, Any]:
        dirs = await make_mesh(root, ["one", "two"], system_wall)
        out: dict[str, Any] = {"one": dirs["one"], "two": dirs["two"]}
        async with Node.open(dirs["two"]) as two:
            out["two_id"], two_key = two.info.node_id, two.key.public
            out["reader"] = (await two.create_token("bob", "team", ["read:workspace"])).token
        async with Node.open(dirs["one"]) as one:
            out["one_id"] = one.info.node_id
            (dirs["two"] / CA_FILE).write_bytes(certs.pem(one.authority_certificate()))
            (dirs["two"] / NODE_CERT_FILE).write_bytes(certs.pem(one.node_certificate(two_key)))
            scopes = ["read:workspace", "write:workspace"]
            out["writer"] = (await one.create_token("alice", "team", scopes)).token
        return out

    return asyncio.run(run())


def serve(data: Path, *args: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen(
        [str(MEMLANE), "serve", "--data", str(data), "--json", "--mcp-http", "127.0.0.1:0",
         *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = read_line(proc.stdout, TIMEOUT)
    if not line:
        proc.kill()
        pytest.fail(f"memlane serve did not start: {proc.communicate()[1]}")
    return proc, json.loads(line)


def stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=TIMEOUT)
    finally:
        proc.kill()
        _, err = proc.communicate()
    return code, err


def peers(data: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(memlane("peers", "--data", str(data), "--json").stdout)
    return found


def connected(data: Path, other: str) -> dict[str, Any] | None:
    for row in peers(data)["peers"]:
        if row["node_id"] == other and row["state"] in ("syncing", "live"):
            return row
    return None


def test_two_served_nodes_sync_over_tls(tmp_path):
    site = setup(tmp_path)
    one, two = site["one"], site["two"]
    first, shown = serve(one, "--sync-listen", "127.0.0.1:0")
    running = [first]
    try:
        host, port = shown["sync"].rsplit(":", 1)
        assert host == "127.0.0.1"
        assert int(port) > 0
        assert (one / CA_FILE).exists()  # the authority certified itself
        assert (one / NODE_CERT_FILE).exists()
        (two / "config.toml").write_text(f'[mesh]\npeers = ["{shown["sync"]}"]\n')
        second, shown_two = serve(two)
        running.append(second)
        assert shown_two["sync"] is None  # it only dials

        inbound = poll(
            "the member on the authority's table", lambda: connected(one, site["two_id"])
        )
        outbound = poll(
            "the authority on the member's table", lambda: connected(two, site["one_id"])
        )
        # Written by another process once the link is up: it goes out as a push.
        written = json.loads(memlane("write", "--data", str(one), "--token", site["writer"],
                                     "--title", "served sync", "--json").stdout)  # fmt: skip

        def arrived() -> bool:
            listed = memlane("timeline", "list", "--data", str(two), "--token", site["reader"],
                             "--json").stdout  # fmt: skip
            return written["sr_id"] in {r["sr_id"] for r in json.loads(listed)["results"]}

        poll("the SR on the second node", arrived)
        assert inbound["direction"] == "inbound"
        assert outbound["direction"] == "outbound"
        assert outbound["address"] == shown["sync"]
        table = peers(one)
        assert table["listen"] == shown["sync"]
        assert table["serving"]
        text = memlane("peers", "--data", str(two)).stdout
        assert text.startswith("sync serving (as of ")
        assert site["one_id"] in text
        assert "outbound" in text
    finally:
        codes = [stop(proc) for proc in reversed(running)]
    for code, err in codes:
        assert code == 0, err
    for data in (one, two):
        after = peers(data)
        assert not after["serving"]
        assert all(row["state"] == "closed" for row in after["peers"])


def test_a_member_without_its_certificate_does_not_serve(tmp_path):
    site = setup(tmp_path)
    (site["two"] / NODE_CERT_FILE).unlink()
    done = memlane("serve", "--data", str(site["two"]), "--mcp-http", "127.0.0.1:0",
                   "--peer", "127.0.0.1:9", check=False)  # fmt: skip
    assert done.returncode == 1
    assert f"no {NODE_CERT_FILE} in " in done.stderr


def test_peers_before_sync_ever_ran(tmp_path):
    site = setup(tmp_path)
    assert peers(site["one"]) == {"serving": False, "at": None, "listen": None, "peers": []}
    assert memlane("peers", "--data", str(site["one"])).stdout.startswith("no peers")


def test_mesh_config_keys():
    mesh = {"listen": "0.0.0.0:7411", "peers": ["10.0.0.2:7411", "[::1]:7412"]}
    config = NodeConfig.from_mapping({"mesh": mesh})
    assert config.mesh_listen == Listen("0.0.0.0", 7411)
    assert config.mesh_peers == (Listen("10.0.0.2", 7411), Listen("::1", 7412))
    assert NodeConfig.from_mapping({}).mesh_listen is None
    with pytest.raises(ConfigError) as raised:
        NodeConfig.from_mapping({"synchronous": "SOMETIMES", "mesh": {
            "listen": "nowhere", "peers": ["10.0.0.2:0", 7]}})  # fmt: skip
    text = str(raised.value)
    assert "synchronous must be" in text  # reported with every other problem
    assert "mesh.listen: 'nowhere' is not HOST:PORT" in text
    assert "mesh.peers: '10.0.0.2:0' names no port" in text
    assert 'mesh.peers: 7 is not a "HOST:PORT" string' in text
    with pytest.raises(ConfigError, match="mesh may set only listen and peers"):
        NodeConfig.from_mapping({"mesh": {"port": 7411}})
