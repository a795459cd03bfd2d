"""The mesh simulation (``tests/sim/sim.py``) over more seeds than ``make test`` runs, and over
bigger meshes: seeds 50 on at the test's size (five nodes, 20 writes, 9 faults, 25 virtual
seconds), seeds 1020 on of the test's mesh of mixed grants (six nodes, docs/partial.md), then
seeds at a bigger size (seven nodes, 60 writes, 24 faults, 60 virtual seconds).  Each failing
seed is listed with its size and message; rerun one with ``MEMLANE_SIM_SEED=n`` (at the
test's size) or ``simulate(n, size)``.

Nothing here asserts: the table says how many seeds held, how long they took, and what the
faults did over all of them.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.bench.common import progress
from tests.sim.sim import PARTIAL, SimFailure, Size, simulate

__all__ = ["BIG", "SMALL", "Batch", "Report", "run", "run_batch"]

SMALL = Size()
BIG = Size(nodes=7, writes=60, faults=24, span=60.0)


@dataclass(slots=True)
class Batch:
    label: str
    size: Size
    seeds: range
    seconds: float = 0.0
    virtual: float = 0.0
    failures: list[str] = field(default_factory=list)
    stats: Counter[str] = field(default_factory=Counter)


@dataclass(slots=True)
class Report:
    batches: list[Batch]

    def __str__(self) -> str:
        lines = ["mesh simulation", ""]
        lines.append(f"{'size':<44} {'seeds':>7} {'failed':>7} {'s/seed':>8} {'virtual s':>10}")
        for b in self.batches:
            n = len(b.seeds)
            lines.append(
                f"{b.label:<44} {n:>7,} {len(b.failures):>7,} {b.seconds / n:>8.3f} "
                f"{b.virtual / n:>10.1f}"
            )
        lines.append("")
        total: Counter[str] = Counter()
        for b in self.batches:
            total.update(b.stats)
        lines.append(
            "over every seed: " + ", ".join(f"{k} {v:,}" for k, v in sorted(total.items()))
        )
        for b in self.batches:
            for failure in b.failures:
                lines.append(f"FAIL [{b.label}] {failure}")
        verdict = "PASS" if not any(b.failures for b in self.batches) else "FAIL"
        lines.append(f"every seed converged: {verdict}")
        return "\n".join(lines)


def run_batch(batch: Batch, workdir: Path) -> None:
    for seed in batch.seeds:
        start = time.perf_counter()
        try:
            outcome = asyncio.run(simulate(seed, batch.size, workdir))
        except SimFailure as exc:
            batch.failures.append(str(exc).splitlines()[0])
        else:
            batch.virtual += outcome.virtual_seconds
            batch.stats.update(outcome.stats)
        batch.seconds += time.perf_counter() - start
        done = seed - batch.seeds.start + 1
        if done % 50 == 0:
            progress(f"sim [{batch.label}]: {done} of {len(batch.seeds)} seeds")


def run(*, quick: bool, workdir: Path) -> Report:
    small = range(50, 70 if quick else 1000)  # make test runs 0-49
    mixed = range(1020, 1025 if quick else 1200)  # and 1000-1019
    big = range(10_000, 10_003 if quick else 10_100)
    batches = [
        Batch(f"{SMALL.nodes} nodes, {SMALL.writes} writes, {SMALL.faults} faults", SMALL, small),
        Batch(f"{PARTIAL.nodes} nodes of mixed grants (docs/partial.md)", PARTIAL, mixed),
        Batch(f"{BIG.nodes} nodes, {BIG.writes} writes, {BIG.faults} faults", BIG, big),
    ]
    for batch in batches:
        run_batch(batch, workdir)
    return Report(batches)
