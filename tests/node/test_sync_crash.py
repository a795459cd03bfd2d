"""Crash safety of the receiving side of sync: node B runs in a child process that dials
node A and syncs, and is killed with SIGKILL at random moments, again and again, on one data
directory; then it runs once more until both sides have caught up.

A holds a few thousand entries (its own, and two other writers' logs it received) and gains
a batch of the other writers' entries in every round — sometimes while B is down (B gets them
by catch-up), sometimes while B is connected (by push) — so that each kill lands while
entries are streaming.  B writes a few entries of its own at every start.

Afterwards: ``PRAGMA integrity_check`` is ok; every entry B acknowledged (a committed sync
batch, or a write of its own) is stored; no entry was stored as new twice; B's logs equal
A's, entry id for entry id; every entry that arrived at B from A has exactly one
``sr_synced`` event, and the entries B wrote itself none (and on A, one each); B's views
have as many rows as A's; nothing waits in B's pending area; ``Node.verify`` and
``memlane log verify`` pass.

The kill moments come from a seeded ``random.Random``; the seed is printed and named in the
assertion messages (set ``MEMLANE_SYNC_CRASH_SEED`` to repeat it).  Scheduling still varies
between runs.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from node.identity import DB_FILE, NODE_KEY_FILE, load_key
from node.mesh.sync import Sync
from node.node import Node, system_wall
from tests.node.helpers import STORED_TABLES, ForeignWriter, sr_payload
from tests.node.synckit import FAST, make_mesh, write_own

CHILD = Path(__file__).with_name("sync_crash_child.py")
MEMLANE = Path(sys.executable).with_name("memlane")
KILLS = 24  # kills aimed at a moment while entries stream to B
EARLY = 4  # and kills at any moment of a run's first EARLY_WINDOW seconds
EARLY_WINDOW = 0.4
KINDS = ("catch-up", "catch-up", "push")
INITIAL = 1000  # other writers' entries A holds before the first round
OWN_ON_A = 60  # entries A writes itself
PER_ROUND = 200  # other writers' entries A gains in each round
SHARE = 0.6  # a kill waits for up to this share of what B lacks to be acknowledged …
JITTER = (0.0, 0.02)  # … and then this many seconds more
START_TIMEOUT = 20.0  # for "ready" and then the first acknowledged batch
FINISH_TIMEOUT = 30.0
EXIT_TIMEOUT = 10.0

LogIds = dict[tuple[bytes, bytes], list[bytes]]


@dataclass
class Acks:
    """What B acknowledged, over every run."""

    new: Counter[str] = field(default_factory=Counter)  # stored by a sync batch
    held: set[str] = field(default_factory=set)  # in a sync batch, already held
    own: set[str] = field(default_factory=set)  # written by B (e_write)
    episodes: set[str] = field(default_factory=set)  # written by B (work_record)

    def add(self, line: str) -> None:
        match line.split():
            case ["new", entry_id]:
                self.new[entry_id] += 1
            case ["held", entry_id]:
                self.held.add(entry_id)
            case ["own", entry_id]:
                self.own.add(entry_id)
            case ["ep", episode_id]:
                self.episodes.add(episode_id)
            case ["ready"] | ["live"]:
                pass
            case _:
                raise AssertionError(f"unexpected line from the child: {line!r}")

    @property
    def synced(self) -> set[str]:
        return set(self.new) | self.held


class Child:
    """One run of node B; a task drains its stdout, line by line."""

    def __init__(self, proc: asyncio.subprocess.Process, stderr: Path) -> None:
        self.proc = proc
        self.stderr = stderr
        self.lines: asyncio.Queue[bytes] = asyncio.Queue()
        self.eof = asyncio.Event()
        self._pump = asyncio.create_task(self._drain())

    @classmethod
    async def start(
        cls,
        data: Path,
        address: tuple[str, int],
        seed: int,
        own: int,
        stderr: Path,
        *,
        finish: bool = False,
    ) -> Child:
        args = [str(data), address[0], str(address[1]), str(seed), str(own)]
        with stderr.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                str(CHILD),
                *args,
                *(["--finish"] if finish else []),
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
            )
        return cls(proc, stderr)

    async def _drain(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            self.lines.put_nowait(line)
        self.eof.set()

    async def why(self) -> str:
        try:
            async with asyncio.timeout(1.0):
                code = await self.proc.wait()
        except TimeoutError:
            code = None
        err = self.stderr.read_text(errors="replace")[-3000:]
        return f"child exit status {code}; its stderr:\n{err}"

    async def next_line(self, deadline: float) -> str:
        """The next complete line, failing on end of output or at ``deadline``."""
        get = asyncio.ensure_future(self.lines.get())
        ended = asyncio.ensure_future(self.eof.wait())
        try:
            await asyncio.wait(
                {get, ended},
                timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            ended.cancel()
            if not get.done():
                get.cancel()
        if not get.done() or get.cancelled():
            if self.lines.qsize():  # the line came with the end of output
                return await self.next_line(deadline)
            said = "stopped early" if self.eof.is_set() else "said nothing in time"
            raise AssertionError(f"the child {said}; {await self.why()}")
        line = get.result()
        if not line.endswith(b"\n"):
            raise AssertionError(f"the child stopped early; {await self.why()}")
        return line.decode().rstrip("\n")

    async def rest(self) -> list[str]:
        """Every whole line printed and not yet taken, once the output has ended (a partial
        last one is not an acknowledgement)."""
        async with asyncio.timeout(EXIT_TIMEOUT):
            await self._pump
        out = []
        while not self.lines.empty():
            line = self.lines.get_nowait()
            if line.endswith(b"\n"):
                out.append(line.decode().rstrip("\n"))
        return out

    async def kill(self) -> list[str]:
        self.proc.send_signal(signal.SIGKILL)
        async with asyncio.timeout(EXIT_TIMEOUT):
            await self.proc.wait()
        assert self.proc.returncode == -signal.SIGKILL, await self.why()
        return await self.rest()

    async def close(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        self._pump.cancel()
        await asyncio.gather(self._pump, return_exceptions=True)


def log_ids(db_path: Path) -> LogIds:
    """Every stored entry id, per log (writer, epoch), in seq order.  Read-only: a store
    left by a kill is opened by the next run as the kill left it (its WAL not checkpointed
    here)."""
    out: LogIds = {}
    with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
        rows = db.execute(
            "SELECT l.writer, l.epoch, h.id FROM headers h JOIN logs l ON l.log_id = h.log_id "
            "ORDER BY l.writer, l.epoch, h.seq"
        )
        for writer, epoch, entry_id in rows:
            out.setdefault((bytes(writer), bytes(epoch)), []).append(bytes(entry_id))
    return out


def count_besides(logs: LogIds, writer: bytes) -> int:
    """Entries stored in logs not written by ``writer``."""
    return sum(len(ids) for (w, _), ids in logs.items() if w != writer)


@dataclass
class Sender:
    """Node A, the other writers whose entries it receives, and its sync address."""

    node: Node
    writers: list[ForeignWriter]
    address: tuple[str, int] = ("", 0)

    async def grow(self, rng: random.Random, n: int) -> None:
        """``n`` more entries of the other writers, a few hundred per receive."""
        fresh = []
        for _ in range(n):
            writer = rng.choice(self.writers)
            seq = len(writer.entries) + 1
            sr_id = f"00000000-0000-7000-{writer.seed[0]:04x}-{seq:012d}"
            text = "x" * rng.randrange(100, 1500)
            fresh.append(writer.next(payload=sr_payload(sr_id, title=f"t{seq}", text=text)))
        for i in range(0, n, 300):
            report = await self.node.receive(fresh[i : i + 300], source="bundle")
            assert report.stored == len(fresh[i : i + 300])


@dataclass
class Round:
    kind: str
    before: int  # A's entries B held when the run started (B's own log aside)
    after: int  # … when it was killed
    total: int  # A's entries then (B's own log aside)
    lines: list[str]

    @property
    def mid_stream(self) -> bool:
        return self.before < self.after < self.total


async def run_and_kill(
    a: Sender,
    dirs: dict[str, Path],
    kind: str,
    rng: random.Random,
    err: Path,
    tag: str,
) -> Round:
    """One run of B, killed at a point drawn from ``rng``:

    - ``early``: a moment in its first ``EARLY_WINDOW`` seconds (its own writes, the dial,
      the handshake or the first batches);
    - ``catch-up``: A gains ``PER_ROUND`` entries before B starts; B is killed once it has
      acknowledged a random share of what it lacks, plus a jitter;
    - ``push``: A gains ``PER_ROUND`` entries once B is live, and B is killed once it has
      acknowledged a random share of them, plus a jitter."""
    b_key = load_key(dirs["B"] / NODE_KEY_FILE).public
    if kind == "catch-up":
        await a.grow(rng, PER_ROUND)
    before = count_besides(log_ids(dirs["B"] / DB_FILE), b_key)
    lacking = count_besides(log_ids(dirs["A"] / DB_FILE), b_key) - before
    own = rng.randrange(3)
    child = await Child.start(dirs["B"], a.address, rng.randrange(2**31), own, err)
    lines: list[str] = []

    async def read_until(stop: Callable[[str], bool]) -> None:
        while not stop(line := await child.next_line(deadline)):
            lines.append(line)
        lines.append(line)

    def synced() -> int:
        return sum(1 for line in lines if line.split()[0] in ("new", "held"))

    try:
        deadline = time.monotonic() + START_TIMEOUT
        await read_until(lambda line: line == "ready")
        if kind == "early":
            await asyncio.sleep(rng.uniform(0, EARLY_WINDOW))
        else:
            if kind == "push":
                await read_until(lambda line: line == "live")
                await a.grow(rng, PER_ROUND)
                lacking = PER_ROUND
            share = synced() + rng.randint(1, max(1, int(lacking * SHARE)))
            if synced() < share:
                await read_until(lambda _: synced() >= share)
            await asyncio.sleep(rng.uniform(*JITTER))
        assert child.proc.returncode is None, f"{tag}: {await child.why()}"
        total = count_besides(log_ids(dirs["A"] / DB_FILE), b_key)
        lines += await child.kill()
    finally:
        await child.close()
    after = count_besides(log_ids(dirs["B"] / DB_FILE), b_key)
    return Round(kind, before, after, total, lines)


async def scenario(tmp_path: Path, seed: int) -> tuple[Acks, list[Round], set[bytes]]:
    rng = random.Random(seed)
    writers = [ForeignWriter(b"", seed=bytes([7 + i]) * 32) for i in range(2)]
    dirs = await make_mesh(tmp_path, ["A", "B"], system_wall, writers)
    baseline = {i for ids in log_ids(dirs["B"] / DB_FILE).values() for i in ids}
    b_key = load_key(dirs["B"] / NODE_KEY_FILE).public
    acks, rounds = Acks(), []
    err = tmp_path / "child.err"
    tag = f"(seed {seed}; MEMLANE_SYNC_CRASH_SEED={seed} repeats it)"

    async with Node.open(dirs["A"]) as a:
        await write_own(a, OWN_ON_A)
        sender = Sender(a, writers)
        await sender.grow(rng, INITIAL)
        async with Sync(a.replica(), key=a.key.public, options=FAST) as sync:
            address = sender.address = await sync.listen()
            for n in range(KILLS + EARLY):
                kind = rng.choice(KINDS) if n >= EARLY else "early"
                rounds.append(await run_and_kill(sender, dirs, kind, rng, err, tag))
                r = rounds[-1]
                print(
                    f"kill {n + 1} ({kind}): B held {r.after} of A's {r.total} entries"
                    f" (from {r.before}), {len(r.lines)} lines"
                )
                for line in r.lines:
                    acks.add(line)

            # The last run: B catches up both ways and closes the link.
            child = await Child.start(dirs["B"], address, rng.randrange(2**31), 2, err, finish=True)
            try:
                deadline = time.monotonic() + FINISH_TIMEOUT
                while (line := await child.next_line(deadline)) != "done":
                    acks.add(line)
                async with asyncio.timeout(EXIT_TIMEOUT):
                    assert await child.proc.wait() == 0, f"{tag}: {await child.why()}"
                for line in await child.rest():
                    acks.add(line)
            finally:
                await child.close()

            # A has everything B wrote (B said bye only after its catch-up).
            def written_by_b(data: Path) -> LogIds:
                return {k: v for k, v in log_ids(data / DB_FILE).items() if k[0] == b_key}

            own_b = written_by_b(dirs["B"])
            async with asyncio.timeout(10):
                while True:
                    version = sync.commits.version
                    if written_by_b(dirs["A"]) == own_b:
                        break
                    await sync.commits.wait(version)
    return acks, rounds, baseline


async def _verify(data: Path) -> tuple[bool, list[str], bytes, bytes]:
    async with Node.open(data) as node:
        report = await node.verify()
        return report.ok, report.problems, node.info.public_key, node.info.epoch


def _synced(db: sqlite3.Connection) -> Counter[bytes]:
    rows = db.execute("SELECT entry FROM audit WHERE event = 'sr_synced'").fetchall()
    assert all(entry is not None for (entry,) in rows), "an sr_synced event without its entry"
    return Counter(bytes(entry) for (entry,) in rows)


def _rows(db: sqlite3.Connection) -> dict[str, int]:
    return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in STORED_TABLES}


@pytest.mark.slow
def test_a_receiving_node_killed_mid_sync_resumes_and_loses_nothing(tmp_path: Path) -> None:
    seed = int(os.environ.get("MEMLANE_SYNC_CRASH_SEED", random.randrange(2**32)))
    print(f"sync crash seed {seed} (MEMLANE_SYNC_CRASH_SEED={seed} repeats the kill moments)")
    tag = f"seed {seed}"
    started = time.monotonic()
    acks, rounds, baseline = asyncio.run(scenario(tmp_path, seed))
    aimed = [r for r in rounds if r.kind != "early"]
    mid = sum(r.mid_stream for r in aimed)
    print(
        f"{len(rounds)} kills in {time.monotonic() - started:.1f}s: {mid} of {len(aimed)} "
        f"aimed mid-stream landed there (B held more than at its start and less than A), "
        f"{sum(r.mid_stream for r in rounds) - mid} of {EARLY} early ones too; "
        f"{sum(acks.new.values())} entries acknowledged as stored by a sync batch, "
        f"{len(acks.held)} as already held"
    )
    assert mid >= 20, f"{tag}: only {mid} of {len(aimed)} kills landed mid-stream"

    ok, problems, b_key, b_epoch = asyncio.run(_verify(tmp_path / "B"))
    assert ok, f"{tag}: {problems}"
    a_ids, b_ids = log_ids(tmp_path / "A" / DB_FILE), log_ids(tmp_path / "B" / DB_FILE)
    assert b_ids == a_ids, f"{tag}: B's logs differ from A's"
    own = b_ids[(b_key, b_epoch)]
    held = {i for ids in b_ids.values() for i in ids}
    arrived = held - baseline - set(own)

    with closing(sqlite3.connect(tmp_path / "B" / DB_FILE)) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)], tag
        assert db.execute("PRAGMA foreign_key_check").fetchall() == [], tag
        assert db.execute("SELECT count(*) FROM pending").fetchone() == (0,), tag

        # Every acknowledged entry is stored; none was stored as new twice.
        hexes = {i.hex() for i in held}
        lost = sorted((acks.synced | acks.own) - hexes)
        assert not lost, f"{tag}: {len(lost)} acknowledged entries lost, e.g. {lost[:3]}"
        twice = [i for i, n in acks.new.items() if n > 1]
        assert not twice, f"{tag}: {len(twice)} entries stored twice, e.g. {twice[:3]}"
        assert acks.own <= {i.hex() for i in own}, tag
        episodes = {i for (i,) in db.execute("SELECT id FROM episodes")}
        assert acks.episodes <= episodes, f"{tag}: acknowledged episodes lost"

        # B's own log: seqs 1..head without a gap.
        seqs = [
            s
            for (s,) in db.execute(
                "SELECT h.seq FROM headers h JOIN logs l ON l.log_id = h.log_id "
                "WHERE l.writer = ? AND l.epoch = ? ORDER BY h.seq",
                (b_key, b_epoch),
            )
        ]
        assert seqs == list(range(1, len(own) + 1)), tag

        b_rows = _rows(db)

        # One sr_synced per arrived entry; none for what B wrote itself.
        synced = _synced(db)
        assert not set(synced) & set(own), f"{tag}: an sr_synced event for B's own entry"
        extra = {i.hex(): n for i, n in synced.items() if n != 1 or i not in arrived}
        assert not extra, f"{tag}: sr_synced events beyond one per arrival: {extra}"
        missing = sorted(i.hex() for i in arrived - set(synced))
        assert not missing, f"{tag}: {len(missing)} arrivals without sr_synced: {missing[:3]}"

    with closing(sqlite3.connect(tmp_path / "A" / DB_FILE)) as db:
        # Nothing applied twice to a view either: B's views have A's rows.
        assert _rows(db) == b_rows, f"{tag}: B's views differ from A's"
        synced = _synced(db)
        assert all(synced[i] == 1 for i in own), f"{tag}: A's sr_synced for B's entries"
        assert all(n == 1 for n in synced.values()), tag

    verify = subprocess.run(
        [str(MEMLANE), "log", "verify", "--data", str(tmp_path / "B")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert verify.stdout.startswith("ok:"), verify.stdout
