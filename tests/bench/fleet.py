"""The fleet benchmark (docs/benchmarks.md §fleet): three served nodes of one mesh, each
``memlane serve`` in a network namespace of its own (tests/node/netns.py), each preloaded with
the natural-question corpus (``questions``' texts, 100,000 SRs; ``--quick``: 300) and called by
16 agents of its own (``--quick``: 2) — real MCP clients over streamable HTTP, each with its own
token, once every 500 ms over the mix of tests/bench/_fleet_agents.py — for 10 minutes
(``--quick``: 18 s) while a seeded nemesis (tests/bench/_fleet_faults.py) kills, pauses,
partitions, splits, drops packets and fills a disk, one fault at a time with calm between.

It prints calls/s per tool and node, p50/p99 per tool in calm and in fault windows, errors by
kind (each explained by a fault or not), the time from each heal until every node held what
any node held at the heal, and each node's resident set and descriptors over time.  At the
end, with every fault healed: every acknowledged write on every node, the frontiers and the
answers of list / changes / find for one caller equal on every node, ``memlane log verify``
and ``PRAGMA integrity_check`` clean.  Needs root, ``ip`` and ``nft``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from node.config.mesh import MeshLimits
from node.identity import DB_FILE
from node.node import Node
from protocol.kinds import decode_payload
from tests.bench import quality, questions
from tests.bench._fleet_agents import WRITES
from tests.bench._fleet_faults import (
    TURNS_AWAY,
    Disk,
    Fault,
    Nemesis,
    frontier,
    reached,
    schedule,
    usage,
)
from tests.bench.common import (
    SMOKE,
    Check,
    Report,
    Writers,
    cached,
    progress,
    quantile,
    receive_batch,
    table,
    verdict,
)
from tests.node.clikit import MEMLANE
from tests.node.fleetkit import Fleet
from tests.node.netns import Network
from tests.node.servekit import certified_mesh
from tests.node.synckit import frontier_digest

__all__ = ["FULL", "QUICK", "Sizes", "run"]

NAMES = ("a", "b", "c")
DISK_NODE = "c"
WORKSPACE = "team"
SEED = 20_261_205
BUILD_VERSION = "fleet-1"
# The targets (issue 42): p99 in calm windows, convergence after a heal, growth of RSS from
# minute 2 to the end, and of descriptors.
CALM_P99_MS = {"e_write": 100.0, "find": 250.0}
CONVERGE_AFTER_BACKOFF_S = 10.0
RSS_GROWTH = 0.10
FD_GROWTH = 16
GRACE_S = 10.0  # after a heal, still the fault's window (reconnecting, catching up)
BACKOFF_MAX_S = MeshLimits().backoff_max_ms / 1000  # the default: the nodes run with it


@dataclass(frozen=True, slots=True)
class Sizes:
    name: str
    srs: int
    agents: int  # a node
    duration: float  # seconds of calls
    first: float  # seconds before the first fault (minute 2: the RSS baseline)
    length: float  # seconds a fault lasts
    gap: float  # seconds of calm between faults
    headroom_mib: int  # the full-disk node's tmpfs beyond its data
    sample: float  # seconds between looks at RSS and descriptors
    interval: float = 0.5  # seconds between one agent's calls
    questions: int = 300
    # Seconds at the start in neither window: every agent opens its session at once on nodes
    # just started, their pages not yet in the cache (printed apart).
    warmup: float = 30.0


FULL = Sizes("fleet-100k", 100_000, 16, 600.0, 120.0, 20.0, 25.0, 256, 5.0)
QUICK = Sizes("fleet-300", 300, 2, 18.0, 2.0, 1.5, 0.5, 48, 1.0, questions=30, warmup=1.0)


# -- the preloaded mesh (cached) -------------------------------------------------------------


def _build(directory: str, sizes: Sizes, locomo: str) -> dict[str, Any]:
    root = Path(directory)
    dirs = certified_mesh(root, list(NAMES))
    written = list(questions.texts(quality.load(Path(locomo)), sizes.srs))
    return asyncio.run(_preload(dirs, sizes, written))


def _sr_id(i: int) -> str:
    return f"00000000-0000-7000-8000-{i:012d}"


async def _preload(
    dirs: dict[str, Path], sizes: Sizes, written: Sequence[questions.Written]
) -> dict[str, Any]:
    """The SRs received by the authority from four writers it admits; the other nodes then
    receive every entry it holds (the same entries everywhere); tokens on every node."""
    async with Node.open(dirs["a"]) as node:
        writers = Writers(node.info.mesh, 4, 0x70)
        for key in writers.keys:
            await node.membership.admit_member(key.public)
        for start in range(0, len(written), 2_000):
            part = written[start : start + 2_000]
            wall = questions.START_MS + start * 60_000
            sealed = [
                writers.sealed(i, wall + i, questions.payload(_sr_id(i), i, sr))
                for i, sr in enumerate(part, start)
            ]
            await receive_batch(node, sealed)
        held = [(e.raw, e.payload) for e in await node.entries()]
    meta: dict[str, Any] = {"srs": len(written), "tokens": {}, "checker": {}}
    for name in NAMES:
        async with Node.open(dirs[name]) as node:
            for start in range(0, len(held), 2_000):
                await node.receive(held[start : start + 2_000], source="bench")
            meta.setdefault("frontiers", []).append((await frontier_digest(node)).hex())
            scopes = ("read:workspace", "write:workspace")
            meta["tokens"][name] = [
                (await node.create_token(f"{name}-agent{n}", WORKSPACE, scopes)).token
                for n in range(sizes.agents)
            ]
            meta["checker"][name] = (
                await node.create_token("checker", WORKSPACE, ("read:workspace",))
            ).token
    if len(set(meta.pop("frontiers"))) != 1:
        raise RuntimeError("the preloaded nodes do not hold the same entries")
    return meta


def _prepared(
    sizes: Sizes, locomo: Path, workdir: Path
) -> tuple[dict[str, Path], dict[str, Any], Disk]:
    """A fresh copy of the cached mesh in ``workdir``, the full-disk node's on a tmpfs of its
    own; the tokens."""
    key = f"{BUILD_VERSION}/{questions.cache_key(questions.Sizes(sizes.srs, sizes.name))}"
    root, meta, _ = cached(sizes.name, key, "a preloaded mesh of three", _build, sizes, str(locomo))
    workdir.mkdir(parents=True, exist_ok=True)
    dirs = {name: workdir / name for name in NAMES if name != DISK_NODE}
    for name, path in dirs.items():
        shutil.copytree(root / name, path)
    used = sum(f.stat().st_size for f in (root / DISK_NODE).rglob("*") if f.is_file())
    disk = Disk(workdir / "disk", used // 2**20 + sizes.headroom_mib)
    dirs[DISK_NODE] = disk.mount / DISK_NODE
    shutil.copytree(root / DISK_NODE, dirs[DISK_NODE])
    return dirs, meta, disk


# -- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    t: float
    who: str  # a node's name: its serve; "NAME agents": its agents' process
    pid: int
    rss: float  # MiB
    fds: int
    cpu: float  # seconds, user and system, since the process began


@dataclass(slots=True)
class Watch:
    """A thread looking at the nodes while the run goes on: each healed fault's convergence
    (every 0.2 s); each serve's and agents' process's RSS, descriptors and CPU (every
    ``sample`` s)."""

    fleet: Fleet
    faults: list[Fault]
    sample: float
    agents: dict[str, int] = field(default_factory=dict)  # "NAME agents": its pid
    usage: list[Sample] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        next_sample = 0.0
        while not self.stop.wait(0.2):
            now = time.time()
            waiting = [f for f in self.faults if f.healed is not None and f.converged is None]
            if waiting:
                held = [frontier(path) for path in self.fleet.dirs.values()]
                for fault in waiting:
                    if all(reached(h, fault.target) for h in held):
                        fault.converged = now
            if now >= next_sample:
                next_sample = now + self.sample
                pids = {name: self.fleet.pid(name) for name in list(self.fleet.procs)}
                for who, pid in (pids | self.agents).items():
                    seen = usage(pid)
                    if seen is not None:
                        self.usage.append(Sample(now, who, pid, *seen))


def _every_head(dirs: dict[str, Path]) -> dict[tuple[bytes, bytes], int]:
    """Each log's furthest head on any node: what every node must come to hold."""
    out: dict[tuple[bytes, bytes], int] = {}
    for path in dirs.values():
        for log, seq in frontier(path).items():
            out[log] = max(out.get(log, 0), seq)
    return out


