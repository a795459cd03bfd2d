"""The MCP benchmark (docs/benchmarks.md): ``e_timeline`` list calls over streamable HTTP
against the same call through the Python API, in-process.

The store is the ``changes`` benchmark's cached store of 100,000 SRs in one workspace (built
through the real receive path the first time; ``--quick``: 2,000).  This process opens it once,
and on that one ``Node``:

- **in-process** (the limit): ``clients`` asyncio tasks, each awaiting
  ``node.e_timeline(caller, action="list")`` in a loop;
- **over HTTP**: ``node.mcp.http.http_server`` serves the node on 127.0.0.1 (port 0) inside this
  process's event loop, as ``memlane serve`` does, and ``clients`` SDK clients in separate client
  processes (``python -m tests.bench.mcp client …``) each hold their own streamable-HTTP
  connection, with the reader's bearer token on every request, and call
  ``e_timeline {"action": "list"}`` in a loop — once in the SDK's default era (it negotiates the
  per-request protocol) and once in the initialize-handshake era (a session with an id);
- and once with **minimal clients**: the per-request era's wire exactly as the SDK client sends
  it (the same headers and JSON-RPC body, one keep-alive HTTP/1.1 connection each), without
  the SDK's own machinery — so the clients' CPU, which on a two-CPU machine competes with the
  server's, is small, as it is when the agents run on other machines;
- **the SDK's floor**: the same clients (the per-request era's, SDK and minimal) against an MCP
  server of the same SDK with nothing of memlane in it, served by plain uvicorn in the same
  event loop: once answering a no-op tool (``noop``, the answer ``{}``) — what any server on
  this SDK and this machine costs a call — and once a tool (``same``) that answers memlane's
  first page as it stands, built once: what the SDK costs a call of that answer's size and
  schema, so that what is memlane's own can be told from what the answer costs.  The target
  is memlane's calls/s over this last floor's, with the SDK's clients.

Each round runs every side for the same wall time, in an order that alternates round by round;
the clients wait for the parent's "go" between rounds, their connections open.  Every call's
latency is recorded.  The first answer of every HTTP client must equal the in-process answer.
Nothing here asserts on speed; the target is printed, not enforced.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sqlite3
import statistics
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from node.access.callers import Caller
from node.address import Listen
from node.mcp.http import http_server
from node.node import Node
from node.tools.catalog import by_name
from tests.bench import changes
from tests.bench.common import SMOKE, Check, peak_rss_mib, progress, quantile, table, tail
from tests.bench.timeline import READER, WORKSPACE

__all__ = ["FULL", "MODES", "QUICK", "Report", "Sizes", "labels", "run"]

TOOL = "e_timeline"
ARGUMENTS: dict[str, Any] = {"action": "list"}  # the default page: 20 SRs, newest first
# memlane's calls/s over HTTP ≥ 0.7 × the SDK floor's carrying the same answer, with the SDK's
# clients.  Issue 23 set it against the no-op tool; the SDK's own server handing back the same
# answer reaches only ~0.4 of that, so it measured the answer's size (docs/benchmarks.md §mcp).
TARGET = 0.7
# The floor server's tools (no arguments): the answer {}, and memlane's answer, built once.
NOOP, SAME = "noop", "same"
TARGET_ERA = (SAME, "auto")  # the floor and the clients the target is measured against
FLOORS = {NOOP: "no-op tool", SAME: "the same answer"}
FLOOR_MODES = ("auto", "minimal")  # the eras the floor is measured in
TOKEN_ENV = "MEMLANE_BENCH_MCP_TOKEN"  # the clients' token: never on a command line
# The client's mode → how the table names it.
MODES = {
    "auto": "per-request era",
    "legacy": "handshake era",
    "minimal": "per-request era, minimal clients",
}
_PER_REQUEST = "2026-07-28"  # the protocol version the minimal clients speak
_READY_TIMEOUT_S = 120.0  # the clients' start-up: imports, connections, warm-up
_LINE_LIMIT = 1 << 24  # a round's report is one JSON line of every latency
_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Sizes:
    store: changes.Sizes  # the store measured is this one's small store
    clients: int = 8  # concurrent clients (HTTP) and tasks (in-process)
    processes: int = 2  # client processes per era; the clients are split among them
    rounds: int = 3
    seconds: float = 5.0  # each side's wall time per round
    warmup: int = 20  # calls per client (and per task) before the first round
    modes: tuple[str, ...] = ("auto", "legacy", "minimal")
    name: str = "mcp"


FULL = Sizes(changes.FULL)
QUICK = Sizes(
    changes.Sizes(
        large=2_000, small=2_000, changed=100, batch=1_000, reuse_timeline=False, name="mcp-quick"
    ),
    clients=2,
    processes=1,
    rounds=1,
    seconds=1.0,
    warmup=3,
    name="mcp-quick",
)


def in_process_label(sizes: Sizes) -> str:
    return f"in-process Node.e_timeline, {sizes.clients} tasks"


def http_label(sizes: Sizes, mode: str) -> str:
    return f"HTTP MCP {MODES[mode]}, {sizes.clients} clients"


def floor_label(sizes: Sizes, mode: str, tool: str) -> str:
    return f"SDK floor, {FLOORS[tool]}, {MODES[mode]}, {sizes.clients} clients"


def ratio_label(mode: str) -> str:
    return f"HTTP {MODES[mode]} / in-process"


def floor_ratio_label(mode: str, tool: str) -> str:
    return f"HTTP {MODES[mode]} / SDK floor, {FLOORS[tool]}"


def _floor_modes(sizes: Sizes) -> list[str]:
    return [m for m in sizes.modes if m in FLOOR_MODES]


SAME_ANSWERS = "HTTP answers equal in-process"


def labels(sizes: Sizes) -> dict[str, list[str]]:
    """The labels the table prints, by part (the smoke test looks for each)."""
    floors = [(m, t) for t in FLOORS for m in _floor_modes(sizes)]
    rows = [
        in_process_label(sizes),
        *(http_label(sizes, m) for m in sizes.modes),
        *(floor_label(sizes, m, t) for m, t in floors),
    ]
    checks = [
        *(floor_ratio_label(m, t) for m, t in floors),
        *(ratio_label(m) for m in sizes.modes),
        SAME_ANSWERS,
    ]
    return {"rows": rows, "checks": checks}


# -- the report --------------------------------------------------------------------------------


@dataclass(slots=True)
class Side:
    """One side's rounds: calls and window seconds of each, every call's latency, the CPU
    seconds spent (this process; and the client processes, over HTTP)."""

    label: str
    calls: list[int] = field(default_factory=list)
    windows: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    rss_mib: float = 0.0
    note: str = ""

    @property
    def rates(self) -> list[float]:
        return [c / w for c, w in zip(self.calls, self.windows, strict=True)]

    @property
    def rate(self) -> float:
        """Calls per second: the median round's."""
        return statistics.median(self.rates)

    @property
    def total(self) -> int:
        return sum(self.calls)

    def ms(self, q: float) -> float:
        return quantile(self.latencies, q) * 1000


