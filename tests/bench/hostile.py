"""Hostile input at full size (``python -m tests.bench hostile``): issue 19's attacks replayed
at the sizes it measured them, against a served node on loopback, with the defaults of
docs/operations.md §Limits; the regression tests replay each against small configured limits.

1. **frames** — members send frames of 4 MiB of empty arrays to the sync port, all at once
   (each on its own link: one a node key): the serve process's RSS growth and the longest
   ``/healthz`` answer meanwhile.
2. **sync connections** — plain TCP connections to the sync port of a process limited to 1,024
   file descriptors: the descriptors it holds, ``/healthz`` and an MCP initialize answered,
   what it writes on stderr.
3. **MCP** — one read-only token opening sessions (refused past 16; another token still opens
   one), slow connections sending half a request head (a real client answered once the header
   timeout drops them), 4 MiB bodies of ``[]`` at once (413 or 400, fast): RSS growth of each.
4. **join and discovery** — idle connections on the join port from the joiner's own address (a
   real ``memlane init --join``, run once as a user runs it, gets in), and services advertising the
   mesh id over real zeroconf on 127.0.0.1 (a second served node dials the real node).
5. **pending** — a member pushes junk entries that wait in the pending area, in under 3 s: it
   holds its share, and an honest peer's gap-waiting entry is held, then released.
6. **logs** — one writer opening one-entry logs: its default ``max_logs`` (64) holds 64 of them;
   granted all of them, two nodes still converge over mutual TLS, their frontier in parts.
7. **archives** — crafted manifests (scrypt at ``log_n 22, r 16, p 4``; JSON 200,000 deep)
   refused at once, nothing written.

Rows 1-4 share one ``memlane serve`` process (``RLIMIT_NOFILE`` 1,024); rows 5-7 run the
node's services in this process, as their tests do.  Every socket is on 127.0.0.1.  The
figures are the serve process's own (``/proc/PID/status``, ``/proc/PID/fd``), sampled every
50 ms, beside ``/healthz`` asked on each sample.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import resource
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.address import Listen
from node.identity import NODE_KEY_FILE
from node.logging import configure_logging
from node.members import certs
from node.members.membership import DEFAULT_MAX_LOGS
from node.mesh.service import CA_FILE, NODE_CERT_FILE, SyncService
from node.mesh.sync import Sync
from node.node import Node, system_wall
from node.transfer.archive import ArchiveError, create_archive
from protocol.batch import MAX_BATCH_ENTRIES
from protocol.entry import Entry
from protocol.frames import MAX_FRAME_BYTES
from protocol.messages import Credit, Error, FrontierDigest, Push
from tests.bench.common import SMOKE, peak_rss_mib, progress, table
from tests.node.bundlekit import deeper, manifest_of, rewritten
from tests.node.clikit import MEMLANE
from tests.node.helpers import FAR_FUTURE_MS, ForeignWriter, admit, pending
from tests.node.mcpkit import ACCEPT, INITIALIZE, TIMEOUT, read_line
from tests.node.servekit import (
    Advertiser,
    certified_mesh,
    closed_port,
    connected,
    issue,
    memlane,
    node_id_of,
    peers,
)
from tests.node.synckit import RawPeer, converged, frontier_digest, wire

__all__ = ["ATTACKS", "FULL", "QUICK", "Sizes", "run"]

FRAMES, SYNC_TCP, MCP, JOIN, PENDING, LOGS, ARCHIVES = ATTACKS = (
    "1 frames",
    "2 sync connections",
    "3 MCP",
    "4 join and discovery",
    "5 pending",
    "6 logs",
    "7 archives",
)
PROCESS = "serve process"  # rows 1-4's process, at the end
DESCRIPTORS = 1_024  # the serve process's RLIMIT_NOFILE
RSS_BOUND_MIB = 64
HEALTH_BOUND_S = 1.0
PARTIAL_HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
SECRET = b"correct horse battery staple"


@dataclass(frozen=True, slots=True)
class Sizes:
    frames: int
    sync_connections: int
    sessions: int
    slow_connections: int
    bodies: int
    idle_joins: int
    squatters: int
    junk: int
    logs: int


FULL = Sizes(30, 1_100, 10_050, 1_100, 8, 4, 40, 10_000, 10_001)
QUICK = Sizes(2, 40, 30, 20, 2, 2, 4, 300, 70)


# -- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Line:
    """One figure of one attack, held against its bound (``ok`` None: information)."""

    attack: str
    measure: str
    value: str
    bound: str
    ok: bool | None

    @property
    def verdict(self) -> str:
        return "(info)" if self.ok is None else "PASS" if self.ok else "FAIL"


@dataclass(slots=True)
class Report:
    """The table this benchmark prints (it does not fit ``common.Result``)."""

    title: str
    lines: list[Line] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    exit_status: int = 0

    def add(self, measure: str, value: str, bound: str, ok: bool | None, attack: str) -> None:
        self.lines.append(Line(attack, measure, value, bound, ok))

    def __str__(self) -> str:
        rows = [[ln.attack, ln.measure, ln.value, ln.bound, ln.verdict] for ln in self.lines]
        out = [
            self.title,
            "",
            *table(["attack", "measure", "value", "bound", "verdict"], rows, right={2}),
        ]
        out += ["", f"peak RSS of the run: {peak_rss_mib():,.0f} MiB"]
        return "\n".join(out + [f"note: {n}" for n in self.notes])


# -- the served node and what it shows ------------------------------------------------------------


def _limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))


@dataclass
class Served:
    """A ``memlane serve`` process: what it printed at start, its stderr in a file."""

    proc: subprocess.Popen[str]
    shown: dict[str, Any]
    stderr: Path

    @classmethod
    def start(cls, data: Path, *args: str, limited: bool = False) -> Served:
        stderr = data.with_name(data.name + ".stderr")
        with stderr.open("w") as err:
            proc = subprocess.Popen(
                [
                    str(MEMLANE),
                    "serve",
                    "--data",
                    str(data),
                    "--json",
                    "--mcp-http",
                    "127.0.0.1:0",
                    "--health-listen",
                    "127.0.0.1:0",
                    *args,
                ],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                preexec_fn=_limit_descriptors if limited else None,
            )
        line = read_line(proc.stdout, TIMEOUT)
        if not line:
            proc.kill()
            raise RuntimeError(f"memlane serve did not start: {stderr.read_text()}")
        return cls(proc, json.loads(line), stderr)

    def stop(self) -> int:
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=TIMEOUT)
        finally:
            self.proc.kill()
            self.proc.communicate()

    def status_kib(self, field_name: str) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
        raise RuntimeError(f"no {field_name} in /proc/{self.proc.pid}/status")

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stderr_bytes(self) -> int:
        return self.stderr.stat().st_size

    def address(self, port: str) -> tuple[str, int]:
        url = self.shown[port].split("://")[-1].split("/")[0]
        host, number = url.rsplit(":", 1)
        return host, int(number)

    def url(self, port: str) -> str:
        return str(self.shown[port])


def _status(request: urllib.request.Request | str, timeout: float = 5.0) -> int | None:
    """The status of an answer, or None when the connection closed without one."""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def _initialize(url: str, token: str, timeout: float = 5.0) -> int | None:
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
        timeout,
    )


class Probe:
    """While open, every 50 ms: the serve process's VmRSS and descriptors, and ``/healthz``
    asked once (its seconds, and whether it answered 200)."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.base_kib = served.status_kib("VmRSS")
        self.peak_kib = self.base_kib
        self.max_fds = 0
        self.slowest = 0.0
        self.asked = self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _loop(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(0.05):
                return

    def _sample(self) -> None:
        health = self.served.url("health") + "/healthz"
        self.peak_kib = max(self.peak_kib, self.served.status_kib("VmRSS"))
        self.max_fds = max(self.max_fds, self.served.fds())
        started = time.perf_counter()
        ok = _status(health) == 200
        self.slowest = max(self.slowest, time.perf_counter() - started)
        self.asked += 1
        self.failed += not ok

    @property
    def growth_mib(self) -> float:
        return (self.peak_kib - self.base_kib) / 1024

    def report(
        self,
        report: Report,
        attack: str,
        *,
        fds: bool = False,
        rss_bound: float = RSS_BOUND_MIB,
        rss_why: str = "",
    ) -> None:
        report.add(
            "serve RSS growth (peak VmRSS − before)",
            f"{self.growth_mib:,.1f} MiB",
            f"≤ {rss_bound:,.0f} MiB{rss_why}",
            self.growth_mib <= rss_bound,
            attack,
        )
        report.add(
            "longest /healthz answer",
            f"{self.slowest:.3f} s",
            f"< {HEALTH_BOUND_S:g} s",
            self.slowest < HEALTH_BOUND_S,
            attack,
        )
        report.add(
            "/healthz not answered 200",
            f"{self.failed} of {self.asked}",
            "0",
            self.failed == 0,
            attack,
        )
        if fds:
            report.add(
                "descriptors held (most seen)",
                f"{self.max_fds:,}",
                f"< {DESCRIPTORS:,}",
                self.max_fds < DESCRIPTORS,
                attack,
            )


def _connections(address: tuple[str, int], n: int, head: bytes = b"") -> list[socket.socket]:
    """``n`` plain TCP connections (each sending ``head``); one the node closed while they
    were made counts too."""
    out = []
    for _ in range(n):
        with contextlib.suppress(OSError):
            conn = socket.create_connection(address, timeout=5)
            out.append(conn)
            if head:
                conn.sendall(head)
    return out


def _close(conns: Sequence[socket.socket]) -> None:
    for conn in conns:
        conn.close()


# -- 1. frames of empty arrays ----------------------------------------------------------------


def _bomb() -> bytes:
    """4 MiB of empty arrays, 10,000 to an array (each within msgpack's length limits)."""
    arrays = (MAX_FRAME_BYTES - 3) // 10_003
    body = b"\xdc" + arrays.to_bytes(2, "big") + (b"\xdc\x27\x10" + b"\x90" * 10_000) * arrays
    return len(body).to_bytes(4, "big") + body


def _member_context(data: Path) -> certs.ssl.SSLContext:
    ca, cert = (certs.load_pem((data / n).read_bytes()) for n in (CA_FILE, NODE_CERT_FILE))
    context = certs.client_context(ca, cert, certs.private_key(data / NODE_KEY_FILE))
    context.check_hostname = False
    return context


async def _send_bombs(address: tuple[str, int], members: Sequence[Path]) -> list[list[int]]:
    """A bomb from each member at once, each on its own link (mutual TLS, hello, the node's
    digest heard; at most eight in their handshake at once, the per-address bound); the error
    codes the node answered each with."""
    keys = []
    for member in members:
        async with Node.open(member) as node:
            mesh = node.info.mesh
            keys.append(node.key.public)
    bomb, handshakes = _bomb(), asyncio.Semaphore(8)

    async def live(member: Path, key: bytes) -> RawPeer:
        peer = RawPeer(mesh, key)
        async with handshakes:
            peer.reader, peer.writer = await asyncio.open_connection(
                *address, ssl=_member_context(member)
            )
        peer.say(peer.hello, Credit(1024, 1 << 31))
        await peer.until(FrontierDigest, within=30)
        return peer

    async def refused(peer: RawPeer) -> list[int]:
        peer.send_raw(bomb)
        return [m.code for m in await peer.closed(within=60) if isinstance(m, Error)]

    linked = await asyncio.gather(*map(live, members, keys))
    try:
        return await asyncio.gather(*map(refused, linked))
    finally:
        for peer in linked:
            peer.close()


def _frames(served: Served, site: dict[str, Any], sizes: Sizes, report: Report) -> None:
    n, address = sizes.frames, served.address("sync")
    progress("hostile: one frame of 4 MiB of empty arrays from a member")
    with Probe(served) as alone:
        asyncio.run(_send_bombs(address, site["members"][:1]))
    report.add("RSS growth, one frame alone", f"{alone.growth_mib:,.1f} MiB", "", None, FRAMES)
    progress(f"hostile: {n} frames of 4 MiB of empty arrays at once, from {n} members")
    with Probe(served) as probe:
        answers = asyncio.run(_send_bombs(address, site["members"]))
    refused = sum(bool(codes) for codes in answers)
    report.add(f"frames refused with an error, of {n}", f"{refused}", f"{n}", refused == n, FRAMES)
    # A link holds at most one frame unread (docs/protocol.md §9): the frames themselves, and
    # the slack every other row is allowed.
    held = n * MAX_FRAME_BYTES / (1 << 20) + RSS_BOUND_MIB
    probe.report(report, FRAMES, rss_bound=held, rss_why=f" ({n} frames + {RSS_BOUND_MIB})")
    time.sleep(2.0)
    # The frames are freed when their links end (tests/node/test_sync_faults.py checks it with
    # the collector held off); the C allocator keeps freed pages for the next burst, which the
    # row after shows reusing them rather than taking more.
    kept = (served.status_kib("VmRSS") - probe.base_kib) / 1024
    report.add(
        "RSS kept 2 s after (VmRSS − before)",
        f"{kept:,.1f} MiB",
        f"≤ {held:,.0f} MiB (the burst's own)",
        kept <= held,
        FRAMES,
    )
    progress(f"hostile: {n} frames at once again")
    with Probe(served) as again:
        asyncio.run(_send_bombs(address, site["members"]))
    more = (again.peak_kib - probe.peak_kib) / 1024  # kept memory reused, or more taken
    report.add(
        "a second burst: peak VmRSS beyond the first's",
        f"{more:,.1f} MiB",
        f"≤ {RSS_BOUND_MIB} MiB",
        more <= RSS_BOUND_MIB,
        FRAMES,
    )
    hwm = served.status_kib("VmHWM") / 1024
    report.add("serve VmHWM after", f"{hwm:,.0f} MiB", "", None, FRAMES)


# -- 2. plain connections to the sync port ------------------------------------------------------


def _sync_connections(served: Served, site: dict[str, Any], sizes: Sizes, report: Report) -> None:
    n = sizes.sync_connections
    progress(f"hostile: {n} plain TCP connections to the sync port")
    logged = served.stderr_bytes()
    with Probe(served) as probe:
        held = _connections(served.address("sync"), n)
        mcp = _initialize(served.url("mcp_http"), site["probe"])
        time.sleep(1.0)  # held a while: the handshake timeout is 10 s
        _close(held)
    probe.report(report, SYNC_TCP, fds=True)
    report.add("MCP initialize while they are open", str(mcp), "200", mcp == 200, SYNC_TCP)
    wrote = served.stderr_bytes() - logged
    report.add("stderr written meanwhile", f"{wrote:,} B", "≤ 1,000 B", wrote <= 1_000, SYNC_TCP)


# -- 3. MCP HTTP ------------------------------------------------------------------------------


def _open_sessions(address: tuple[str, int], token: str, n: int) -> dict[int, int]:
    """``n`` initialize requests with ``token`` on one kept-alive connection: answers by
    status."""
    body = json.dumps(INITIALIZE).encode()
    headers = {**ACCEPT, "Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    statuses: dict[int, int] = {}
    conn = http.client.HTTPConnection(*address, timeout=10)
    try:
        for _ in range(n):
            conn.request("POST", "/mcp", body, headers)
            answer = conn.getresponse()
            answer.read()
            statuses[answer.status] = statuses.get(answer.status, 0) + 1
            if answer.will_close:
                conn.close()
                conn = http.client.HTTPConnection(*address, timeout=10)
    finally:
        conn.close()
    return statuses


def _sessions(served: Served, site: dict[str, Any], sizes: Sizes, report: Report) -> None:
    n = sizes.sessions
    progress(f"hostile: one read-only token opening {n:,} MCP sessions")
    address = served.address("mcp_http")
    with Probe(served) as probe:
        with ThreadPoolExecutor(2) as pool:
            parts = list(
                pool.map(lambda k: _open_sessions(address, site["reader"], k), [n // 2, n - n // 2])
            )
        other = _initialize(served.url("mcp_http"), site["writer"])
    opened = sum(p.get(200, 0) for p in parts)
    refused = sum(p.get(429, 0) for p in parts)
    report.add(f"sessions opened by the token, of {n:,}", f"{opened}", "16", opened == 16, MCP)
    report.add("refused 429", f"{refused:,}", f"{n - 16:,}", refused == n - 16, MCP)
    report.add("another token's initialize", str(other), "200", other == 200, MCP)
    report.add(
        "RSS growth, sessions",
        f"{probe.growth_mib:,.1f} MiB",
        f"≤ {RSS_BOUND_MIB} MiB",
        probe.growth_mib <= RSS_BOUND_MIB,
        MCP,
    )


def _slow(served: Served, site: dict[str, Any], sizes: Sizes, report: Report) -> None:
    n = sizes.slow_connections
    progress(f"hostile: {n:,} slow MCP connections (half a request head each)")
    with Probe(served) as probe:
        opened = time.monotonic()
        slow = _connections(served.address("mcp_http"), n, PARTIAL_HEAD)
        answered = None
        while time.monotonic() - opened < 30:
            if _initialize(served.url("mcp_http"), site["probe"], timeout=2) == 200:
                answered = time.monotonic() - opened
                break
            time.sleep(0.25)
        _close(slow)
    figure = "never" if answered is None else f"{answered:.1f} s"
    report.add(
        "a real client answered 200 after",
        figure,
        "≤ 13 s (header_timeout 10 s)",
        answered is not None and answered <= 13,
        MCP,
    )
    report.add(
        "descriptors held, slow connections",
        f"{probe.max_fds:,}",
        f"< {DESCRIPTORS:,}",
        probe.max_fds < DESCRIPTORS,
        MCP,
    )
    report.add(
        "RSS growth, slow connections",
        f"{probe.growth_mib:,.1f} MiB",
        f"≤ {RSS_BOUND_MIB} MiB",
        probe.growth_mib <= RSS_BOUND_MIB,
        MCP,
    )


def _post_body(address: tuple[str, int], token: str, body: bytes) -> tuple[int | None, float]:
    """POST ``body`` on a socket of its own, sent from a thread while the answer is read (the
    node answers a body beyond its limit before reading it all, and closes): the status and
    the seconds to it."""
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: {address[0]}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nAccept: {ACCEPT['Accept']}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    started = time.perf_counter()
    with socket.create_connection(address, timeout=60) as conn:
        sender = threading.Thread(target=_send_quietly, args=(conn, head + body), daemon=True)
        sender.start()
        answer = b""
        with contextlib.suppress(OSError):
            while b"\r\n" not in answer and (chunk := conn.recv(65536)):
                answer += chunk
        seconds = time.perf_counter() - started
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)  # wakes the sender
        sender.join()
    status = answer.split(b" ", 2)[1] if answer.startswith(b"HTTP/1.1 ") else b""
    return (int(status) if status.isdigit() else None), seconds


def _send_quietly(conn: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(data)


def _bodies(served: Served, site: dict[str, Any], sizes: Sizes, report: Report) -> None:
    n = sizes.bodies
    body = b"[" + b",".join([b"[]"] * ((4 << 20) // 3)) + b"]"  # 1.4 M empty arrays, 4 MiB
    progress(f"hostile: {n} bodies of {len(body) / (1 << 20):.1f} MiB of [] at once")
    with Probe(served) as probe, ThreadPoolExecutor(n) as pool:
        answers = list(
            pool.map(
                lambda _: _post_body(served.address("mcp_http"), site["probe"], body), range(n)
            )
        )
    statuses = sorted({s for s, _ in answers}, key=str)
    slowest = max(t for _, t in answers)
    report.add(
        f"{n} bodies answered",
        ", ".join(map(str, statuses)),
        "413 or 400",
        set(statuses) <= {413, 400},
        MCP,
    )
    report.add("slowest answer", f"{slowest:.2f} s", "< 2 s", slowest < 2, MCP)
    report.add(
        "RSS growth, bodies",
        f"{probe.growth_mib:,.1f} MiB",
        f"≤ {RSS_BOUND_MIB} MiB",
        probe.growth_mib <= RSS_BOUND_MIB,
        MCP,
    )
    report.add(
        "longest /healthz answer, bodies",
        f"{probe.slowest:.3f} s",
        f"< {HEALTH_BOUND_S:g} s",
        probe.slowest < HEALTH_BOUND_S,
        MCP,
    )


# -- 4. the join port and discovery -------------------------------------------------------------


def _join(served: Served, root: Path, sizes: Sizes, report: Report) -> None:
    n = sizes.idle_joins
    progress(f"hostile: {n} idle connections on the join port, then a real join")
    data = root / "one"
    invite = memlane("mesh", "invite", "--data", str(data), "--label", "bench").stdout.strip()
    host, port = served.address("join")
    idle = _connections((host, port), n)
    opened = time.monotonic()
    done = memlane(
        "init", "--data", str(root / "joined"), "--join", invite,
        "--authority", f"{host}:{port}", "--json", check=False,
    )  # fmt: skip
    took = time.monotonic() - opened
    _close(idle)
    report.add(
        f"memlane init --join, run once ({n} idle, same address)",
        f"{took:.1f} s" if done.returncode == 0 else f"exit {done.returncode}",
        "joined, ≤ 2 s",
        done.returncode == 0 and took <= 2,
        JOIN,
    )


def _discovery(one: Served, root: Path, sizes: Sizes, report: Report) -> None:
    n = sizes.squatters
    progress(f"hostile: {n} zeroconf services with the mesh id, then the real node")
    (root / "two" / "config.toml").write_text('[discovery]\ninterfaces = ["127.0.0.1"]\n')
    mesh, key = asyncio.run(_mesh_and_key(root / "one"))
    one_id = asyncio.run(node_id_of(root / "one"))
    silent = socket.create_server(("127.0.0.1", 0), backlog=n)  # accepts, says nothing
    ports = [closed_port() for _ in range(n // 2)]
    ports += [silent.getsockname()[1]] * (n - len(ports))
    advertiser = Advertiser()
    two = Served.start(root / "two", "--sync-listen", "127.0.0.1:0", "--discovery", "on")
    try:
        advertiser.advertise(
            [(f"squatter-{i}", mesh, os.urandom(32), p) for i, p in enumerate(ports)]
        )
        squatted = {f"127.0.0.1:{p}" for p in ports}
        _wait(
            30,
            lambda: (
                sum(r["address"] in squatted for r in peers(root / "two")["peers"]) >= min(n, 16)
            ),
        )
        advertised = time.monotonic()
        sync_port = one.address("sync")[1]
        advertiser.advertise([(f"memlane-{one_id}", mesh, key, sync_port)])
        dialled = _wait(60, lambda: connected(root / "two", one_id))
    finally:
        advertiser.close()
        silent.close()
        two.stop()
    seconds = None if dialled is None else dialled - advertised
    figure = "never" if seconds is None else f"{seconds:.1f} s"
    report.add(
        f"the real node linked after ({n} squatters first)",
        figure,
        "≤ 30 s (evict_after 10 s)",
        seconds is not None and seconds <= 30,
        JOIN,
    )


async def _mesh_and_key(data: Path) -> tuple[bytes, bytes]:
    async with Node.open(data) as node:
        return node.info.mesh, node.key.public


def _wait(within: float, probe: Callable[[], Any]) -> float | None:
    """The monotonic time ``probe()`` first held, polled every 0.2 s; None if not within."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if probe():
            return time.monotonic()
        time.sleep(0.2)
    return None


# -- 5. the pending area ------------------------------------------------------------------------


def _strangers(mesh: bytes, n: int) -> list[Entry]:
    """Junk: first entries of writers no ``member.add`` admits, each waiting for one."""
    return [ForeignWriter(mesh, seed=os.urandom(32)).next() for _ in range(n)]


async def _live(node: Node, address: tuple[str, int]) -> RawPeer:
    peer = RawPeer(node.info.mesh)
    await peer.connect(address)
    peer.say(peer.hello, Credit(1024, 1 << 31))
    peer.say(*await peer.until(FrontierDigest))
    await peer.until(Credit)
    return peer


async def _push(peer: RawPeer, entries: Sequence[Entry], window: int) -> None:
    """``entries`` a window at a time, each after the node gave its credit back."""
    grants = len([m for m in peer.messages() if isinstance(m, Credit)])
    for at in range(0, len(entries), window):
        peer.say(Push(wire(entries[at : at + window])))
        grants += 1
        await peer.until(Credit, count=grants, within=30)


async def _pending(root: Path, n: int) -> dict[str, Any]:
    await Node.init(root / "pending")
    async with Node.open(root / "pending") as node:
        sync = Sync(node.replica(), key=node.key.public)
        writer = ForeignWriter(node.info.mesh)
        await admit(node, writer)
        e1, e2 = writer.run(2)
        junk = _strangers(node.info.mesh, n)
        window = min(sync.options.link.credit_entries, MAX_BATCH_ENTRIES)

        async def accept(reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await sync.attach(reader, w)

        async with sync:
            server = await asyncio.start_server(accept, "127.0.0.1", 0)
            address = server.sockets[0].getsockname()[:2]
            hostile, honest = await _live(node, address), await _live(node, address)
            try:
                started = time.perf_counter()
                await _push(hostile, junk, window)
                flood = time.perf_counter() - started
                waiting = await pending(node)
                await _push(honest, [e2], window)
                held = e2.id in await pending(node)
                await _push(honest, [e1], window)
                stored = {e.id for e in await node.entries()}
            finally:
                hostile.close()
                honest.close()
                server.close()
        junk_ids = {e.id for e in junk}
        return {
            "flood": flood,
            "junk held": len(waiting & junk_ids),
            "held": held,
            "released": {e1.id, e2.id} <= stored,
            "junk stored": len(stored & junk_ids),
        }


def _pending_flood(root: Path, sizes: Sizes, report: Report) -> None:
    n = sizes.junk
    progress(f"hostile: a member pushes {n:,} junk entries into the pending area")
    found = asyncio.run(_pending(root, n))
    share = min(n, 1_000)
    report.add(
        f"junk pushed ({n:,} entries)",
        f"{found['flood']:.2f} s",
        "< 3 s (the attack)",
        None,
        PENDING,
    )
    report.add(
        "junk held in the pending area",
        f"{found['junk held']:,}",
        f"≤ {share:,} (pending_per_source)",
        found["junk held"] <= share,
        PENDING,
    )
    report.add("junk stored", f"{found['junk stored']:,}", "0", found["junk stored"] == 0, PENDING)
    ok = found["held"] and found["released"]
    said = f"held {_yes(found['held'])}, released {_yes(found['released'])}"
    report.add("honest peer's gap-waiting entry", said, "held, released", ok, PENDING)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


# -- 6. a writer's logs -------------------------------------------------------------------------

_LOG_SEED = b"\x05" * 32
_BASE = 1_790_000_000_000


def _one_entry_logs(mesh: bytes, n: int) -> list[Entry]:
    """``n`` logs of one writer, one entry each, opened 10 ms apart."""
    return [
        ForeignWriter(mesh, seed=_LOG_SEED, epoch=(i + 1).to_bytes(8), wall=_BASE + 10 * i).next()
        for i in range(n)
    ]


async def _default_max_logs(root: Path, n: int) -> tuple[int, int]:
    await Node.init(root / "logs-default")
    async with Node.open(root / "logs-default") as node:
        key = ForeignWriter(b"", seed=_LOG_SEED).key.public
        await node.membership.admit_member(key, cert_expires=FAR_FUTURE_MS)
        report = await node.receive(_one_entry_logs(node.info.mesh, n), source="peer")
        return report.stored, report.rejected


async def _writer_logs(node: Node) -> int:
    key = ForeignWriter(b"", seed=_LOG_SEED).key.public
    frontier = (await node.replica().snapshot()).frontier
    return sum(t.writer == key for t in frontier.tips)


async def _granted(dirs: dict[str, Path], n: int) -> dict[str, Any]:
    async with Node.open(dirs["a"]) as a:
        key = ForeignWriter(b"", seed=_LOG_SEED).key.public
        await a.membership.admit_member(key, cert_expires=FAR_FUTURE_MS, max_logs=n)
        assert (await a.receive(_one_entry_logs(a.info.mesh, n), source="bundle")).stored == n
    async with Node.open(dirs["a"]) as a, Node.open(dirs["b"]) as b:
        one, two = SyncService(a), SyncService(b)
        started = time.perf_counter()
        await one.start(Listen("127.0.0.1", 0), [])
        host, port = one.address or ("", 0)
        await two.start(None, [Listen(host, port)])
        try:
            await converged([a, b], [one.sync, two.sync], within=180)
            seconds = time.perf_counter() - started
        finally:
            await two.close()
            await one.close()
        return {
            "seconds": seconds,
            "logs": (await _writer_logs(a), await _writer_logs(b)),
            "same": await frontier_digest(a) == await frontier_digest(b),
        }


def _logs(root: Path, sizes: Sizes, report: Report) -> None:
    n = sizes.logs
    progress(f"hostile: one writer opening {n:,} one-entry logs")
    stored, rejected = asyncio.run(_default_max_logs(root, n))
    report.add(
        f"logs held under the default max_logs, of {n:,}",
        f"{stored:,} held, {rejected:,} rejected",
        f"{DEFAULT_MAX_LOGS} held",
        stored == DEFAULT_MAX_LOGS and rejected == n - DEFAULT_MAX_LOGS,
        LOGS,
    )
    progress(f"hostile: two nodes converging over TLS, max_logs {n:,} granted")
    found = asyncio.run(_granted(certified_mesh(root / "logs", ["a", "b"]), n))
    report.add(
        f"two nodes converged over TLS ({n:,} logs)",
        f"{found['seconds']:.1f} s",
        "≤ 60 s",
        found["seconds"] <= 60,
        LOGS,
    )
    held = found["logs"]
    report.add(
        "frontier digests match; the writer's logs on each",
        f"{found['same']}, {held[0]:,} / {held[1]:,}",
        f"True, {n:,} / {n:,}",
        found["same"] and held == (n, n),
        LOGS,
    )


# -- 7. crafted archives ------------------------------------------------------------------------


async def _crafted(root: Path) -> dict[str, tuple[float, str, bool]]:
    await Node.init(root / "A")
    archive = root / "a.archive"
    await create_archive(root / "A", archive, SECRET, now=system_wall())
    manifest = manifest_of(archive)
    costly = json.dumps(manifest | {"kdf": manifest["kdf"] | {"log_n": 22, "r": 16, "p": 4}})
    texts = {"scrypt log_n 22, r 16, p 4": costly, "JSON 200,000 deep": deeper(manifest, 200_000)}
    out = {}
    for i, (name, text) in enumerate(texts.items()):
        crafted = rewritten(archive, root / f"c{i}.archive", {"manifest.json": text.encode()})
        target = root / f"B{i}"
        target.mkdir()
        started, said = time.perf_counter(), "restored"
        try:
            await Node.restore_archive(crafted, target, SECRET)
        except ArchiveError as exc:
            said = str(exc)
        out[name] = (time.perf_counter() - started, said, not any(target.iterdir()))
    return out


def _archives(root: Path, report: Report) -> None:
    progress("hostile: crafted archives")
    for name, (seconds, said, empty) in asyncio.run(_crafted(root / "archives")).items():
        refused = said != "restored"
        report.add(
            f"{name}: refused in",
            f"{seconds:.3f} s",
            "< 1 s, refused",
            refused and seconds < 1,
            ARCHIVES,
        )
        report.add(f"{name}: nothing written", str(empty), "True", empty, ARCHIVES)
        report.notes.append(f"{name}: {said}")


# -- the run ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _descriptors(n: int) -> Iterator[None]:
    """This process's soft RLIMIT_NOFILE raised to ``n`` (it opens the attacks' sockets)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(n, hard)), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _site(root: Path, sizes: Sizes) -> dict[str, Any]:
    """The mesh: ``one`` (the authority, served), ``two`` (served for discovery), and a
    member for each frame of row 1 (one link per node key)."""
    members = [f"m{i:02}" for i in range(sizes.frames)]
    dirs = certified_mesh(root, ["one", "two", *members])
    site: dict[str, Any] = dict(dirs)
    site["members"] = [dirs[name] for name in members]
    site["writer"] = asyncio.run(issue(dirs["one"], "alice", ["read:workspace", "write:workspace"]))
    site["reader"] = asyncio.run(issue(dirs["one"], "bob", ["read:workspace"]))
    site["probe"] = asyncio.run(issue(dirs["one"], "carol", ["read:workspace"]))  # a client
    return site


def _served_attacks(root: Path, sizes: Sizes, report: Report) -> None:
    site = _site(root, sizes)
    one = Served.start(
        site["one"],
        "--sync-listen",
        "127.0.0.1:0",
        "--join-listen",
        "127.0.0.1:0",
        "--discovery",
        "off",
        limited=True,
    )
    try:
        _frames(one, site, sizes, report)
        _sync_connections(one, site, sizes, report)
        _sessions(one, site, sizes, report)
        _slow(one, site, sizes, report)
        _bodies(one, site, sizes, report)
        _join(one, root, sizes, report)
        _discovery(one, root, sizes, report)
        report.add(
            "serve stderr: tracebacks",
            str(one.stderr.read_text().count("Traceback")),
            "0",
            "Traceback" not in one.stderr.read_text(),
            PROCESS,
        )
    finally:
        code = one.stop()
    report.add("serve exit on SIGTERM", str(code), "0", code == 0, PROCESS)


def run(*, quick: bool, workdir: Path) -> Report:
    sizes = QUICK if quick else FULL
    configure_logging("WARNING")  # the in-process nodes' lines on stderr, only what matters
    report = Report(
        f"hostile input — issue 19's attacks, {os.cpu_count()} CPUs{SMOKE if quick else ''}"
    )
    started = time.perf_counter()
    with _descriptors(4 * max(sizes.sync_connections, sizes.slow_connections)):
        _served_attacks(workdir / "served", sizes, report)
    _pending_flood(workdir, sizes, report)
    _logs(workdir, sizes, report)
    _archives(workdir, report)
    report.lines.sort(key=lambda ln: ln.attack)
    report.notes[:0] = [
        "rows 1-4: one memlane serve process (RLIMIT_NOFILE 1,024, default limits), sampled "
        "every 50 ms (VmRSS, /proc/PID/fd, /healthz); rows 5-7 in this process",
        f"the whole run took {time.perf_counter() - started:.0f} s",
    ]
    return report