def _until(when: float) -> None:
    time.sleep(max(0.0, when - time.time()))


def _start_agents(
    fleet: Fleet, urls: dict[str, str], meta: dict[str, Any], sizes: Sizes, asked: list[str]
) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i, name in enumerate(NAMES):
        config = {
            "url": urls[name],
            "tokens": meta["tokens"][name][: sizes.agents],
            "questions": asked,
            "seed": SEED + i,
            "interval": sizes.interval,
            "node": name,
        }
        path = fleet.logs / f"{name}.agents.json"
        path.write_text(json.dumps(config))
        argv = [sys.executable, "-m", "tests.bench._fleet_agents", str(path)]
        argv.append(str(fleet.logs / f"{name}.calls.jsonl"))
        with (fleet.logs / f"{name}.agents.err").open("wb") as err:
            procs.append(
                subprocess.Popen(
                    fleet.net.command(i, argv),
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    cwd=Path(__file__).parents[2],
                )
            )
    return procs


def _stop_agents(procs: Sequence[subprocess.Popen[bytes]]) -> list[int | None]:
    for proc in procs:
        proc.terminate()
    codes: list[int | None] = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=60))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(None)
    return codes


@dataclass(slots=True)
class Run:
    """What happened: the faults as done, the calls, the usage samples, how it ended."""

    t0: float
    faults: list[Fault]
    calls: list[dict[str, Any]]
    usage: list[Sample]
    agents_exit: list[int | None]
    serve_exit: list[tuple[str, int | None]]
    settled_s: float | None  # after the agents stopped, until every frontier was one
    checked: dict[str, dict[str, Any]] = field(default_factory=dict)


