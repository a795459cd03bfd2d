"""Connections cannot take ``memlane serve``'s file descriptors (docs/operations.md §Ports,
§Limits): plain TCP connections to the sync and join ports are counted from their accept, in
all and per address, and dropped when their handshake takes too long; slow MCP HTTP
connections are capped and dropped when their request head takes too long; the health port
holds a bounded number; and a process out of descriptors says so in one line, not a traceback
per accept, and answers again once they are free.  Every limit here is configured small."""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

from node.address import Listen
from node.config import MeshLimits, NodeConfig
from node.identity import NODE_KEY_FILE
from node.members import certs
from node.mesh.join import JoinService, join
from node.mesh.service import CA_FILE, NODE_CERT_FILE, SyncService
from node.mesh.sync import SyncOptions
from node.node import Node, system_wall
from node.ports import Handshakes, quiet_accept_errors
from node.refusals import REFUSALS
from tests.node.clikit import MEMLANE
from tests.node.mcpkit import ACCEPT, INITIALIZE, TIMEOUT, read_line, self_signed
from tests.node.servekit import (
    certified_mesh,
    connected,
    count_closed,
    memlane,
    open_connections,
    poll,
    refusal_counts,
    serve,
    server_closed,
    setup,
    stop,
)
from tests.node.synckit import make_mesh

PARTIAL_HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


# -- the knobs ---------------------------------------------------------------------------------


def test_the_connection_bounds_are_config_keys(tmp_path):
    default = NodeConfig.from_mapping({})
    assert default.mesh_limits == MeshLimits(32, 4, 64, 8, 10_000, 30_000)
    assert (default.serve_limits.max_connections, default.serve_limits.header_timeout_ms) == (
        256,
        10_000,
    )
    config = NodeConfig.from_mapping(
        {
            "mesh": {
                "max_connections": 8,
                "max_connections_per_key": 2,
                "max_handshakes": 5,
                "max_handshakes_per_address": 1,
                "handshake_timeout": "2s",
                "backoff_max": "5s",
            },
            "serve": {"max_connections": 3, "header_timeout": "1m"},
        }
    )
    assert config.mesh_limits == MeshLimits(8, 2, 5, 1, 2_000, 5_000)
    assert (config.serve_limits.max_connections, config.serve_limits.header_timeout_ms) == (
        3,
        60_000,
    )
    (tmp_path / "config.toml").write_text(
        '[mesh]\nmax_handshakes = 0\nhandshake_timeout = "soon"\nmax_connections = "32"\n'
        'backoff_max = "1h"\n'
        '[serve]\nmax_connections = -1\nheader_timeout = "1h"\n'
    )
    done = memlane("config", "check", "--config", str(tmp_path / "config.toml"), check=False)
    assert done.returncode == 1
    for problem in (
        "mesh.max_handshakes must be a positive integer",
        "mesh.max_connections must be a positive integer",
        "mesh.handshake_timeout: 'soon' is not a duration",
        "mesh.backoff_max must be at most 10m",
        "serve.max_connections must be a positive integer",
        "serve.header_timeout must be at most 10m",
    ):
        assert problem in done.stdout + done.stderr


# -- the sync port ----------------------------------------------------------------------------


def test_plain_connections_to_the_sync_port_are_bounded_per_address(tmp_path):
    """Three plain connections from one address are held until the handshake timeout, each
    newer one evicting the oldest at once; a member whose link was up before syncs
    meanwhile."""
    site = setup(tmp_path)
    (site["one"] / "config.toml").write_text(
        '[mesh]\nlisten = "127.0.0.1:0"\nmax_handshakes_per_address = 3\nhandshake_timeout = "3s"\n'
    )
    first, shown = serve(site["one"])
    running, plain = [first], []
    try:
        second, _ = serve(site["two"], "--peer", shown["sync"])
        running.append(second)
        poll("the member's link", lambda: connected(site["two"], site["one_id"]))
        plain = open_connections(shown["sync"], 8)
        opened = time.monotonic()
        assert count_closed(plain[:5], 5, within=1) == 5  # the oldest, evicted at once
        written = json.loads(
            memlane(
                "write",
                "--data",
                str(site["one"]),
                "--token",
                site["writer"],
                "--title",
                "past the squatters",
                "--json",
            ).stdout
        )
        arrived = lambda: written["sr_id"] in _listed(site["two"], site["reader"])  # noqa: E731
        poll("the SR on the member", arrived)
        assert time.monotonic() - opened < 3  # … while the three were still held
        assert count_closed(plain, 8, within=4) == 8
        assert time.monotonic() - opened >= 2.5  # dropped by the handshake timeout
        assert refusal_counts(
            shown["health"],
            "sync_handshake_evicted",
            "sync_handshake_timeout",
            "sync_per_address",
            "sync_pre_handshake",
        ) == [5, 3, 0, 0]
    finally:
        for conn in plain:
            conn.close()
        codes = [stop(proc) for proc in reversed(running)]
    assert all(code == 0 for code, _ in codes), codes


