"""Long work tells how far it is (node/progress.py): a views rebuild, a bundle's export and
import, an archive's creation and restore each tell their phases, in order, counting up to the
whole — what the CLI draws on a terminal (tests/node/test_cli_progress.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.node import Node
from tests.node.bundlekit import caller, write
from tests.node.helpers import ForeignWriter, Wall
from tests.node.synckit import make_mesh

pytestmark = pytest.mark.asyncio


class Told:
    """Every (phase, done, total) a piece of work told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def __call__(self, phase: str, done: int, total: int) -> None:
        self.calls.append((phase, done, total))

    def phases(self) -> list[str]:
        return list(dict.fromkeys(phase for phase, _, _ in self.calls))

    def check(self, phase: str) -> tuple[int, int]:
        """Within ``phase``: ``done`` never goes back nor passes ``total``, and the last call
        says it is whole; that last (done, total)."""
        mine = [(d, t) for p, d, t in self.calls if p == phase]
        assert mine, f"nothing told of {phase}"
        assert [d for d, _ in mine] == sorted(d for d, _ in mine)
        assert all(0 <= d <= t for d, t in mine)
        assert mine[-1][0] == mine[-1][1]
        return mine[-1]


async def test_a_bundle_tells_its_export_and_its_two_passes(tmp_path: Path, wall: Wall) -> None:
    writer = ForeignWriter(b"")
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, [writer])
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await a.receive(writer.run(2500), source="test")
        exported, imported = Told(), Told()
        report = await a.export_bundle(tmp_path / "a.bundle", progress=exported)
        await b.import_bundle(tmp_path / "a.bundle", progress=imported)

        assert exported.phases() == ["export"]
        assert exported.check("export") == (report.entries, report.entries)
        assert len(exported.calls) >= 3  # on the way, not only at the end
        assert imported.phases() == ["verify", "import"]
        size = (tmp_path / "a.bundle").stat().st_size
        assert imported.check("verify") == imported.check("import") == (size, size)


async def test_a_rebuild_tells_the_entries_it_replays(tmp_path: Path, wall: Wall) -> None:
    dirs = await make_mesh(tmp_path, ["A"], wall)
    async with Node.open(dirs["A"], wall=wall) as a:
        await write(a, await caller(a), *[f"note {i}" for i in range(1500)])
        told = Told()
        applied = await a.rebuild_views(progress=told)
        assert told.phases() == ["rebuild"]
        assert told.check("rebuild") == (applied, applied)
        assert applied > 1500
        assert len(told.calls) >= 2


async def test_an_archive_tells_its_snapshot_its_writing_and_its_unpacking(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await make_mesh(tmp_path, ["A"], wall)
    async with Node.open(dirs["A"], wall=wall) as a:
        await write(a, await caller(a), *[f"note {i}" for i in range(300)])
        created = Told()
        await a.create_archive(tmp_path / "a.archive", b"a long passphrase", progress=created)
    assert created.phases() == ["snapshot", "write"]
    assert created.check("snapshot") == (1, 1)
    written, _ = created.check("write")
    restored = Told()
    await Node.restore_archive(
        tmp_path / "a.archive", tmp_path / "A2", b"a long passphrase", wall=wall, progress=restored
    )
    assert restored.phases() == ["unpack"]
    assert restored.check("unpack") == (written, written)  # the same files, byte for byte