def _exercise(sizes: Sizes, dirs: dict[str, Path], meta: dict[str, Any], logs: Path,
              disk: Disk, asked: list[str]) -> Run:  # fmt: skip
    net = Network(len(NAMES))
    fleet = Fleet(net, dirs, NAMES, logs=logs)
    agents: list[subprocess.Popen[bytes]] = []
    try:
        urls = {name: fleet.start(name) for name in NAMES}
        faults = schedule(NAMES, DISK_NODE, sizes.first, sizes.length, sizes.gap, SEED)
        watch = Watch(fleet, faults, sizes.sample)
        agents = _start_agents(fleet, urls, meta, sizes, asked)
        watch.agents = {f"{name} agents": p.pid for name, p in zip(NAMES, agents, strict=True)}
        t0 = time.time()
        threading.Thread(target=watch.run, daemon=True).start()
        _nemesis(Nemesis(fleet, disk), faults, t0)
        _until(t0 + sizes.duration)
        progress(f"{sizes.name}: the calls end; waiting for one frontier")
        codes, agents = _stop_agents(agents), []
        stopped = time.time()
        settled = _settle(dirs, BACKOFF_MAX_S + 60)
        watch.stop.set()
        with (logs / "usage.jsonl").open("w") as f:
            f.writelines(json.dumps(asdict(sample)) + "\n" for sample in watch.usage)
        calls = _calls(logs)
        serve_exit = fleet.close()
        run = Run(t0, faults, calls, watch.usage, codes, serve_exit, settled and settled - stopped)
        run.checked = asyncio.run(_check(dirs, meta, asked, calls))
        _files_checked(dirs, run.checked)
        return run
    finally:
        _stop_agents(agents)
        fleet.close()
        net.close()


def _nemesis(nemesis: Nemesis, faults: Sequence[Fault], t0: float) -> None:
    for fault in faults:
        _until(t0 + fault.start)
        progress(f"fault at {fault.start:.0f} s: {fault.label()} for {fault.length:.0f} s")
        nemesis.apply(fault)
        fault.began = time.time()
        _until(fault.began + fault.length / 2)
        earlier = _every_head(nemesis.fleet.dirs)
        _until(fault.began + fault.length)
        held = {name: frontier(path) for name, path in nemesis.fleet.dirs.items()}
        fault.behind = tuple(name for name, h in held.items() if not reached(h, earlier))
        nemesis.heal(fault)
        fault.target = _every_head(nemesis.fleet.dirs)
        fault.healed = time.time()


def _settle(dirs: dict[str, Path], within: float) -> float | None:
    """When every node's frontier became one (None: not within ``within`` s)."""
    deadline = time.time() + within
    while time.time() < deadline:
        if len({tuple(sorted(frontier(path).items())) for path in dirs.values()}) == 1:
            return time.time()
        time.sleep(0.2)
    return None


def _calls(logs: Path) -> list[dict[str, Any]]:
    calls = []
    for name in NAMES:
        path = logs / f"{name}.calls.jsonl"
        for line in path.read_text().splitlines() if path.exists() else ():
            calls.append({**json.loads(line), "node": name})
    return calls


# -- the end: what every node holds and answers ------------------------------------------------