def _listed(data: Path, token: str) -> set[str]:
    listed = memlane("timeline", "list", "--data", str(data), "--token", token, "--json")
    return {r["sr_id"] for r in json.loads(listed.stdout)["results"]}


async def _flood_then_handshake(dirs: dict[str, Path]) -> None:
    handshakes = Handshakes(timeout=0.5, max_open=3, max_per_address=8)
    async with Node.open(dirs["one"]) as node:
        service = SyncService(node, options=SyncOptions(handshakes=handshakes))
        await service.start(Listen("127.0.0.1", 0), [])
        try:
            host, port = service.address or ("", 0)
            counted = ("sync_handshake_evicted", "sync_handshake_timeout", "sync_pre_handshake")
            before = [REFUSALS.get(n) for n in counted]
            plain = [await asyncio.open_connection(host, port) for _ in range(6)]
            ends = await asyncio.gather(*(_ends_within(r, 0.3) for r, _ in plain))
            assert ends == [True] * 3 + [False] * 3  # beyond max_open, the oldest evicted
            # While the three newest are held, a member's handshake gets in (the oldest goes).
            member = await asyncio.open_connection(host, port, ssl=_member_context(dirs["two"]))
            member[1].close()
            ends = await asyncio.gather(*(_ends_within(r, 2) for r, _ in plain[3:]))
            assert all(ends)  # the others: one evicted, two after the handshake timeout
            after = [REFUSALS.get(n) for n in counted]
            assert [a - b for a, b in zip(after, before, strict=True)] == [4, 2, 0]
            for _, writer in plain:
                writer.close()
        finally:
            await service.close()


async def _ends_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    try:
        async with asyncio.timeout(seconds):
            return await reader.read() == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def _member_context(data: Path) -> certs.ssl.SSLContext:
    ca, cert = (certs.load_pem((data / n).read_bytes()) for n in (CA_FILE, NODE_CERT_FILE))
    context = certs.client_context(ca, cert, certs.private_key(data / NODE_KEY_FILE))
    context.check_hostname = False
    return context


def test_connections_in_their_handshake_are_capped_in_all(tmp_path):
    asyncio.run(_flood_then_handshake(certified_mesh(tmp_path, ["one", "two"])))


async def _flood_the_join_port(root: Path) -> None:
    dirs = await make_mesh(root, ["one"], system_wall)
    async with Node.open(dirs["one"]) as authority:
        handshakes = Handshakes(timeout=0.5, max_open=8, max_per_address=2)
        joins = JoinService(authority, handshakes=handshakes)
        await joins.start(Listen("127.0.0.1", 0))
        try:
            host, port = joins.address or ("", 0)
            before = REFUSALS.get("join_handshake_evicted")
            plain = [await asyncio.open_connection(host, port) for _ in range(5)]
            ends = await asyncio.gather(*(_ends_within(r, 0.3) for r, _ in plain))
            assert ends == [True] * 3 + [False] * 2  # beyond two from one address: the oldest
            opened = time.monotonic()
            info = await join(
                root / "two", authority.membership.create_invite(), host, port, seconds=5
            )
            assert time.monotonic() - opened < 0.5  # while two were held, not after timeouts
            assert REFUSALS.get("join_handshake_evicted") - before == 4
            for _, writer in plain:
                writer.close()
            assert authority.membership.admits(info.public_key, system_wall())
        finally:
            await joins.close()


def test_plain_connections_cannot_hold_the_join_port(tmp_path):
    asyncio.run(_flood_the_join_port(tmp_path))


# -- the MCP and health ports -----------------------------------------------------------------


def _status(
    request: urllib.request.Request | str, trust: ssl.SSLContext | None = None
) -> int | None:
    """The status of an answer, or None when the connection was closed without one."""
    try:
        with urllib.request.urlopen(request, timeout=5, context=trust) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:  # closed, or reset, before an answer was read
        return None


def _initialize(url: str, token: str, trust: ssl.SSLContext | None = None) -> int | None:
    return _status(
        urllib.request.Request(
            url,
            json.dumps(INITIALIZE).encode(),
            method="POST",
            headers={
                **ACCEPT,
                "Content-Type": "application/json",
                "Authorization": f"Bearer {token}",
            },
        ),
        trust,
    )


def _read_all(conn: socket.socket, wait: float) -> bytes:
    conn.settimeout(wait)
    out = b""
    with contextlib.suppress(OSError):
        while chunk := conn.recv(65536):
            out += chunk
    return out