@dataclass(slots=True)
class Report:
    """What this benchmark prints (its own table: rates with latency quantiles)."""

    title: str
    sides: list[Side] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return render(self)


def _num(value: float) -> str:
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def render(report: Report) -> str:
    rows = [
        [
            s.label,
            _num(s.rate),
            f"{s.total:,}",
            _num(sum(s.windows)),
            _num(s.ms(0.5)),
            _num(s.ms(0.99)),
            f"{s.rss_mib:,.0f} MiB",
            s.note,
        ]
        for s in report.sides
    ]
    out = [report.title, ""]
    out += table(
        ["measurement", "calls/s", "calls", "seconds", "p50 ms", "p99 ms", "peak RSS", "note"],
        rows,
        right={1, 2, 3, 4, 5, 6},
    )
    return "\n".join(out + tail(report.checks, report.notes))


# -- the client processes ----------------------------------------------------------------------


def _answer(result: Any) -> dict[str, Any]:
    """A tool result's JSON: its structured content, which must equal its one text block."""
    if result.is_error:
        raise RuntimeError(f"{TOOL} refused: {result.content}")
    (block,) = result.content
    text = json.loads(block.text)
    if text != result.structured_content:
        raise RuntimeError("the text block and the structured content differ")
    answer: dict[str, Any] = result.structured_content
    return answer


@dataclass(frozen=True, slots=True)
class _Block:
    text: str


@dataclass(frozen=True, slots=True)
class _Result:
    """What ``_answer`` reads of a tool result, as the SDK's result has it."""

    is_error: bool
    content: list[_Block]
    structured_content: Any


