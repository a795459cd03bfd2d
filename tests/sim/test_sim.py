"""The mesh converges under every simulated fault (``tests/sim/sim.py``): for each seed, five
real nodes author throughout while the network delays, cuts, duplicates, partitions (both
ways and one way) and crashes them; once healed and quiet, every node holds the same logs
and answers ``e_timeline`` list, find, intersect and changes alike.

``MEMLANE_SIM_SEED=n`` (or ``n,m,...``) runs only those seeds; ``make bench`` runs more
(``tests/bench/sim.py``: the seeds after these, of both meshes, and bigger meshes).  Seeds 0–49
meet every fault and every kind of write (the first 20 do), and seeds 1000–1019 every part of
partial replication (the first 5 do): the checks below say so on each run.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from tests.bench import sim as sim_bench
from tests.sim.sim import PARTIAL, Outcome, Size, seeds, simulate

SEEDS = seeds(range(50))
PARTIAL_SEEDS = seeds(range(1000, 1020))
_seen: list[Outcome] = []
_partial: list[Outcome] = []


@pytest.mark.parametrize("seed", SEEDS)
def test_the_mesh_converges(seed: int) -> None:
    _seen.append(asyncio.run(simulate(seed)))


@pytest.mark.parametrize("seed", PARTIAL_SEEDS)
def test_a_mesh_of_mixed_grants_converges(seed: int) -> None:
    """Six nodes: one holds every payload, one none (a relay), the others one workspace or
    two; every node ends with node 0's headers, exactly the payloads of its grant, and node
    0's answers to each of its callers (docs/partial.md)."""
    _partial.append(asyncio.run(simulate(seed, PARTIAL)))


def test_the_mixed_grants_relay_and_fetch() -> None:
    """Not vacuous: over the seeds run, headers were held without their payload, payloads
    were asked for by id and fetched, and payloads filled in were passed on."""
    if len(_partial) < len(PARTIAL_SEEDS) or len(PARTIAL_SEEDS) < 20:
        pytest.skip("only over the whole default set of mixed-grant seeds")
    total: Counter[str] = Counter()
    for outcome in _partial:
        total.update(outcome.stats)
    for what in ("payloads withheld", "wants", "payloads fetched", "filled payloads passed on"):
        assert total[what] > 0, f"no {what} in {len(_partial)} seeds: {dict(total)}"


def test_a_seed_replays_exactly() -> None:
    first, again = (asyncio.run(simulate(SEEDS[0])) for _ in range(2))
    assert first.trace == again.trace
    assert first.stats == again.stats


def test_the_seeds_meet_every_fault() -> None:
    """Not vacuous: over the seeds run, every fault happened and did what it is for."""
    if len(_seen) < len(SEEDS) or len(SEEDS) < 50:
        pytest.skip("only over the whole default set of seeds")
    total: Counter[str] = Counter()
    for outcome in _seen:
        total.update(outcome.stats)
    for what in (
        "fault partition",
        "fault oneway",
        "fault duplicate",
        "fault slow",
        "fault reset",
        "crashes",
        "crashes before a commit",
        "crashes after a commit",
        "restarts",
        "chunks lost",
        "connections cut",
        "waits for credit",
        "writes",
        "writes e_write new",
        "writes e_write update",
        "writes e_correct",
        "writes e_adjust",
        "writes e_erase",
        "writes work_record",
        "writes work_result",
        "writes work_forget",
    ):
        assert total[what] > 0, f"no {what} in {len(_seen)} seeds: {dict(total)}"
    # Entries arrived more than once (over new connections, relays, duplicate connections).
    assert total["entries received"] > total["entries stored"]


def test_the_bench_runs_a_batch_and_reports_it(tmp_path: Path) -> None:
    batch = sim_bench.Batch("one seed", Size(), range(SEEDS[0], SEEDS[0] + 1))
    sim_bench.run_batch(batch, tmp_path)
    text = str(sim_bench.Report([batch]))
    assert not batch.failures, text
    assert "one seed" in text
    assert text.endswith("every seed converged: PASS")
    assert not list(tmp_path.iterdir()), "the run left files behind"
