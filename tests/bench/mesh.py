"""A simulated 100-node mesh, partial beside full replication (issue 25; docs/partial.md).

The mesh simulation of ``tests/sim/sim.py`` (real nodes over SQLite, a simulated network, one
seed) on a sparse random topology — a random tree, random edges up to a mean degree of 3.5,
and each workspace's holders chained, so about 4.3 — with mixed grants (``grants``): node 0
holds every payload, one node in ten none (a relay, forwarding headers only), each other one
of four workspaces or two.  For ``Plan.span`` virtual seconds callers author (``Plan.writes``
calls scheduled; about 60 % land: a relay has no caller, and an update of another caller's SR
is refused) while ``Plan.faults`` faults of every kind ``tests/sim`` has churn the mesh
(crashes, resets, partitions both ways and one way, duplicate and slow connections); then the
network heals and the run ends once the mesh is quiet.  Each seed runs twice on the same
topology, the same writers and the same schedule of writes and faults: with the grants applied
(partial) and without them (full: every node holds every payload).  What is written, and
where the faults strike, is drawn as the run goes, so the two runs' writes differ in detail.

Per run: the virtual seconds from the heal to quiet, the wall seconds, the rounds started, the
bytes put on the simulated wire (every frame of every connection, chunks a crash or a cut
later dropped included), the payload bytes among them, the entries sent, the wants and the
payloads they fetched, and the payloads held over every node when done.  The ratios partial /
full are information; the one check is that every run converged (the sim's verdict: identical
headers, exactly the payloads of each grant, the same answers to every caller on every node).
At full size (3 seeds, 100 nodes, 200 writes, 30 faults, 60 virtual seconds; nothing shrunk)
it takes about 5 minutes on 2 cores, each run 35–60 s; ``--quick`` runs one seed of a 12-node
mesh.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.bench.common import SMOKE, peak_rss_mib, progress, table, verdict
from tests.sim.sim import ALL, Sim, SimFailure, Size, simulate, template

__all__ = ["FULL", "QUICK", "WORKSPACES", "Plan", "Report", "Run", "grants", "run"]

WORKSPACES = ("team", "lab", "ops", "docs")
MODES = ("partial", "full")


@dataclass(frozen=True, slots=True)
class Plan:
    """One size of the benchmark: the mesh and the seeds it runs."""

    nodes: int
    writes: int
    faults: int
    span: float
    seeds: tuple[int, ...]

    def size(self, mode: str) -> Size:
        return Size(
            nodes=self.nodes,
            writes=self.writes,
            faults=self.faults,
            span=self.span,
            holds=grants(self.nodes, WORKSPACES),
            workspaces=WORKSPACES,
            topology="sparse",
            full=mode == "full",
        )


FULL = Plan(nodes=100, writes=200, faults=30, span=60.0, seeds=(0, 1, 2))
QUICK = Plan(nodes=12, writes=24, faults=6, span=20.0, seeds=(0,))


def grants(nodes: int, workspaces: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """Per node, the workspaces its grant holds: node 0 every one (``*``), one node in ten
    none (a relay), each other one workspace (seven in ten) or two — drawn from a fixed seed,
    so every seed's mesh has the same grants (and the nodes are made once)."""
    rng = random.Random(f"grants:{nodes}")
    relays = set(rng.sample(range(1, nodes), nodes // 10))
    held: list[tuple[str, ...]] = [(ALL,)]
    for i in range(1, nodes):
        if i in relays:
            held.append(())
        else:
            held.append(tuple(sorted(rng.sample(workspaces, 1 if rng.random() < 0.7 else 2))))
    return tuple(held)


@dataclass(slots=True)
class Run:
    """One seed in one mode: what it counted, or why it failed."""

    seed: int
    mode: str
    nodes: int
    span: float
    wall: float = 0.0
    virtual: float = 0.0
    edges: int = 0
    stats: Counter[str] = field(default_factory=Counter)
    failure: str | None = None

    @property
    def label(self) -> str:
        return f"seed {self.seed} {self.mode}"

    @property
    def converge(self) -> float:
        """Virtual seconds from the heal to quiet."""
        return self.virtual - self.span


# Per run, after its nodes and edges.
COLUMNS: tuple[tuple[str, Callable[[Run], str]], ...] = (
    ("writes", lambda r: f"{r.stats['writes']:,}"),
    ("entries", lambda r: f"{r.stats['entries held']:,}"),  # held by each node when done
    ("heal→quiet s", lambda r: f"{r.converge:.1f}"),
    ("wall s", lambda r: f"{r.wall:.1f}"),
    ("rounds", lambda r: f"{r.stats['rounds']:,}"),
    ("kB sent", lambda r: f"{r.stats['bytes'] / 1000:,.0f}"),
    ("payload kB", lambda r: f"{r.stats['payload bytes sent'] / 1000:,.0f}"),
    ("entries sent", lambda r: f"{r.stats['entries sent']:,}"),
    ("wants", lambda r: f"{r.stats['wants']:,}"),
    ("fetched", lambda r: f"{r.stats['payloads fetched']:,}"),
    ("payloads held", lambda r: f"{r.stats['payloads held']:,}"),  # over every node
)

# Partial / full: sums over the runs compared.  What is held is counted per entry held (the
# two runs' writes differ in detail).
RATIOS: tuple[tuple[str, Callable[[Run], float]], ...] = (
    ("bytes", lambda r: r.stats["bytes"]),
    ("payload bytes", lambda r: r.stats["payload bytes sent"]),
    ("rounds", lambda r: r.stats["rounds"]),
    ("heal→quiet s", lambda r: r.converge),
    ("payloads held / entry", lambda r: r.stats["payloads held"] / r.stats["entries held"]),
    (
        "payload bytes held / entry",
        lambda r: r.stats["payload bytes held"] / r.stats["entries held"],
    ),
)


@dataclass(slots=True)
class Report:
    title: str
    runs: list[Run]

    def __str__(self) -> str:
        lines = [self.title, "", *self.run_table(), "", *self.ratio_table(), ""]
        lines.append(f"peak RSS of the run: {peak_rss_mib():,.0f} MiB")
        for r in self.runs:
            if r.failure is not None:
                lines.append(f"FAIL [{r.label}] {r.failure}")
        ok = all(r.failure is None for r in self.runs)
        lines.append(f"every run converged: {verdict(ok)}")
        return "\n".join(lines)

    def run_table(self) -> list[str]:
        header = ["run", "nodes", "edges", *(name for name, _ in COLUMNS)]
        rows = [
            [
                r.label,
                f"{r.nodes}",
                f"{r.edges}",
                *(["FAIL"] * len(COLUMNS) if r.failure else (cell(r) for _, cell in COLUMNS)),
            ]
            for r in self.runs
        ]
        return table(header, rows, right=set(range(1, len(header))))

    def ratio_table(self) -> list[str]:
        """Partial / full per seed, and over every seed whose two runs converged."""
        pairs: list[tuple[str, list[Run], list[Run]]] = []
        for seed in dict.fromkeys(r.seed for r in self.runs):
            both = {r.mode: r for r in self.runs if r.seed == seed and r.failure is None}
            if len(both) == 2:
                pairs.append((f"seed {seed}", [both["partial"]], [both["full"]]))
        if len(pairs) > 1:
            pairs.append(("every seed", [p[1][0] for p in pairs], [p[2][0] for p in pairs]))
        header = ["partial / full", *(name for name, _ in RATIOS), "verdict"]
        rows = [
            [label, *(_ratio(fn, partial, full) for _, fn in RATIOS), "(info)"]
            for label, partial, full in pairs
        ]
        return table(header, rows, right=set(range(1, len(header) - 1)))


def _ratio(fn: Callable[[Run], float], partial: list[Run], full: list[Run]) -> str:
    over = sum(fn(r) for r in full)
    return f"{sum(fn(r) for r in partial) / over:.2f}" if over else "-"


def run_one(plan: Plan, seed: int, mode: str, workdir: Path) -> Run:
    size = plan.size(mode)
    done = Run(seed, mode, plan.nodes, plan.span, edges=len(Sim(seed, size, workdir).edges))
    asyncio.run(template(size))  # made once per process, outside the timing
    start = time.perf_counter()
    try:
        outcome = asyncio.run(simulate(seed, size, workdir))
    except SimFailure as exc:
        done.failure = str(exc).splitlines()[0]
    else:
        done.virtual, done.stats = outcome.virtual_seconds, outcome.stats
    done.wall = time.perf_counter() - start
    progress(f"mesh: {done.label} in {done.wall:.1f} s")
    return done


def run(*, quick: bool, workdir: Path) -> Report:
    plan = QUICK if quick else FULL
    runs = [run_one(plan, seed, mode, workdir) for seed in plan.seeds for mode in MODES]
    title = (
        f"mesh simulation: {plan.nodes} nodes (sparse, 1 in 10 a relay), partial beside full "
        f"replication; {plan.writes} writes and {plan.faults} faults over {plan.span:g} "
        f"virtual seconds, then healed"
    )
    return Report(title + (SMOKE if quick else ""), runs)
