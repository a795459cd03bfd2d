"""The sync and join listeners of ``memlane serve`` cannot be held by one party
(docs/operations.md §Ports): a member that opens many TLS connections and never says hello
keeps at most ``max_connections_per_key`` sync slots, and an honest member still syncs; idle
join connections are dropped after ``read_timeout`` and a real join then succeeds."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import time
from pathlib import Path

import pytest

from node.address import Listen
from node.identity import NODE_KEY_FILE
from node.members import certs
from node.members.errors import MeshError
from node.mesh.join import MAX_JOINS, READ_TIMEOUT, JoinService, join
from node.mesh.service import CA_FILE, NODE_CERT_FILE
from node.mesh.sync import SyncOptions
from node.node import Node, system_wall
from tests.node.servekit import (
    certified_mesh,
    connected,
    issue,
    memlane,
    node_id_of,
    poll,
    serve,
    server_closed,
    stop,
)
from tests.node.synckit import make_mesh

SILENT = 40  # more than the 32 sync slots


def _member_context(data: Path) -> ssl.SSLContext:
    ca, cert = (certs.load_pem((data / n).read_bytes()) for n in (CA_FILE, NODE_CERT_FILE))
    context = certs.client_context(ca, cert, certs.private_key(data / NODE_KEY_FILE))
    context.check_hostname = False
    return context


def _closed(conn: ssl.SSLSocket) -> bool:
    """Whether the server closed ``conn`` (EOF or a reset) rather than leaving it open."""
    conn.settimeout(0.05)
    try:
        while conn.recv(65536):
            pass
    except (TimeoutError, ssl.SSLWantReadError):
        return False
    except (OSError, ssl.SSLError):
        return True
    return True


def test_one_member_cannot_take_every_sync_slot(tmp_path):
    dirs = certified_mesh(tmp_path, ["one", "two", "three"])
    one, two = dirs["one"], dirs["two"]
    writer = asyncio.run(issue(one, "alice", ["read:workspace", "write:workspace"]))
    reader = asyncio.run(issue(two, "bob", ["read:workspace"]))
    one_id = asyncio.run(node_id_of(one))
    written = json.loads(
        memlane(
            "write", "--data", str(one), "--token", writer, "--title", "past the squatter", "--json"
        ).stdout
    )
    first, shown = serve(one, "--sync-listen", "127.0.0.1:0")
    running, silent = [first], []
    try:
        host, port = shown["sync"].rsplit(":", 1)
        context = _member_context(dirs["three"])
        opened = time.monotonic()
        for _ in range(SILENT):
            raw = socket.create_connection((host, int(port)), timeout=5)
            silent.append(context.wrap_socket(raw, server_hostname=host))
        cap = SyncOptions().max_connections_per_key
        deadline = time.monotonic() + 5
        while sum(map(_closed, silent)) < SILENT - cap and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sum(_closed(c) for c in silent) == SILENT - cap

        (two / "config.toml").write_text(f'[mesh]\npeers = ["{shown["sync"]}"]\n')
        second, _ = serve(two)
        running.append(second)
        poll("the honest member on the authority", lambda: connected(two, one_id))

        def arrived() -> bool:
            listed = memlane(
                "timeline", "list", "--data", str(two), "--token", reader, "--json"
            ).stdout
            return written["sr_id"] in {r["sr_id"] for r in json.loads(listed)["results"]}

        poll("the SR on the honest member", arrived)
        # … while the silent member still held its connections (hello_timeout is 10 s).
        assert time.monotonic() - opened < 10
        assert sum(_closed(c) for c in silent) == SILENT - cap
    finally:
        for conn in silent:
            conn.close()
        codes = [stop(proc) for proc in reversed(running)]
    for code, err in codes:
        assert code == 0, err


async def _squat_then_join(root: Path) -> None:
    dirs = await make_mesh(root, ["one"], system_wall)
    async with Node.open(dirs["one"]) as authority:
        joins = JoinService(authority, read_timeout=0.5)
        await joins.start(Listen("127.0.0.1", 0))
        try:
            host, port = joins.address or ("", 0)
            idle = [
                await asyncio.open_connection(host, port, ssl=certs.join_client_context())
                for _ in range(MAX_JOINS)
            ]
            await asyncio.sleep(0.1)  # each is being served, holding a slot
            for reader, _ in idle:  # dropped by the authority after read_timeout
                async with asyncio.timeout(3):
                    assert await reader.read() == b""
            info = await join(
                root / "two", authority.membership.create_invite(), host, port, seconds=5
            )
            assert authority.membership.admits(info.public_key, system_wall())
            for _, writer in idle:
                writer.close()
        finally:
            await joins.close()


def test_idle_connections_cannot_hold_the_join_port(tmp_path):
    asyncio.run(_squat_then_join(tmp_path))


def _silent_tls(address: str, n: int) -> list[ssl.SSLSocket]:
    """``n`` join connections that finish their TLS handshake and then say nothing."""
    host, port = address.rsplit(":", 1)
    context = certs.join_client_context()
    return [
        context.wrap_socket(socket.create_connection((host, int(port)), timeout=5))
        for _ in range(n)
    ]


def test_a_join_gets_in_while_idle_connections_hold_every_slot(tmp_path):
    """``MAX_JOINS`` silent TLS connections hold the served authority's join slots; a real
    ``memlane init --join``, run once, gets in at once: the oldest silent one gives its slot."""
    one = tmp_path / "one"
    memlane("init", "--data", str(one))
    proc, shown = serve(one, "--join-listen", "127.0.0.1:0")
    silent: list[ssl.SSLSocket] = []
    try:
        invite = memlane("mesh", "invite", "--data", str(one), "--label", "late").stdout.strip()
        silent = _silent_tls(shown["join"], MAX_JOINS)
        time.sleep(0.2)  # each is being served, holding a slot
        opened = time.monotonic()
        joined = memlane(
            "init", "--data", str(tmp_path / "two"), "--join", invite,
            "--authority", shown["join"], "--json", check=False,
        )  # fmt: skip
        took = time.monotonic() - opened
        assert joined.returncode == 0, joined.stderr
        assert took < READ_TIMEOUT  # not after the silent ones timed out
        assert [server_closed(c) for c in silent] == [True] + [False] * (MAX_JOINS - 1)
    finally:
        for conn in silent:
            conn.close()
        code, err = stop(proc)
    assert code == 0, err


async def _busy_then_refused(root: Path) -> None:
    dirs = await make_mesh(root, ["one"], system_wall)
    async with Node.open(dirs["one"]) as authority:
        joins = JoinService(authority, max_joins=0)  # every slot always taken
        await joins.start(Listen("127.0.0.1", 0))
        try:
            host, port = joins.address or ("", 0)
            opened = time.monotonic()
            with pytest.raises(MeshError) as refused:
                await join(
                    root / "two", authority.membership.create_invite(), host, port, seconds=1.5
                )
            assert 0.7 <= time.monotonic() - opened < 1.5  # tries at 0, 0.25 and 0.75 s
            assert f"the authority at {host}:{port} is busy: every join slot is taken" in str(
                refused.value
            )
            assert str(refused.value).endswith("(3 tries in 1.5 s)")
            assert not (root / "two").exists()
        finally:
            await joins.close()


def test_a_busy_join_port_says_so_after_trying_again(tmp_path):
    asyncio.run(_busy_then_refused(tmp_path))