async def _check(dirs: dict[str, Path], meta: dict[str, Any], asked: Sequence[str],
                 calls: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Each node, stopped: how many acknowledged writes it lacks, its frontier's digest, a
    digest of one caller's answers (all at one moment), its log's and database's checks."""
    entries = {c["entry"] for c in calls if "entry" in c}
    episodes = {c["episode"] for c in calls if "episode" in c}
    moment = int(time.time() * 1000)
    out = {}
    for name, path in dirs.items():
        async with Node.open(path, wall=lambda: moment) as node:
            held = await node.entries()
            ids = {e.id.hex() for e in held}
            recorded = {
                decode_payload(e.header.kind, e.payload)["id"]
                for e in held
                if e.header.kind == "episode.record" and e.payload is not None
            }
            who = await node.authenticate(meta["checker"][name])
            answers = [
                await node.e_timeline(who, action="list", page_size=100),
                await node.e_timeline(who, action="changes", since="2026-01-01", page_size=100),
                *[await node.e_timeline(who, action="find", query=q) for q in asked[:10]],
            ]
            out[name] = {
                "lost": len(entries - ids) + len(episodes - recorded),
                "frontier": (await frontier_digest(node)).hex(),
                "answers": hashlib.sha256(json.dumps(answers, sort_keys=True).encode()).hexdigest(),
                "entries": len(held),
            }
    out["acknowledged"] = {"entries": len(entries), "episodes": len(episodes)}
    return out


def _files_checked(dirs: dict[str, Path], checked: dict[str, dict[str, Any]]) -> None:
    """Each node's ``memlane log verify`` exit status and ``PRAGMA integrity_check``."""
    for name, path in dirs.items():
        verify = subprocess.run(
            [str(MEMLANE), "log", "verify", "--data", str(path)], capture_output=True, timeout=600
        )
        checked[name]["log verify"] = verify.returncode
        db = sqlite3.connect(path / DB_FILE)
        checked[name]["integrity"] = db.execute("PRAGMA integrity_check").fetchone()[0]
        db.close()


# -- the report --------------------------------------------------------------------------------


def _windows(call: dict[str, Any], faults: Sequence[Fault]) -> list[Fault]:
    """The faults whose windows (from the start to ``GRACE_S`` after the heal) hold the call."""
    held = []
    for fault in faults:
        if fault.began is None:
            continue
        healed = fault.healed or fault.began + fault.length
        if fault.began - 1 <= call["t"] <= healed + GRACE_S:
            held.append(fault)
    return held


def _explaining(call: dict[str, Any], faults: Sequence[Fault]) -> Fault | None:
    """The fault that may turn this call away: its node's, of a kind that turns such calls
    away (``TURNS_AWAY``)."""
    for fault in _windows(call, faults):
        turns = TURNS_AWAY.get(fault.kind)
        if call["node"] not in fault.nodes or turns is None:
            continue
        if turns == "any" or call["tool"] in WRITES:
            return fault
    return None


def _ms(values: Sequence[float], q: float) -> str:
    return f"{quantile(values, q):,.1f}" if values else "—"


def _phase(call: dict[str, Any], run: Run, warmup: float) -> str:
    if call["t"] < run.t0 + warmup:
        return "warm-up"
    return "fault" if _windows(call, run.faults) else "calm"


def _latency(run: Run, sizes: Sizes) -> tuple[list[str], dict[str, dict[str, list[float]]]]:
    """The calls table: per tool, calls/s on each node, p50/p99 calm, under faults and in
    the warm-up."""
    by: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    done: Counter[tuple[str, str]] = Counter()
    failed: Counter[str] = Counter()
    for call in run.calls:
        if call["tool"] == "session":
            continue
        if call["outcome"] != "ok":
            failed[call["tool"]] += 1
            continue
        done[call["tool"], call["node"]] += 1
        by[call["tool"]][_phase(call, run, sizes.warmup)].append(call["ms"])
    rows = []
    for tool in sorted(by, key=lambda t: -sum(done[t, n] for n in NAMES)):
        calm, fault, warm = by[tool]["calm"], by[tool]["fault"], by[tool]["warm-up"]
        rates = [f"{done[tool, n] / sizes.duration:.2f}" for n in NAMES]
        quantiles = [_ms(calm, 0.5), _ms(calm, 0.99), _ms(fault, 0.5), _ms(fault, 0.99)]
        answered = f"{len(calm) + len(fault) + len(warm):,}"
        rows.append([tool, *rates, *quantiles, _ms(warm, 0.99), answered, f"{failed[tool]:,}"])
    header = ["tool", *(f"{n} calls/s" for n in NAMES), "calm p50 ms", "calm p99 ms"]
    header += ["fault p50 ms", "fault p99 ms", "warm-up p99 ms", "answered", "failed"]
    return ["", *table(header, rows, right=set(range(1, len(header))))], by


def _errors(run: Run) -> tuple[list[str], int]:
    """The errors table (by node, tool, outcome and window); how many no fault explains."""
    counted: Counter[tuple[str, str, str, str, bool]] = Counter()
    for call in run.calls:
        if call["outcome"] == "ok":
            continue
        explaining = _explaining(call, run.faults)
        during = [explaining] if explaining else _windows(call, run.faults)
        where = ", ".join(f.label() for f in during) or "calm"
        counted[call["node"], call["tool"], call["outcome"][:70], where, bool(explaining)] += 1
    rows = [[*key[:4], f"{n:,}", "yes" if key[4] else "NO"] for key, n in sorted(counted.items())]
    unexplained = sum(n for key, n in counted.items() if not key[4])
    if not rows:
        return ["", "errors: none"], 0
    header = ["node", "tool", "outcome", "window", "calls", "explained"]
    return ["", *table(header, rows, right={4})], unexplained


def _faults(run: Run) -> tuple[list[str], float | None]:
    """The faults table; the longest time from a heal to every node holding its target."""
    rows, afters = [], []
    for fault in run.faults:
        after = fault.converged - fault.healed if fault.converged and fault.healed else None
        afters.append(after)
        rows.append(
            [
                fault.label(),
                f"{(fault.began or 0) - run.t0:.0f}",
                f"{(fault.healed or 0) - (fault.began or 0):.1f}",
                ", ".join(fault.behind) or "none",
                f"{after:.1f}" if after is not None else "never",
            ]
        )
    behind = "lacking at the heal what any held halfway"
    header = ["fault", "at s", "lasted s", behind, "heal → every node holds what any held s"]
    longest = None if None in afters else max(a for a in afters if a is not None)
    return ["", *table(header, rows, right={1, 2, 4})], longest


def _cpu(samples: Sequence[Sample]) -> float:
    """CPU seconds the samples' processes spent between their first and last looks."""
    by_pid: dict[int, list[float]] = defaultdict(list)
    for sample in samples:
        by_pid[sample.pid].append(sample.cpu)
    return sum(max(cpu) - min(cpu) for cpu in by_pid.values())


def _nodes(run: Run, baseline: float) -> tuple[list[str], dict[str, tuple[float, int]]]:
    """Each node's RSS and descriptors at the baseline (the first look after it) and at the
    end, their growth; its serve's and its agents' share of a CPU; its RSS minute by minute."""
    growth: dict[str, tuple[float, int]] = {}
    rows, minutes = [], []
    for name in NAMES:
        seen = [s for s in run.usage if s.who == name]
        after = [s for s in seen if s.t >= run.t0 + baseline] or seen[-1:]
        if not after:
            continue
        first, last = after[0], after[-1]
        growth[name] = (last.rss / first.rss - 1, last.fds - first.fds)
        span = seen[-1].t - seen[0].t or 1.0
        agents = [s for s in run.usage if s.who == f"{name} agents"]
        rss = [f"{first.rss:,.0f}", f"{last.rss:,.0f}", f"{growth[name][0]:+.1%}"]
        fds = [
            str(first.fds),
            str(last.fds),
            f"{min(s.fds for s in seen)}–{max(s.fds for s in seen)}",
        ]
        cpu = [f"{_cpu(seen) / span:.0%}", f"{_cpu(agents) / span:.0%}"]
        rows.append([name, *rss, *fds, cpu[0], cpu[1]])
        by_minute = {int((s.t - run.t0) // 60): s.rss for s in seen}
        minutes.append(
            f"{name}: " + " ".join(f"{rss:,.0f}" for _, rss in sorted(by_minute.items()))
        )
    header = ["node", f"RSS at {baseline:.0f} s MiB", "RSS end MiB", "growth"]
    header += [f"fds at {baseline:.0f} s", "fds end", "fds range", "serve CPU", "agents CPU"]
    table_lines = table(header, rows, right=set(range(1, len(header))))
    return ["", *table_lines, "", "RSS (MiB) at the end of each minute:", *minutes], growth


def _checks(run: Run, sizes: Sizes, quick: bool, calm: dict[str, dict[str, list[float]]],
            longest: float | None, unexplained: int,
            growth: dict[str, tuple[float, int]]) -> list[Check]:  # fmt: skip
    """The targets; a quick run's latency and memory figures are (info)."""
    nodes = [run.checked[n] for n in NAMES]
    lost = sum(n["lost"] for n in nodes)
    bound = BACKOFF_MAX_S + CONVERGE_AFTER_BACKOFF_S

    def timing(ok: bool) -> str:
        return "(info)" if quick else verdict(ok)

    checks = [
        Check("acknowledged writes missing on some node", f"{lost:,}", "0", verdict(lost == 0)),
        Check(
            "longest heal → every node holds what any held",
            "never" if longest is None else f"{longest:.1f} s",
            f"≤ backoff_max + {CONVERGE_AFTER_BACKOFF_S:g} s = {bound:g} s",
            verdict(longest is not None and longest <= bound),
        ),
        Check(
            "after the calls: one frontier",
            "never" if run.settled_s is None else f"{run.settled_s:.1f} s",
            "reached",
            verdict(run.settled_s is not None),
        ),
        Check("errors no fault explains", f"{unexplained:,}", "0", verdict(unexplained == 0)),
        Check(
            "frontiers, answers equal on every node",
            f"{len({n['frontier'] for n in nodes})}, {len({n['answers'] for n in nodes})} kinds",
            "1, 1",
            verdict(len({(n["frontier"], n["answers"]) for n in nodes}) == 1),
        ),
        Check(
            "log verify, integrity_check",
            " ".join(f"{n['log verify']}/{n['integrity']}" for n in nodes),
            "0/ok each",
            verdict(all(n["log verify"] == 0 and n["integrity"] == "ok" for n in nodes)),
        ),
        Check(
            "exits: serves, agents",
            f"{[c for _, c in run.serve_exit]}, {run.agents_exit}",
            "0 each",
            verdict(all(c == 0 for _, c in run.serve_exit) and set(run.agents_exit) == {0}),
        ),
    ]
    for tool, limit in CALM_P99_MS.items():
        p99 = quantile(calm[tool]["calm"], 0.99)
        checks.append(
            Check(f"{tool} p99, calm", f"{p99:,.1f} ms", f"≤ {limit:g} ms", timing(p99 <= limit))
        )
    for name, (rss, fds) in sorted(growth.items()):
        checks.append(
            Check(
                f"{name}: RSS growth from {sizes.first:.0f} s",
                f"{rss:+.1%}",
                f"≤ {RSS_GROWTH:.0%}",
                timing(rss <= RSS_GROWTH),
            )
        )
        checks.append(
            Check(
                f"{name}: descriptors' growth",
                f"{fds:+d}",
                f"≤ {FD_GROWTH}",
                timing(fds <= FD_GROWTH),
            )
        )
    return checks


def run(*, quick: bool, workdir: Path, locomo: Path | None = None) -> Report:
    sizes = QUICK if quick else FULL
    report = Report(
        f"fleet — {len(NAMES)} served nodes in network namespaces, {sizes.agents} agents each, "
        f"{sizes.srs:,} SRs preloaded, {sizes.duration:.0f} s, {os.cpu_count()} CPUs"
        f"{SMOKE if quick else ''}"
    )
    locomo = locomo or quality.default_locomo()
    asked = questions.sample(quality.load(locomo), sizes.questions)
    dirs, meta, disk = _prepared(sizes, locomo, workdir / "fleet")
    try:
        done = _exercise(sizes, dirs, meta, workdir / "fleet", disk, asked)
    finally:
        disk.close()
    lines, calm = _latency(done, sizes)
    errors, unexplained = _errors(done)
    faults, longest = _faults(done)
    nodes, growth = _nodes(done, sizes.first)
    report.lines += [*lines, *faults, *errors, *nodes]
    report.checks = _checks(done, sizes, quick, calm, longest, unexplained, growth)
    acked = done.checked["acknowledged"]
    report.notes += [
        f"acknowledged: {acked['entries']:,} SR writes (entry ids) and {acked['episodes']:,} "
        f"episodes, looked for in every node's log after the run",
        f"a fault's window: from its start to {GRACE_S:g} s after its heal; the warm-up: the "
        f"first {sizes.warmup:g} s (every session opened at once); calm is the rest; "
        f"backoff_max is the default {BACKOFF_MAX_S:g} s",
        f"faults' seed {SEED}; the disk is {DISK_NODE}'s own tmpfs; {len(done.calls):,} calls",
    ]
    return report