class _MinimalClient:
    """The per-request era's wire and nothing else: each tool call one POST on a keep-alive
    HTTP/1.1 connection, with the headers and JSON-RPC body the SDK client sends (captured
    from it), the answer read by its Content-Length."""

    protocol_version = _PER_REQUEST

    def __init__(self, url: str, token: str) -> None:
        host, _, rest = url.removeprefix("http://").partition("/")
        self.host, self.path, self.token, self.next_id = host, "/" + rest, token, 0
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> _MinimalClient:
        name, port = self.host.rsplit(":", 1)
        self.reader, self.writer = await asyncio.open_connection(name, int(port))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.writer is not None:
            self.writer.close()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> _Result:
        """One call; on a connection the server closed while it idled (uvicorn's keep-alive
        timeout, between rounds), once more on a new one, as an HTTP client library does."""
        try:
            return await self._call(name, arguments)
        except (asyncio.IncompleteReadError, ConnectionError):
            await self.__aexit__()
            await self.__aenter__()
            return await self._call(name, arguments)

    async def _call(self, name: str, arguments: dict[str, Any]) -> _Result:
        assert self.reader is not None
        assert self.writer is not None
        self.next_id += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": _PER_REQUEST,
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": self.next_id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments, "_meta": meta},
            },
            separators=(",", ":"),
        ).encode()
        self.writer.write(
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}\r\n"
            f"Authorization: Bearer {self.token}\r\n"
            "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
            f"MCP-Protocol-Version: {_PER_REQUEST}\r\nMcp-Method: tools/call\r\n"
            f"Mcp-Name: {name}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
        if not head.startswith("http/1.1 200"):
            raise RuntimeError(f"HTTP answered {head.splitlines()[0]}")
        length = int(head.split("content-length:", 1)[1].split("\r\n", 1)[0])
        result = json.loads(await self.reader.readexactly(length))["result"]
        return _Result(
            result["isError"],
            [_Block(b["text"]) for b in result["content"]],
            result.get("structuredContent"),
        )


@contextlib.asynccontextmanager
async def _session(url: str, token: str, mode: str) -> AsyncIterator[Any]:
    """One client over streamable HTTP: its own HTTP connection, the bearer token on every
    request — the SDK's (in ``mode``), or a minimal one."""
    if mode == "minimal":
        async with _MinimalClient(url, token) as minimal:
            yield minimal
        return
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60.0) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=60.0) as client:
            yield client


def _emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _arguments(tool: str) -> dict[str, Any]:
    return ARGUMENTS if tool == TOOL else {}  # a floor's tools take none


async def _client_main(url: str, clients: int, mode: str, warmup: int, tool: str) -> None:
    """``clients`` sessions calling ``tool``: warm up, say ready (with each one's first
    answer), then run each round the parent starts (``go START END``, ``time.monotonic``
    instants) and report it."""
    token = os.environ[TOKEN_ENV]
    arguments = _arguments(tool)
    async with contextlib.AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(_session(url, token, mode)) for _ in range(clients)
        ]
        firsts = [_answer(await c.call_tool(tool, arguments)) for c in sessions]

        async def warm(client: Any) -> None:
            for _ in range(warmup):
                _answer(await client.call_tool(tool, arguments))

        await asyncio.gather(*(warm(c) for c in sessions))
        _emit({"ready": True, "protocol": sessions[0].protocol_version, "answers": firsts})
        while True:
            line = (await asyncio.to_thread(sys.stdin.readline)).split()
            if not line or line[0] != "go":
                break
            start, end = float(line[1]), float(line[2])
            await asyncio.sleep(max(0.0, start - time.monotonic()))
            cpu = time.process_time()
            done = await asyncio.gather(*(_loop(c, end, tool) for c in sessions))
            _emit(
                {
                    "latencies": [round(x, 7) for lat, _ in done for x in lat],
                    "last": max(last for _, last in done),
                    "cpu_s": time.process_time() - cpu,
                }
            )


async def _loop(client: Any, end: float, tool: str) -> tuple[list[float], float]:
    """Call until ``end``: every call's seconds, and when the last one returned."""
    latencies: list[float] = []
    arguments = _arguments(tool)
    while time.monotonic() < end:
        t0 = time.perf_counter()
        result = await client.call_tool(tool, arguments)
        latencies.append(time.perf_counter() - t0)
        if result.is_error:
            raise RuntimeError(f"{tool} refused: {result.content}")
    return latencies, time.monotonic()