def test_slow_mcp_connections_are_capped_and_dropped(tmp_path):
    site = setup(tmp_path)
    (site["one"] / "config.toml").write_text(
        '[serve]\nmax_connections = 4\nheader_timeout = "1s"\n'
    )
    proc, shown = serve(site["one"])
    slow, idle = [], []
    try:
        address = shown["mcp_http"].removeprefix("http://").split("/")[0]
        slow = open_connections(address, 4)
        for conn in slow:
            conn.sendall(PARTIAL_HEAD)
        opened = time.monotonic()
        extra = open_connections(address, 1)[0]
        slow.append(extra)
        assert _read_all(extra, 1).startswith(b"HTTP/1.1 503 ")  # beyond the cap, at once
        assert server_closed(extra)
        asked = time.monotonic()
        assert _initialize(shown["mcp_http"], site["writer"]) in (503, None)  # not served …
        assert time.monotonic() - asked < 0.5  # … but told at once
        for conn in slow:  # one byte more: the head still does not end
            conn.sendall(b"x")
        assert count_closed(slow, 5, within=3) == 5
        assert time.monotonic() - opened >= 0.9  # dropped by the header timeout
        assert _initialize(shown["mcp_http"], site["writer"]) == 200
        health = shown["health"].removeprefix("http://")
        idle = open_connections(health, 17)
        assert count_closed(idle, 1, within=1) == 1  # the health port holds 16
        for conn in idle:
            conn.close()
        poll("health again", lambda: _status(shown["health"] + "/healthz") == 200)
        assert refusal_counts(
            shown["health"], "mcp_connections", "mcp_header_timeout", "health_connections"
        ) == [2, 4, 1]
    finally:
        for conn in [*slow, *idle]:
            conn.close()
        code, err = stop(proc)
    assert code == 0, err


def test_mcp_connections_over_tls_are_counted_before_their_handshake(tmp_path):
    site = setup(tmp_path)
    cert, key = self_signed(tmp_path)
    (site["one"] / "config.toml").write_text(
        '[serve]\nmax_connections = 3\nheader_timeout = "1s"\n'
    )
    proc, shown = serve(site["one"], "--tls-cert", str(cert), "--tls-key", str(key))
    silent: list[socket.socket] = []
    try:
        address = shown["mcp_http"].removeprefix("https://").split("/")[0]
        silent = open_connections(address, 4)  # plain TCP: no handshake ever starts
        opened = time.monotonic()
        assert count_closed(silent, 1, within=0.5) == 1  # beyond max_connections, at once
        assert count_closed(silent, 4, within=3) == 4
        assert time.monotonic() - opened >= 0.9  # the others when the handshake ran out of time
        trust = ssl.create_default_context(cafile=str(cert))
        assert _initialize(shown["mcp_http"], site["writer"], trust) == 200
        assert refusal_counts(shown["health"], "mcp_connections", "mcp_header_timeout") == [1, 3]
    finally:
        for conn in silent:
            conn.close()
        code, err = stop(proc)
    assert code == 0, err
    assert "Traceback" not in err


# -- out of file descriptors ------------------------------------------------------------------


DESCRIPTORS = 40


def _few_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))


def test_out_of_descriptors_is_one_line_and_passes(tmp_path):
    site = setup(tmp_path)
    proc = subprocess.Popen(
        [str(MEMLANE), "serve", "--data", str(site["one"]), "--json", "--mcp-http", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_few_descriptors,
    )
    held: list[socket.socket] = []
    try:
        shown = json.loads(read_line(proc.stdout, TIMEOUT))
        address = shown["mcp_http"].removeprefix("http://").split("/")[0]
        held = open_connections(address, 60)  # more than the process may open
        fds = Path(f"/proc/{proc.pid}/fd")
        poll("every descriptor taken", lambda: len(list(fds.iterdir())) >= DESCRIPTORS - 1)
        time.sleep(2.2)  # out of descriptors for a while: accept fails, retried every second
        for conn in held:
            conn.close()
        poll("health again", lambda: _status(shown["health"] + "/healthz") == 200)
    finally:
        for conn in held:
            conn.close()
        code, err = stop(proc)
    assert code == 0, err
    lines = [line for line in err.splitlines() if "cannot accept" in line]
    assert 1 <= len(lines) <= 2, err[-2000:]
    assert "Traceback" not in err
    assert "Too many open files" in lines[0]


def test_an_accept_retry_after_its_port_closed_says_nothing(caplog):
    """asyncio retries an accept that failed for want of descriptors a second later; when the
    port closed meanwhile (the node stopping), the retry finds descriptor -1.  That is not an
    error worth a traceback; any other failing callback still reaches the default handler."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        quiet_accept_errors(loop)
        server = await asyncio.start_server(lambda _r, _w: None, "127.0.0.1", 0)
        server.close()
        await server.wait_closed()
        closed = socket.socket()
        closed.close()  # what the server's socket is once closed: descriptor -1
        # The retry as asyncio schedules it (selector_events: after EMFILE on accept).
        loop.call_soon(loop._start_serving, lambda: None, closed, None, server, 100, None, None)

        def other() -> None:
            raise ValueError("another callback's own error")

        loop.call_soon(other)
        await asyncio.sleep(0.05)

    with caplog.at_level("ERROR", logger="asyncio"):
        asyncio.run(run())
    messages = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert len(messages) == 1, messages
    assert "other" in messages[0]
