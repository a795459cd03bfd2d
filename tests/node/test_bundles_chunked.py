"""A bundle import in chunks (docs/bundles.md §What an import guarantees): another writer on the
same store gets in between two chunks' transactions instead of after the import, and an import
killed between chunks is finished by the next — one ``bundle_imported`` event counting the whole
import, nothing twice, the store checking clean; a file changed after its first chunks keeps
them, and two imports of one bundle at once leave one to finish it.  Real stores on real files:
the second writer is a second node on the same data directory (SQLite's write lock is what they
share); the killed import is a child process."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from node.identity import DB_FILE
from node.node import Node
from node.transfer import bundles
from protocol.bundle import BundleHeader, BundleWriter
from protocol.entry import Entry
from protocol.frontier import Frontier
from tests.node.bundlekit import caller
from tests.node.helpers import ForeignWriter, Wall, events
from tests.node.synckit import held, make_mesh

pytestmark = pytest.mark.asyncio

CHILD = Path(__file__).with_name("bundle_crash_child.py")
ENTRIES = 3_000


async def mesh_and_bundle(
    tmp_path: Path, wall: Wall, *, cuts: int = 1
) -> tuple[dict[str, Path], Path]:
    """Two nodes of a mesh, and a bundle from A of a writer's ``ENTRIES`` SRs (cut without
    storing them on A); with ``cuts``, more bundles of the same entries beside it, cut at
    other moments (``many-2.bundle``, …)."""
    writer = ForeignWriter(b"")
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, [writer])
    entries: list[Entry] = writer.run(ENTRIES)
    async with Node.open(dirs["A"], wall=wall) as a:
        for cut in range(1, cuts + 1):
            header = BundleHeader(a.info.mesh, a.key.public, cut, Frontier())
            bundle = BundleWriter(a.key, header)
            out = tmp_path / ("many.bundle" if cut == 1 else f"many-{cut}.bundle")
            out.write_bytes(bundle.start() + b"".join(map(bundle.entry, entries)) + bundle.finish())
    return dirs, tmp_path / "many.bundle"


async def test_another_writer_gets_in_between_the_chunks(tmp_path: Path, wall: Wall) -> None:
    dirs, path = await mesh_and_bundle(tmp_path, wall)
    async with Node.open(dirs["B"], wall=wall) as b, Node.open(dirs["B"], wall=wall) as other:
        who = await caller(other)
        importing = asyncio.ensure_future(
            bundles.import_bundle(b.store, b.info.mesh, path, chunk=250, pause=0.05)
        )
        waited: list[tuple[float, float]] = []  # (when it returned, how long it took)
        started = time.monotonic()
        while not importing.done():
            t = time.monotonic()
            await other.e_write(who, title=f"beside {len(waited)}", text="written meanwhile")
            waited.append((time.monotonic(), time.monotonic() - t))
            await asyncio.sleep(0.02)
        report = await importing
        took = time.monotonic() - started

    assert report.new == ENTRIES
    during = [w for done, w in waited if done < started + took]
    # One transaction held the lock for most of the import, and a write waited that long;
    # chunked, each write waits at most for one chunk (~60 ms here) and the pause after it.
    assert len(during) >= 5, waited
    assert max(during) < took / 4, (max(during), took)


async def test_an_import_killed_between_chunks_is_finished_by_the_next(
    tmp_path: Path, wall: Wall
) -> None:
    dirs, path = await mesh_and_bundle(tmp_path, wall)
    db = dirs["B"] / DB_FILE
    before = _headers(db)
    seen = _kill_mid_import(dirs["B"], path, db, stored=before + 300)

    after_kill = _headers(db)  # what the killed import committed: a prefix, kept
    assert before + 300 <= seen <= after_kill < before + ENTRIES
    async with Node.open(dirs["B"], wall=wall) as b:
        assert await events(b, "bundle_imported") == []
        finished = await b.import_bundle(path)
        rows = await held(b)
        # the counts are the whole import's, as if it had not been interrupted
        assert (finished.new, finished.already_present, finished.pending) == (ENTRIES, 0, 0)
        (event,) = await events(b, "bundle_imported")
        assert event.detail == finished.detail() | {"subjects": event.detail["subjects"]}
        feed = await b.e_audit(await caller(b), action="list", since_seq=0)
        shown = [e["detail"] for e in feed["events"] if e["event"] == "bundle_imported"]
        assert shown == [{"entries": ENTRIES, "srs": ENTRIES, "episodes": 0}]

        again = await b.import_bundle(path)
        assert (again.new, again.already_present) == (0, ENTRIES)
        assert await held(b) == rows
        assert (await b.verify()).ok
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute(
            "SELECT count(*) FROM state WHERE key LIKE 'bundle_import:%'"
        ).fetchone() == (0,)


async def test_a_file_changed_after_its_first_chunks_keeps_them_and_is_finished_later(
    tmp_path: Path, wall: Wall
) -> None:
    dirs, path = await mesh_and_bundle(tmp_path, wall, cuts=2)
    other = tmp_path / "many-2.bundle"  # the same entries; another header, another digest
    async with Node.open(dirs["B"], wall=wall) as b:

        def swap_once_verified(phase: str, done: int, total: int) -> None:
            if phase == "verify" and done == total:
                swapped = tmp_path / "swapped.bundle"
                swapped.write_bytes(other.read_bytes())
                swapped.replace(path)

        kept, before = path.read_bytes(), len(await held(b))
        with pytest.raises(
            bundles.BundleError,
            match="changed while it was being imported "
            r"\(its digest differs\); its first 2,500 entries were stored",
        ):
            await bundles.import_bundle(
                b.store, b.info.mesh, path, chunk=500, progress=swap_once_verified
            )
        assert await events(b, "bundle_imported") == []
        assert len(await held(b)) == before + 2_500  # the first five chunks, kept
        path.write_bytes(kept)
        finished = await bundles.import_bundle(b.store, b.info.mesh, path, chunk=500)
        assert (finished.new, finished.already_present) == (ENTRIES, 0)
        assert len(await events(b, "bundle_imported")) == 1


async def test_two_imports_of_one_bundle_at_once_leave_one_to_finish_it(
    tmp_path: Path, wall: Wall
) -> None:
    dirs, path = await mesh_and_bundle(tmp_path, wall)
    async with Node.open(dirs["B"], wall=wall) as b, Node.open(dirs["B"], wall=wall) as c:
        outcomes = await asyncio.gather(
            *(
                bundles.import_bundle(n.store, n.info.mesh, path, chunk=100, pause=0.01)
                for n in (b, c)
            ),
            return_exceptions=True,
        )
        (stopped,) = [o for o in outcomes if isinstance(o, BaseException)]
        (finished,) = [o for o in outcomes if isinstance(o, bundles.ImportReport)]
        assert isinstance(stopped, bundles.BundleError), stopped
        assert "is being imported by another process as well" in str(stopped)
        assert (finished.new, finished.already_present) == (ENTRIES, 0)
        (event,) = await events(b, "bundle_imported")
        assert event.detail == finished.detail() | {"subjects": event.detail["subjects"]}


def _headers(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        count: int = conn.execute("SELECT count(*) FROM headers").fetchone()[0]
    return count


def _kill_mid_import(data: Path, bundle: Path, db: Path, *, stored: int) -> int:
    """Start an import of ``bundle`` in a child, kill it once ``stored`` headers are
    committed; the count seen just before the kill."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(data), str(bundle), "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line == b"ready\n", child.stderr.read() if child.stderr else line
        deadline = time.monotonic() + 30
        while (seen := _headers(db)) < stored and child.poll() is None:
            assert time.monotonic() < deadline, "the import stored nothing in time"
            time.sleep(0.005)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        assert child.returncode == -signal.SIGKILL, child.communicate()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    return seen