@dataclass(slots=True)
class _Clients:
    """One era's client processes."""

    mode: str
    procs: list[asyncio.subprocess.Process]

    @classmethod
    async def start(
        cls, url: str, token: str, sizes: Sizes, mode: str, tool: str = TOOL
    ) -> _Clients:
        env = {**os.environ, TOKEN_ENV: token}
        procs = []
        for n in _share(sizes):
            procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "tests.bench.mcp",
                    "client",
                    "--url",
                    url,
                    "--clients",
                    str(n),
                    "--mode",
                    mode,
                    "--warmup",
                    str(sizes.warmup),
                    "--tool",
                    tool,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    env=env,
                    cwd=_ROOT,
                    limit=_LINE_LIMIT,
                )
            )
        return cls(mode, procs)

    async def read(self) -> list[dict[str, Any]]:
        """One message from every process."""

        async def one(proc: asyncio.subprocess.Process) -> dict[str, Any]:
            assert proc.stdout is not None
            line = await proc.stdout.readline()
            if not line:
                code = await proc.wait()
                raise RuntimeError(f"a {self.mode} client process exited ({code}); see stderr")
            message: dict[str, Any] = json.loads(line)
            return message

        return list(await asyncio.gather(*(one(p) for p in self.procs)))

    async def say(self, line: str) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{line}\n".encode())
            await proc.stdin.drain()

    async def stop(self) -> None:
        """Close their stdin (they leave their loop and their sessions); kill a straggler."""
        for proc in self.procs:
            if proc.stdin is not None and not proc.stdin.is_closing():
                proc.stdin.close()
        for proc in self.procs:
            try:
                await asyncio.wait_for(proc.wait(), 15.0)
            except TimeoutError:
                proc.kill()
                await proc.wait()


# -- measuring ---------------------------------------------------------------------------------

_LEAD_S = 0.05  # "go" is sent this long before the window opens


async def _in_process_round(
    node: Node, caller: Caller, clients: int, seconds: float, side: Side
) -> None:
    async def loop(end: float) -> tuple[list[float], float]:
        latencies: list[float] = []
        while time.monotonic() < end:
            t0 = time.perf_counter()
            await node.e_timeline(caller, **ARGUMENTS)
            latencies.append(time.perf_counter() - t0)
        return latencies, time.monotonic()

    start = time.monotonic() + _LEAD_S
    await asyncio.sleep(_LEAD_S)
    cpu = time.process_time()
    done = await asyncio.gather(*(loop(start + seconds) for _ in range(clients)))
    side.cpu_s += time.process_time() - cpu
    _record(side, start, [lat for lat, _ in done], max(last for _, last in done))


async def _http_round(clients: _Clients, seconds: float, side: Side) -> None:
    start = time.monotonic() + _LEAD_S
    cpu = time.process_time()
    await clients.say(f"go {start!r} {start + seconds!r}")
    async with asyncio.timeout(seconds + 60.0):
        reports = await clients.read()
    side.cpu_s += time.process_time() - cpu
    side.client_cpu_s += sum(r["cpu_s"] for r in reports)
    _record(side, start, [r["latencies"] for r in reports], max(r["last"] for r in reports))


def _record(side: Side, start: float, latencies: list[list[float]], last: float) -> None:
    calls = sum(len(lat) for lat in latencies)
    if calls == 0:
        raise RuntimeError(f"{side.label}: no call completed in the round")
    side.calls.append(calls)
    side.windows.append(last - start)
    for lat in latencies:
        side.latencies += lat
    side.rss_mib = peak_rss_mib()


# -- the SDK's floor ---------------------------------------------------------------------------


def _floor_app(host: str, same: dict[str, Any]) -> Any:
    """An MCP server of the same SDK with two tools that do nothing: ``NOOP`` answers ``{}``,
    ``SAME`` the answer ``same`` (its result built once) under the output schema of memlane's
    tool (which the SDK's clients check each answer against), as the SDK's streamable HTTP
    app at ``/mcp`` with plain JSON answers, as memlane's is (``node.mcp.http``)."""
    import mcp.types as types
    from mcp.server import Server

    def result(answer: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(answer))], structured_content=answer
        )

    results = {NOOP: result({}), SAME: result(same)}
    spec = by_name(TOOL)
    assert spec is not None
    schemas = {NOOP: {"type": "object"}, SAME: dict(spec.output_schema)}
    listing = types.ListToolsResult(
        tools=[
            types.Tool(name=name, input_schema={"type": "object"}, output_schema=schemas[name])
            for name in results
        ]
    )

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return listing

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return results[params.name]

    server = Server("floor", on_list_tools=list_tools, on_call_tool=call_tool)
    return server.streamable_http_app(streamable_http_path="/mcp", host=host, json_response=True)


