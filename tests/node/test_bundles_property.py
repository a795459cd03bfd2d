"""The bundle property (docs/bundles.md §What an import guarantees): for random logs cut into
bundles — incremental ones from the frontier of the last cut, some of them workspace bundles, each
followed up by a full one — imported in a random order, the importer ends holding exactly what a
node syncing directly with the exporter over loopback holds, and answers alike."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.node import Node
from tests.node.bundlekit import answers, caller, write
from tests.node.helpers import ForeignWriter, Wall, pending
from tests.node.synckit import converged, held, make_mesh, syncing

# One stage: (SRs written in team, in other, entries of the foreign writer, workspace bundle?)
stage = st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 3), st.booleans())


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stages=st.lists(stage, min_size=1, max_size=4), order=st.randoms(use_true_random=False))
def test_bundles_in_any_order_equal_a_direct_sync(
    stages: list[tuple[int, int, int, bool]], order: object
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_scenario(Path(tmp), stages, order))


async def _scenario(root: Path, stages: list[tuple[int, int, int, bool]], order: object) -> None:
    wall, writer = Wall(), ForeignWriter(b"")
    dirs = await make_mesh(root, ["A", "B", "C"], wall, [writer])
    async with Node.open(dirs["A"], wall=wall) as a:
        bundles = await _cut(a, root, writer, stages)
    order.shuffle(bundles)  # type: ignore[attr-defined]
    async with Node.open(dirs["B"], wall=wall) as b:
        for path in bundles:
            await b.import_bundle(path)
    async with (
        Node.open(dirs["A"], wall=wall) as a,
        Node.open(dirs["B"], wall=wall) as b,
        Node.open(dirs["C"], wall=wall) as c,
    ):
        async with syncing(a) as sa, syncing(c) as sc:
            sc.dial(*await sa.listen())
            await converged([a, c], [sa, sc])
        assert await held(b) == await held(c)
        for workspace in ("team", "other"):
            assert await answers(b, await caller(b, workspace)) == await answers(
                c, await caller(c, workspace)
            )
        assert (await b.verify()).ok
        assert await pending(b) == set()


async def _cut(
    a: Node, root: Path, writer: ForeignWriter, stages: list[tuple[int, int, int, bool]]
) -> list[Path]:
    team, other = await caller(a, "team"), await caller(a, "other")
    bundles: list[Path] = []
    since: Path | None = None
    for i, (in_team, in_other, foreign, by_workspace) in enumerate(stages):
        await write(a, team, *(f"team {i}.{n}" for n in range(in_team)))
        await write(a, other, *(f"other {i}.{n}" for n in range(in_other)))
        await a.receive(writer.run(foreign), source="test")
        cut = root / f"{i}.bundle"
        await a.export_bundle(cut, since=since, workspace="team" if by_workspace else None)
        bundles.append(cut)
        if by_workspace:  # the rest of the payloads follow in a bundle of their own
            await a.export_bundle(root / f"{i}.full.bundle", since=since)
            bundles.append(root / f"{i}.full.bundle")
        since = root / f"{i}.frontier"
        await a.write_frontier(since)
    return bundles