class _InLoop(uvicorn.Server):
    """uvicorn in this benchmark's event loop, which handles no signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def _floor_server(same: dict[str, Any]) -> AsyncIterator[str]:
    """The floor server on 127.0.0.1 (port 0), uvicorn's defaults; its URL."""
    with Listen("127.0.0.1", 0).bind() as listener:
        host, port = listener.getsockname()[:2]
        config = uvicorn.Config(
            _floor_app(host, same),
            lifespan="on",
            log_config=None,
            log_level="warning",
            access_log=False,
        )
        server = _InLoop(config)
        serving = asyncio.create_task(server.serve(sockets=[listener]))
        try:
            yield f"http://{host}:{port}/mcp"
        finally:
            server.should_exit = True
            await serving


# -- the run ----------------------------------------------------------------------------------

Era = tuple[str, str]  # (the tool called: TOOL on memlane, or a floor's; the clients' mode)


async def _measure(sizes: Sizes, report: Report) -> None:
    path, meta, built = changes.store(sizes.store, sizes.store.small)
    token: str = meta["token"]
    async with Node.open(path) as node:
        caller = await node.authenticate(token)
        assert caller.has("read:workspace")
        assert not caller.is_admin
        expected = await node.e_timeline(caller, **ARGUMENTS)
        for _ in range(sizes.warmup):
            await node.e_timeline(caller, **ARGUMENTS)
        local = Side(in_process_label(sizes))
        sides = {(TOOL, m): Side(http_label(sizes, m)) for m in sizes.modes}
        sides |= {
            (t, m): Side(floor_label(sizes, m, t)) for t in FLOORS for m in _floor_modes(sizes)
        }
        with Listen("127.0.0.1", 0).bind() as listener:
            async with (
                http_server(node, listener) as endpoint,
                _floor_server(expected) as floor_url,
                contextlib.AsyncExitStack() as stack,
            ):
                eras: dict[Era, _Clients] = {}
                for tool, mode in sides:
                    url = endpoint.url if tool == TOOL else floor_url
                    eras[tool, mode] = await _Clients.start(url, token, sizes, mode, tool)
                    stack.push_async_callback(eras[tool, mode].stop)
                progress(
                    f"mcp: {sizes.clients} clients per era starting, serving "
                    f"{endpoint.url} and the floor {floor_url}"
                )
                async with asyncio.timeout(_READY_TIMEOUT_S):
                    ready = {era: await c.read() for era, c in eras.items()}
                for i in range(sizes.rounds):
                    order: list[Era | None] = [None, *eras]
                    for what in order if i % 2 == 0 else order[::-1]:
                        progress(
                            f"mcp: round {i + 1} of {sizes.rounds}: "
                            f"{'in-process' if what is None else _era(what)}"
                        )
                        if what is None:
                            await _in_process_round(
                                node, caller, sizes.clients, sizes.seconds, local
                            )
                        else:
                            await _http_round(eras[what], sizes.seconds, sides[what])
    report.sides += [local, *sides.values()]
    _ratios(report, local, sides)
    answers = {era: [a for msg in msgs for a in msg["answers"]] for era, msgs in ready.items()}
    ours = [a for (tool, _), got in answers.items() if tool == TOOL for a in got]
    same = sum(a == expected for a in ours)
    report.checks.append(
        Check(
            SAME_ANSWERS, f"{same} of {len(ours)}", "all", "PASS" if same == len(ours) else "FAIL"
        )
    )
    if same != len(ours):
        report.notes.append("MISMATCH: an HTTP answer differs from the in-process answer")
    wanted = {NOOP: {}, SAME: expected}
    if any(a != wanted[tool] for (tool, _), got in answers.items() if tool != TOOL for a in got):
        raise RuntimeError("the floor server answered something else than it was given")
    _notes(sizes, report, local, sides, ready, expected, path, meta, built)


def _era(era: Era) -> str:
    tool, mode = era
    return MODES[mode] if tool == TOOL else f"{MODES[mode]}, SDK floor, {FLOORS[tool]}"


def _ratios(report: Report, local: Side, sides: dict[Era, Side]) -> None:
    """memlane over each floor, era by era (the same-answer floor with the SDK's clients holds
    the target), then over in-process (information)."""
    for (tool, mode), floor in sides.items():
        if tool == TOOL:
            continue
        value = sides[TOOL, mode].rate / floor.rate
        target, verdict = "(info)", "(info)"
        if (tool, mode) == TARGET_ERA:
            target, verdict = f"≥ {TARGET:g}", "PASS" if value >= TARGET else "FAIL"
        report.checks.append(Check(floor_ratio_label(mode, tool), f"{value:.3f}", target, verdict))
    for (tool, mode), side in sides.items():
        if tool == TOOL:
            value = side.rate / local.rate
            report.checks.append(Check(ratio_label(mode), f"{value:.3f}", "(info)", "(info)"))


def _notes(
    sizes: Sizes,
    report: Report,
    local: Side,
    sides: dict[Era, Side],
    ready: dict[Era, list[dict[str, Any]]],
    expected: dict[str, Any],
    path: Path,
    meta: dict[str, Any],
    built: bool,
) -> None:
    local.note = f"{local.cpu_s / local.total * 1000:.2f} ms CPU a call"
    for era, side in sides.items():
        protocol = ready[era][0]["protocol"]
        side.note = (
            f"{protocol}; CPU a call: server {side.cpu_s / side.total * 1000:.2f} ms, "
            f"clients {side.client_cpu_s / side.total * 1000:.2f} ms"
        )
    for side in report.sides:
        spread = ", ".join(_num(r) for r in side.rates)
        report.notes.append(f"{side.label}: calls/s by round {spread}")
    how = "made by this run" if built else "reused from the cache"
    report.notes += [
        f"store {how} ({path.parent}): {meta['srs']:,} SRs in workspace "
        f"{WORKSPACE!r} plus {meta['changes']:,} changes (the changes benchmark's "
        f"store); the reader {READER} (read:workspace, not admin) sees "
        f"{len(expected['results'])} per page, has_more {expected['has_more']}",
        f"each call: {TOOL} {json.dumps(ARGUMENTS)} (the default page of 20); in-process: "
        f"node.e_timeline(caller, ...) with the caller authenticated once; HTTP: every "
        f"request's bearer token checked, and again by the tool call",
        f"HTTP: http_server on 127.0.0.1 in this process's event loop (the same Node); "
        f"{sizes.clients} clients per era (the SDK's, or minimal ones) in {_processes(sizes)}, "
        "each client its own connection; every era's clients stay connected, one era calls "
        "at a time",
        f"SDK floor: the same SDK's low-level server with two tools without arguments, {NOOP} "
        f"(the answer {{}}) and {SAME} (the in-process answer above, its result built once, "
        f"under {TOOL}'s output schema), "
        "its streamable HTTP app with JSON answers under plain uvicorn, in this process's "
        "event loop; no token checked",
        f"{sizes.rounds} round(s) of {sizes.seconds:g} s a side, the order alternating; calls/s "
        "is the median round's (calls / seconds from the window's start to the last return); "
        "p50 and p99 over every call of every round; CPU a call = process CPU time (all "
        "threads) / calls",
    ]


def _share(sizes: Sizes) -> list[int]:
    """How many clients each client process runs."""
    share = [len(range(i, sizes.clients, sizes.processes)) for i in range(sizes.processes)]
    return [n for n in share if n]


def _processes(sizes: Sizes) -> str:
    share = _share(sizes)
    if len(share) == 1:
        return "1 client process"
    each = f"{share[0]} each" if len(set(share)) == 1 else "/".join(map(str, share))
    return f"{len(share)} client processes ({each})"


def run(*, quick: bool, workdir: Path) -> Report:
    """Make (or reuse) the cached store, then time the calls on both sides."""
    del workdir  # the store is cached outside the run's temporary directory
    sizes = QUICK if quick else FULL
    smoke = SMOKE if quick else ""
    report = Report(
        f"mcp — {TOOL} list over streamable HTTP vs in-process, {sizes.store.small:,} SRs, "
        f"{sizes.clients} concurrent clients, Python {platform.python_version()}, SQLite "
        f"{sqlite3.sqlite_version}, {os.cpu_count()} CPUs{smoke}"
    )
    asyncio.run(_measure(sizes, report))
    return report


def _main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.bench.mcp client --url URL --clients N --mode MODE``: the client
    process (the token comes from the environment)."""
    parser = argparse.ArgumentParser(prog="python -m tests.bench.mcp")
    parser.add_argument("role", choices=["client"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--clients", type=int, required=True)
    parser.add_argument("--mode", choices=sorted(MODES), required=True)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--tool", default=TOOL)
    args = parser.parse_args(argv)
    asyncio.run(_client_main(args.url, args.clients, args.mode, args.warmup, args.tool))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
