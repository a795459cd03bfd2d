"""The sync benchmark (docs/benchmarks.md): two nodes of one mesh over mutual TLS on loopback.

A sender store of 200,000 ``sr.put`` entries from 20 writers (views built) is made once and
cached under ``.bench-cache/`` beside an empty receiver of the same mesh.  Each run copies
both, then:

- **initial sync**: the sender in one child process, the receiver in another, connected
  through a byte-counting TCP relay in this process; timed in the receiver from ``dial`` to
  the frontier equal to the sender's (TLS handshake, hello, rounds, catch-up, every commit
  and view row included);
- **the raw pipeline**, on the same machine, without the protocol: the same entries decoded,
  verified chain-amortised per log (``protocol.signing.authentic_from``) and the rows the
  sync wrote into the receiver written with stdlib ``executemany`` in one transaction per
  batch, ``synchronous=FULL``; and the same with per-entry verification;
- **a forced disconnect**: the initial sync again, the relay cutting the connection once
  half of the first run's bytes have passed; the entries the sender sent beyond the log;
- **in-sync rounds**: a small mesh of 100 writers, in sync over TLS, starting rounds on a
  short timer; the bytes each round takes on the wire.

Peak RSS is each process's own (``ru_maxrss``), with the resident set sampled at a quarter
and at the end of the log.  Nothing here asserts on speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import multiprocessing
import os
import platform
import shutil
import sqlite3
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from node.identity import DB_FILE, NODE_KEY_FILE
from node.logging import configure_logging
from node.members import certs
from node.mesh.host import LinkOptions
from node.mesh.link import STORING
from node.mesh.peers import PeerState
from node.mesh.sync import PeerKey, Sync, SyncOptions
from node.node import Node
from node.schema import MIGRATIONS, SCHEMA_VERSION
from node.views.search_index import load_segment
from node.views.segments import Docs, Postings, encode_docs, encode_postings
from protocol.batch import MAX_BATCH_ENTRIES
from protocol.entry import Entry
from protocol.signing import SigningKey, authentic_from
from tests.bench.common import (
    SMOKE,
    Checked,
    Ratio,
    Result,
    Row,
    Stopwatch,
    cached,
    in_child,
    progress,
    receive_batch,
    verdict,
)
from tests.node.helpers import ForeignWriter, sr_payload
from tests.node.synckit import frontier_digest, make_mesh, until

__all__ = ["CHECKS", "FULL", "QUICK", "RATIOS", "ROWS", "Sizes", "run", "run_on_stores"]

BUILD_VERSION = "sync-stores-1"

SYNC = "sync over TLS, end to end"
RAW = "raw pipeline, chain-amortised"
PER_ENTRY = "raw pipeline, per-entry verify"
RECEIVE = "memlane receive, no protocol"
ROWS = (SYNC, RAW, PER_ENTRY, RECEIVE)
RATIOS = (
    # 0.6 and 0.65 until the text index: the raw pipeline writes its segments prebuilt, memlane
    # cuts and merges them — ~10 % of a received entry (docs/benchmarks.md §sync, issue 41).
    Ratio("sync / raw pipeline", SYNC, RAW, target=0.55),
    Ratio("memlane receive / raw pipeline", RECEIVE, RAW, target=0.6),
    # Information since the apply-path work: it measures the crypto library, not memlane.
    Ratio("sync / per-entry-verify pipeline", SYNC, PER_ENTRY),
    Ratio("sync / memlane receive, no protocol", SYNC, RECEIVE),
)
# The checks printed under the ratios (label, target), in print order.
BYTES_PER_ENTRY = "bytes on the wire per entry"
ROUND_BYTES = "bytes per in-sync round, 100 writers"
RESENT = "entries re-sent after a cut midway"
RECEIVER_RSS = "receiver RSS, end / quarter of the log"
SENDER_RSS = "sender RSS, end / quarter of the log"
CHECKS = (BYTES_PER_ENTRY, ROUND_BYTES, RESENT, RECEIVER_RSS, SENDER_RSS)

# RSS "independent of log size": from a quarter of the log to all of it, at most this growth.
RSS_GROWTH_LIMIT = 1.10


@dataclass(frozen=True, slots=True)
class Sizes:
    """How much the run does; ``FULL`` for ``make bench``, ``QUICK`` for the smoke test."""

    name: str = "sync-200k"
    entries: int = 200_000
    writers: int = 20
    build_batch: int = 1_000  # entries per receive while the sender store is built
    round_writers: int = 100
    round_entries: int = 2  # per writer of the in-sync mesh
    rounds: int = 20


FULL = Sizes()
QUICK = Sizes(name="sync-quick", entries=3_000, round_writers=100, round_entries=1, rounds=5)

OPTIONS = SyncOptions(backoff_initial=0.05, backoff_max=1.0)
WORKSPACE = "team"
_TEXT = (
    "The deploy of the ingest service moved to the second region; the runbook now names the "
    "new failover order, and the on-call rota was updated to match. Check the dashboards after "
    "any schema migration. "
)
_DAY_MS = 86_400_000


def _wall() -> int:
    return time.time_ns() // 1_000_000


def _writer(mesh: bytes, w: int, wall: int) -> ForeignWriter:
    seed = hashlib.sha256(b"memlane bench sync writer %d" % w).digest()
    return ForeignWriter(mesh, seed=seed, epoch=w.to_bytes(8, "big"), wall=wall)


def _next(writer: ForeignWriter, w: int) -> Entry:
    seq = len(writer.entries) + 1
    sr_id = f"00000000-0000-7000-{0x8000 + w:04x}-{seq:012d}"
    fields = {"title": f"note {w}.{seq}", "text": _TEXT + str(seq), "tags": ["bench", "sync"]}
    return writer.next(payload=sr_payload(sr_id, WORKSPACE, **fields))


def _peak_mib() -> float:
    """This process's own peak resident set (``VmHWM``: ``ru_maxrss`` of a spawned child
    counts the parent's pages it was forked with)."""
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    return kib / 1024


def _rss_mib() -> float:
    """The current resident set (``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


# -- the cached stores ---------------------------------------------------------------------


def cache_key(sizes: Sizes) -> str:
    schema = hashlib.sha256("".join(MIGRATIONS).encode()).hexdigest()[:16]
    return (
        f"{BUILD_VERSION}/schema-{SCHEMA_VERSION}-{schema}/entries-{sizes.entries}/"
        f"writers-{sizes.writers}/batch-{sizes.build_batch}"
    )


async def _build(root: Path, sizes: Sizes) -> dict[str, Any]:
    """A mesh of a sender and a receiver (each with its node key) that admits the writers;
    the sender receives every writer's log, a batch of one writer at a time."""
    start = _wall() - 10 * _DAY_MS  # in the past: no clock-skew events
    writers = [_writer(b"", w, start) for w in range(sizes.writers)]
    dirs = await make_mesh(root, ["sender", "receiver"], _wall, writers)
    per_writer = sizes.entries // sizes.writers
    started = time.perf_counter()
    async with Node.open(dirs["sender"]) as node:
        done = 0
        while done < per_writer:
            step = min(sizes.build_batch, per_writer - done)
            for w, writer in enumerate(writers):
                batch = [_next(writer, w) for _ in range(step)]
                report = await node.receive([(e.raw, e.payload) for e in batch], source="bench")
                if report.stored != step:
                    raise RuntimeError(f"stored {report.stored} of a batch of {step}")
            done += step
            progress(f"sync: built {done * sizes.writers:,} of {sizes.entries:,} entries")
    return {"entries": per_writer * sizes.writers, "build_s": time.perf_counter() - started}


def _build_in_child(root: str, sizes: Sizes) -> dict[str, Any]:
    return asyncio.run(_build(Path(root), sizes))


def stores(sizes: Sizes) -> tuple[Path, dict[str, Any], bool]:
    """The cached pair (``sender/``, ``receiver/`` under the returned directory), its
    metadata, and whether it was made now (in a child process)."""
    what = f"sender of {sizes.entries:,} entries"
    return cached(sizes.name, cache_key(sizes), what, _build_in_child, sizes)


def run_on_stores(
    measure: Callable[[Path, Sizes], Checked], *, quick: bool, workdir: Path
) -> Checked:
    """The run of a benchmark on these stores (bundles, their serving, export and import):
    make (or reuse) them, then ``measure``; ``quick`` is a smoke run on the small ones."""
    configure_logging()
    started = time.perf_counter()
    report = measure(workdir, QUICK if quick else FULL)
    report.result.notes.append(f"the run took {time.perf_counter() - started:.0f} s")
    return report


# -- the relay that counts (and cuts) ------------------------------------------------------


@dataclass
class _Relay:
    """A TCP relay to ``target`` that counts the bytes each way (TLS records, as on the
    wire) and, once ``cut_at`` bytes have gone towards the client, cuts every connection
    once (new ones pass)."""

    target: tuple[str, int]
    cut_at: int | None = None
    down: int = 0  # target → client
    up: int = 0
    connections: int = 0
    cuts: int = 0
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _server: asyncio.Server | None = None

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in self._writers:
            w.transport.abort()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _cut(self) -> None:
        self.cuts += 1
        for w in self._writers:
            w.transport.abort()
        self._writers.clear()

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        self.connections += 1
        ur, uw = await asyncio.open_connection(*self.target)
        for sock in (cw, uw):
            s = sock.get_extra_info("socket")
            if s is not None:
                s.setsockopt(6, 1, 1)  # TCP_NODELAY, as both ends' own streams
        self._writers += [cw, uw]
        for task in (self._pipe(cr, uw, up=True), self._pipe(ur, cw, up=False)):
            t = asyncio.create_task(task)
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, up: bool
    ) -> None:
        try:
            while data := await src.read(1 << 16):
                if up:
                    self.up += len(data)
                else:
                    self.down += len(data)
                dst.write(data)
                await dst.drain()
                if not up and self.cut_at is not None and self.down >= self.cut_at:
                    self.cut_at = None
                    self._cut()
                    return
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            dst.transport.abort()


# -- the two processes ---------------------------------------------------------------------


def _peer_key(node: Node) -> PeerKey:
    def admits(key: bytes) -> bool:
        return node.membership.admits(key, _wall())

    return lambda ssl_object: certs.verified_peer(ssl_object, admits)


def _context(node: Node, ca_pem: bytes, cert_pem: bytes, *, server: bool) -> ssl.SSLContext:
    key = certs.private_key(node.path / NODE_KEY_FILE)
    make = certs.server_context if server else certs.client_context
    return make(certs.load_pem(ca_pem), certs.load_pem(cert_pem), key)


def _sender_main(path: str, receiver_key: bytes, conn: Connection) -> None:
    configure_logging()  # to stderr: stdout carries only the table
    asyncio.run(_sender(Path(path), receiver_key, conn))


async def _sender(path: Path, receiver_key: bytes, conn: Connection) -> None:
    """Serve the store over TLS until told to stop; then say what was sent, and the RSS."""
    async with Node.open(path) as node:
        ca = certs.pem(node.membership.authority_certificate())
        context = _context(node, ca, certs.pem(node.membership.node_certificate()), server=True)
        entries = sum(log.head_seq for log in await _logs(node))
        samples: list[tuple[int, float]] = []
        async with Sync(
            node.replica(), key=node.key.public, options=OPTIONS, peer_key=_peer_key(node)
        ) as sync:
            host, port = await sync.listen(ssl=context)
            conn.send(
                {
                    "address": (host, port),
                    "digest": await frontier_digest(node),
                    "ca": ca,
                    "receiver_cert": certs.pem(node.membership.node_certificate(receiver_key)),
                    "entries": entries,
                    "rss_start": _rss_mib(),
                }
            )

            async def sample() -> None:
                while True:
                    samples.append((sum(p.sent for p in sync.peers), _rss_mib()))
                    await asyncio.sleep(0.05)

            sampler = asyncio.create_task(sample())
            await asyncio.to_thread(conn.recv)  # "stop"
            sampler.cancel()
            sent = sum(p.sent for p in sync.peers)
            connections = sum(p.connections for p in sync.peers)
        conn.send(
            {"sent": sent, "connections": connections, "samples": samples, "peak_rss": _peak_mib()}
        )


async def _logs(node: Node) -> list[Any]:
    reader = node.reader()
    return await reader.select_logs()


def _receiver_main(path: str, info: dict[str, Any], conn: Connection) -> None:
    configure_logging()
    asyncio.run(_receiver(Path(path), info, conn))


async def _receiver(path: Path, info: dict[str, Any], conn: Connection) -> None:
    """Dial the sender over TLS and time it until the frontier is the sender's."""
    async with Node.open(path) as node:
        context = _context(node, info["ca"], info["receiver_cert"], server=False)
        held = {log.log_id: log.head_seq for log in await _logs(node)}
        lacking = info["lacking"]
        samples: list[tuple[int, float]] = []
        async with Sync(
            node.replica(), key=node.key.public, options=OPTIONS, peer_key=_peer_key(node)
        ) as sync:
            rss_start = _rss_mib()

            async def caught_up() -> bool:
                got = peer.received
                samples.append((got, _rss_mib()))
                if got < lacking:
                    return False
                return await frontier_digest(node) == info["digest"]

            with Stopwatch() as sw:
                peer = sync.dial(*info["address"], ssl=context)
                await until(caught_up, [sync], within=3600)
            received, connections = peer.received, peer.connections
            state = peer.state
        after = sum(log.head_seq for log in await _logs(node)) - sum(held.values())
    conn.send(
        {
            "seconds": sw.seconds,
            "received": received,
            "connections": connections,
            "stored": after,
            "live": state is PeerState.LIVE,
            "samples": samples,
            "rss_start": rss_start,
            "peak_rss": _peak_mib(),
        }
    )


@dataclass(slots=True)
class _SyncRun:
    seconds: float
    lacking: int
    stored: int
    received: int
    sent: int
    connections: int
    up: int
    down: int
    cuts: int
    receiver: dict[str, Any]
    sender: dict[str, Any]


async def _sync_once(cached: Path, work: Path, cut_at: int | None) -> _SyncRun:
    """Copy the cached pair into ``work`` and sync the receiver from the sender."""
    for side in ("sender", "receiver"):
        shutil.copytree(cached / side, work / side)
    receiver_key = SigningKey((work / "receiver" / NODE_KEY_FILE).read_bytes()).public
    context = multiprocessing.get_context("spawn")
    s_parent, s_child = context.Pipe()
    r_parent, r_child = context.Pipe()
    sender = context.Process(
        target=_sender_main, args=(str(work / "sender"), receiver_key, s_child)
    )
    sender.start()
    relay: _Relay | None = None
    try:
        info = await asyncio.to_thread(s_parent.recv)
        relay = _Relay(tuple(info["address"]), cut_at=cut_at)
        address = await relay.start()
        lacking = info["entries"] - _held(work / "receiver")
        receiver = context.Process(
            target=_receiver_main,
            args=(str(work / "receiver"), info | {"address": address, "lacking": lacking}, r_child),
        )
        receiver.start()
        got = await asyncio.to_thread(r_parent.recv)
        await asyncio.to_thread(receiver.join)
        s_parent.send("stop")
        sent = await asyncio.to_thread(s_parent.recv)
        await asyncio.to_thread(sender.join)
    finally:
        if relay is not None:
            await relay.close()
        if sender.is_alive():
            sender.kill()
    if not got["live"] or got["stored"] != lacking:
        raise RuntimeError(f"the receiver stored {got['stored']} of {lacking} entries")
    return _SyncRun(
        got["seconds"],
        lacking,
        got["stored"],
        got["received"],
        sent["sent"],
        got["connections"],
        relay.up,
        relay.down,
        relay.cuts,
        got,
        sent | {"rss_start": info["rss_start"]},
    )


def _held(node_dir: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{node_dir / DB_FILE}?mode=ro", uri=True)) as db:
        (n,) = db.execute("SELECT coalesce(sum(head_seq), 0) FROM logs").fetchone()
    return int(n)


def _rss_at(samples: Sequence[Sequence[float]], count: int) -> float:
    """The resident set sampled first once ``count`` entries had gone through."""
    return next((rss for n, rss in samples if n >= count), samples[-1][1])


# -- the raw pipelines ---------------------------------------------------------------------

_SKIPPED = {"schema_version", "sr_stats", "sr_vocab"}  # sr_stats: kept by triggers on srs
# The text index's segments: what the raw pipeline writes of them is each batch's docs as one
# segment (``_segments``); the merges that make memlane's larger segments are its own work.
_SEGMENTS = {"sr_segments", "sr_postings", "sqlite_sequence"}
# Tables of a few rows upserted by every batch (a log's head, the clock): written whole by each.
_EVERY_BATCH = {"logs", "state"}


@dataclass(slots=True)
class _Table:
    name: str
    columns: list[str]
    rows: list[tuple[Any, ...]]
    at: list[int] = field(default_factory=list)  # each row's entry, by arrival (not for logs)


Received = list[tuple[bytes, bytes | None]]


def _new_rows(synced: Path, template: Path) -> tuple[Received, list[_Table]]:
    """The entries the sync brought (in arrival order) and, table by table, the rows it
    wrote (new or changed), each with the entry it was written for: its position in
    arrival order (an SR's rows go with its newest entry)."""
    with _attached(synced, template) as db:
        before, entries = _arrived(db)
        at = _Arrival(db, before)
        every, postings = _index(db, at)
        tables = []
        names = db.execute(
            "SELECT name, sql FROM main.sqlite_master WHERE type = 'table' ORDER BY rowid"
        ).fetchall()
        for name, sql in names:
            if name in _SKIPPED | _SEGMENTS or name.startswith(("sqlite_", "sr_fts_")):
                continue
            table = _changed(db, name, sql)
            if table.rows:
                if name not in _EVERY_BATCH:
                    table.at = [at.of(table, row) for row in table.rows]
                tables.append(table)
        tables.append(_segments(every, postings, at, len(entries)))
    return entries, tables


def _index(db: sqlite3.Connection, at: _Arrival) -> tuple[Docs, npt.NDArray[np.int64]]:
    """Every doc the synced store's text index holds, and its postings as rows of (term,
    slot, counts…), slots numbering the docs in order; each term noted with the first entry
    (by arrival) whose doc holds it (``at.first_term``)."""
    docs, postings, base = [], [], 0
    for (seg,) in db.execute("SELECT seg FROM main.sr_segments").fetchall():
        segment, gone = load_segment(db, seg)
        keep = np.flatnonzero(~gone)
        for term, slots, tfs in segment.postings.lists():
            held = ~gone[slots]
            moved = np.searchsorted(keep, slots[held]) + base
            postings.append(np.column_stack([np.full(len(moved), term), moved, tfs[held]]))
        docs.append(segment.docs.taken(~gone))
        base += len(keep)
    every = Docs.joined(docs)
    rows = np.concatenate(postings).astype(np.int64)
    arrival = np.array([at.of_doc(int(d)) for d in every.keys], np.int64)
    order = np.lexsort((arrival[rows[:, 1]], rows[:, 0]))
    terms, first = np.unique(rows[order, 0], return_index=True)
    at.first_term = dict(zip(terms.tolist(), arrival[rows[order[first], 1]].tolist(), strict=True))
    at.arrival = arrival
    return every, rows


def _segments(every: Docs, rows: npt.NDArray[np.int64], at: _Arrival, n: int) -> _Table:
    """One ``sr_segments`` row per batch of the sync's size: its new docs and their postings,
    as memlane writes a batch's docs."""
    batches = math.ceil(n / MAX_BATCH_ENTRIES)
    bounds = [n * (i + 1) // batches for i in range(batches)]
    batch = np.searchsorted(bounds, at.arrival, side="right")
    out: list[tuple[Any, ...]] = []
    firsts: list[int] = []
    for i in range(batches):
        mine = np.flatnonzero(batch == i)
        if not len(mine):
            continue
        slot = np.full(len(every), -1)
        slot[mine] = np.arange(len(mine))
        taken = rows[slot[rows[:, 1]] >= 0]
        taken[:, 1] = slot[taken[:, 1]]
        part = np.zeros(len(every), bool)
        part[mine] = True
        gone = np.packbits(np.zeros(len(mine), np.uint8)).tobytes()
        blob = encode_postings(Postings.of(taken))
        out.append((len(mine), len(mine), 0, encode_docs(every.taken(part)), gone, blob))
        firsts.append(int(at.arrival[mine].min()))
    columns = ["slots", "live", "version", "docs", "gone", "postings"]
    return _Table("sr_segments", columns, out, firsts)


@contextlib.contextmanager
def _attached(synced: Path, template: Path) -> Iterator[sqlite3.Connection]:
    """The synced store, read only, with the template it was copied from as ``old``."""
    with contextlib.closing(sqlite3.connect(f"file:{synced}?mode=ro", uri=True)) as db:
        db.execute("ATTACH DATABASE ? AS old", (f"file:{template}?mode=ro",))
        yield db


def _arrived(db: sqlite3.Connection) -> tuple[int, Received]:
    """The template's last position, and the entries the sync brought, in arrival order."""
    (before,) = db.execute("SELECT coalesce(max(pos), 0) FROM old.headers").fetchone()
    entries = db.execute(
        "SELECT h.raw, p.data FROM headers h LEFT JOIN payloads p USING (pos) "
        "WHERE h.pos > ? ORDER BY h.pos",
        (before,),
    ).fetchall()
    return before, entries


def _changed(db: sqlite3.Connection, name: str, sql: str) -> _Table:
    """``name``'s rows in the synced store that the template does not hold."""
    if "VIRTUAL" in sql.upper():  # the search index: contentless, so its text comes from srs
        rows = db.execute(
            "SELECT doc, title, text, tags_text FROM main.srs WHERE live = 1 "
            f"AND doc NOT IN (SELECT rowid FROM old.{name}) ORDER BY doc"
        ).fetchall()
        return _Table(name, ["rowid", "title", "text", "tags"], rows)
    info = db.execute(f"PRAGMA main.table_xinfo({name})").fetchall()
    cols = [c[1] for c in info if c[6] == 0]  # not generated, not hidden
    listed = ", ".join(cols)
    if "WITHOUT ROWID" in sql.upper():
        rows = db.execute(
            f"SELECT {listed} FROM main.{name} EXCEPT SELECT {listed} FROM old.{name} ORDER BY 1"
        ).fetchall()
    else:
        rows = [
            r[1:]
            for r in db.execute(
                f"SELECT rowid, {listed} FROM main.{name} EXCEPT "
                f"SELECT rowid, {listed} FROM old.{name} ORDER BY 1"
            )
        ]
    return _Table(name, cols, rows)


class _Arrival:
    """Which entry a row was written for, as its index in arrival order (store position)."""

    def __init__(self, db: sqlite3.Connection, before: int) -> None:
        self._before = before
        self._pos = dict(db.execute("SELECT id, pos FROM headers WHERE pos > ?", (before,)))
        self._newest = dict(db.execute("SELECT sr_id, max(pos) FROM sr_versions GROUP BY sr_id"))
        self._sr = dict(db.execute("SELECT doc, sr_id FROM srs"))
        self.first_term: dict[int, int] = {}  # term id → the first entry whose doc holds it
        self.arrival = np.zeros(0, np.int64)  # each indexed doc's entry (``_index``'s order)

    def of_doc(self, doc: int) -> int:
        return int(self._newest[self._sr[doc]]) - self._before - 1

    def of(self, table: _Table, row: tuple[Any, ...]) -> int:
        value = dict(zip(table.columns, row, strict=True))
        if table.name in ("headers", "payloads", "sr_versions"):
            pos = value["pos"]
        elif table.name == "audit":  # a peer's connection's events: with the first batch
            pos = self._pos.get(value["entry"], self._before + 1)
        elif table.name in ("srs", "sr_tags", "sr_links"):
            pos = self._newest[value.get("sr_id", value.get("src"))]
        elif table.name in ("sr_docs", "sr_fts", "sr_index_docs"):
            pos = self._newest[self._sr[value.get("doc", value.get("rowid"))]]
        elif table.name in ("sr_scopes", "sr_lanes"):  # a few rows: with the first batch
            pos = self._before + 1
        elif table.name == "sr_terms":
            return self.first_term[value["id"]]
        else:
            raise RuntimeError(f"the sync wrote rows of {table.name}: which entry is each for?")
        return int(pos) - self._before - 1


def _raw_pipeline(
    path: Path,
    template: Path,
    entries: Received,
    tables: list[_Table],
    *,
    amortised: bool,
) -> float:
    """Seconds to verify ``entries`` and write ``tables``' rows into a copy of ``template``,
    one transaction per batch of the sync's size, each writing its own entries' rows in the
    order they arrived."""
    shutil.copy(template, path)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA foreign_keys=ON")
    heads: dict[Any, tuple[int, bytes | None]] = {}
    for writer, epoch, head_seq, head_id in db.execute(
        "SELECT writer, epoch, head_seq, head_id FROM logs"
    ):
        heads[(bytes(writer), bytes(epoch))] = (head_seq, head_id and bytes(head_id))
    n = len(entries)
    batches = math.ceil(n / MAX_BATCH_ENTRIES)
    bounds = [(n * i // batches, n * (i + 1) // batches) for i in range(batches)]
    # The logs first (headers reference them), then each table's rows batch by batch.
    ordered = sorted(tables, key=lambda t: t.name != "logs")
    writes = [
        (
            f"INSERT OR REPLACE INTO {t.name} ({', '.join(t.columns)}) "
            f"VALUES ({', '.join('?' * len(t.columns))})",
            _by_batch(t, bounds),
        )
        for t in ordered
    ]
    with Stopwatch() as sw:
        for i, (lo, hi) in enumerate(bounds):
            runs: dict[Any, list[Entry]] = {}
            for raw, data in entries[lo:hi]:
                e = Entry.decode(raw, data)
                runs.setdefault(e.header.log, []).append(e)
            for log, run in runs.items():
                head_seq, head_id = heads.get(log, (0, None))
                authentic = authentic_from(head_seq, head_id, run, amortised=amortised)
                if len(authentic) != len(run):
                    raise RuntimeError("an entry the sync stored does not verify")
                heads[log] = (run[-1].header.seq, run[-1].id)
            db.execute("BEGIN IMMEDIATE")
            for statement, rows in writes:
                db.executemany(statement, rows[i])
            db.execute("COMMIT")
    db.close()
    return sw.seconds


def _by_batch(table: _Table, bounds: list[tuple[int, int]]) -> list[list[tuple[Any, ...]]]:
    """``table``'s rows for each batch: those of its entries, in arrival order (a table of
    rows every batch upserts: all of them, each time)."""
    if not table.at:
        return [table.rows] * len(bounds)
    batch_of = [i for i, (lo, hi) in enumerate(bounds) for _ in range(lo, hi)]
    chunks: list[list[tuple[Any, ...]]] = [[] for _ in bounds]
    for at, row in sorted(zip(table.at, table.rows, strict=True), key=lambda p: p[0]):
        chunks[batch_of[at]].append(row)
    return chunks


def _receive_alone(synced: Path, cached: Path, work: Path) -> float:
    """Seconds for ``node.receive`` to take the entries the sync stored in ``synced``, in
    the sync's batches, into a copy of the cached receiver: the store's receive path without
    the protocol, in a process of its own as the sync's receiver is (this one holds every
    row of the raw pipelines, which the cycle collector would walk)."""
    seconds: float = in_child(_receive_alone_main, str(synced), str(cached), str(work))
    shutil.rmtree(work)
    return seconds


def _receive_alone_main(synced: str, cached: str, work: str) -> float:
    configure_logging()
    shutil.copytree(Path(cached) / "receiver", work)
    with _attached(Path(synced), Path(cached) / "receiver" / DB_FILE) as db:
        entries = _arrived(db)[1]
    return asyncio.run(_receive_batches(Path(work), entries))


async def _receive_batches(work: Path, entries: Received) -> float:
    batches = [
        entries[i : i + MAX_BATCH_ENTRIES] for i in range(0, len(entries), MAX_BATCH_ENTRIES)
    ]
    async with Node.open(work) as node:
        with Stopwatch() as sw:  # as a link hands them over: ``STORING`` batches at once
            storing: list[asyncio.Future[float]] = []
            for batch in batches:
                storing.append(asyncio.ensure_future(receive_batch(node, batch)))
                if len(storing) >= STORING:
                    await storing.pop(0)
            await asyncio.gather(*storing)
    return sw.seconds


def _same_counts(a: Path, b: Path, tables: Sequence[_Table]) -> bool:
    counts = []
    for path in (a, b):
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            counted = [t.name for t in tables if t.name not in _SEGMENTS]  # memlane merges
            counts.append([db.execute(f"SELECT count(*) FROM {t}").fetchone() for t in counted])
    return counts[0] == counts[1]


def _empty(workdir: Path) -> None:
    for leftover in workdir.iterdir():
        leftover.unlink()


# -- in-sync rounds ------------------------------------------------------------------------


async def _round_bytes(work: Path, sizes: Sizes) -> tuple[float, int, int]:
    """Bytes on the wire per round once two nodes with ``round_writers`` writers are in
    sync over TLS (the receiver starts a round every 50 ms); the rounds, the logs."""
    start = _wall() - _DAY_MS
    writers = [_writer(b"", 1000 + w, start) for w in range(sizes.round_writers)]
    dirs = await make_mesh(work, ["A", "B"], _wall, writers)
    entries = [
        (e.raw, e.payload)
        for w, wr in enumerate(writers)
        for e in [_next(wr, w) for _ in range(sizes.round_entries)]
    ]
    often = SyncOptions(
        link=LinkOptions(round_interval=0.05, min_round_interval=0.01), poll_interval=0.01
    )
    answer = SyncOptions(link=LinkOptions(min_round_interval=0.01), poll_interval=0.01)
    async with Node.open(dirs["A"]) as a, Node.open(dirs["B"]) as b:
        await a.receive(entries, source="bench")
        ca = certs.pem(a.membership.authority_certificate())
        server = _context(a, ca, certs.pem(a.membership.node_certificate()), server=True)
        b_cert = certs.pem(a.membership.node_certificate(b.key.public))
        client = _context(b, ca, b_cert, server=False)
        async with (
            Sync(a.replica(), key=a.key.public, options=answer, peer_key=_peer_key(a)) as sa,
            Sync(b.replica(), key=b.key.public, options=often, peer_key=_peer_key(b)) as sb,
        ):
            relay = _Relay(await sa.listen(ssl=server))
            peer = sb.dial(*await relay.start(), ssl=client)

            async def same() -> bool:
                return await frontier_digest(a) == await frontier_digest(b)

            await until(same, [sa, sb], within=60)
            async with asyncio.timeout(60):
                await sb.peers.wait_for(lambda _: peer.rounds >= 2)
            rounds, wire = peer.rounds, relay.up + relay.down
            async with asyncio.timeout(60):
                await sb.peers.wait_for(lambda _: peer.rounds >= rounds + sizes.rounds)
            done, wire = peer.rounds - rounds, relay.up + relay.down - wire
            logs = len(await _logs(b))
            await relay.close()
    return wire / done, done, logs


# -- the run -------------------------------------------------------------------------------


async def _measure(workdir: Path, sizes: Sizes) -> Checked:
    cached, meta, built = stores(sizes)
    quick = SMOKE if sizes == QUICK else ""
    title = (
        f"sync — Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{ssl.OPENSSL_VERSION}, {os.cpu_count()} CPUs, TLS 1.3 on loopback, "
        f"synchronous=FULL, WAL{quick}"
    )
    result = Result(title, ratios=list(RATIOS))
    progress(f"sync: initial sync of {meta['entries']:,} entries over TLS")
    clean = await _sync_once(cached, workdir / "clean", None)
    progress(f"sync: took {clean.seconds:.1f} s; the raw pipelines on the same entries")
    template = cached / "receiver" / DB_FILE
    entries, tables = _new_rows(workdir / "clean" / "receiver" / DB_FILE, template)
    raw_s = _raw_pipeline(workdir / "raw.db", template, entries, tables, amortised=True)
    entry_bytes = sum(len(raw) + len(data or b"") for raw, data in entries) / len(entries)
    same = _same_counts(workdir / "raw.db", workdir / "clean" / "receiver" / DB_FILE, tables)
    per_s = _raw_pipeline(workdir / "per-entry.db", template, entries, tables, amortised=False)
    synced = workdir / "clean" / "receiver" / DB_FILE
    alone_s = _receive_alone(synced, cached, workdir / "receive")
    shutil.rmtree(workdir / "clean")
    del entries, tables

    progress("sync: again, the connection cut once half of the bytes have passed")
    cut = await _sync_once(cached, workdir / "cut", clean.down // 2)
    shutil.rmtree(workdir / "cut")
    progress(f"sync: in-sync rounds with {sizes.round_writers} writers")
    (workdir / "rounds").mkdir()
    per_round, rounds, logs = await _round_bytes(workdir / "rounds", sizes)
    shutil.rmtree(workdir / "rounds")
    _empty(workdir)

    n = clean.lacking
    batch = f"{MAX_BATCH_ENTRIES:,} entries/txn"
    result.rows += [
        Row(
            SYNC,
            n,
            (clean.seconds,),
            note=f"receiver's peak RSS; {sizes.writers} writers",
            rss_mib=clean.receiver["peak_rss"],
        ),
        Row(RAW, n, (raw_s,), note=batch),
        Row(PER_ENTRY, n, (per_s,), note=batch),
        Row(RECEIVE, n, (alone_s,), note=f"{MAX_BATCH_ENTRIES:,} entries/receive, as served"),
    ]
    wire = clean.up + clean.down
    resent = cut.sent - cut.lacking
    quarter = n // 4
    r_q, r_end = _rss_at(clean.receiver["samples"], quarter), clean.receiver["samples"][-1][1]
    s_q, s_end = _rss_at(clean.sender["samples"], quarter), clean.sender["samples"][-1][1]
    checks = [
        (BYTES_PER_ENTRY, f"{wire / n:,.0f}", "(info)", "(info)"),
        (ROUND_BYTES, f"{per_round:,.0f}", "≤ 1,024", verdict(per_round <= 1024)),
        (RESENT, f"{resent:,}", f"≤ {MAX_BATCH_ENTRIES:,}", verdict(resent <= MAX_BATCH_ENTRIES)),
        (
            RECEIVER_RSS,
            f"{r_end:,.0f} / {r_q:,.0f} MiB",
            f"≤ {RSS_GROWTH_LIMIT:g}×",
            verdict(r_end <= r_q * RSS_GROWTH_LIMIT),
        ),
        (
            SENDER_RSS,
            f"{s_end:,.0f} / {s_q:,.0f} MiB",
            f"≤ {RSS_GROWTH_LIMIT:g}×",
            verdict(s_end <= s_q * RSS_GROWTH_LIMIT),
        ),
    ]
    how = "made by this run" if built else "reused from the cache"
    result.notes += [
        f"sender store {how} ({meta['entries']:,} entries of {sizes.writers} writers, "
        f"built in {meta['build_s']:.0f} s)",
        f"on the wire (TLS records, both ways): {clean.down:,} bytes to the receiver, "
        f"{clean.up:,} back, over {clean.connections} connection(s); an entry is "
        f"{entry_bytes:,.0f} bytes (header and payload)",
        f"peak RSS: receiver {clean.receiver['peak_rss']:,.0f} MiB, sender "
        f"{clean.sender['peak_rss']:,.0f} MiB (each its own process)",
        f"cut run: {cut.cuts} cut at {clean.down // 2:,} bytes, {cut.connections} connections, "
        f"{cut.sent:,} entries sent for {cut.lacking:,} lacking, {cut.received:,} received, "
        f"end to end {cut.seconds:.1f} s",
        f"in-sync rounds: {rounds} rounds over {logs} logs",
        "raw pipelines: the rows the sync wrote, "
        + ("the same row counts as the synced receiver" if same else "ROW COUNTS DIFFER"),
    ]
    return Checked(result, checks)


def run(*, quick: bool, workdir: Path) -> Checked:
    """Make (or reuse) the cached stores, then measure; ``quick`` is a smoke run."""
    configure_logging()
    return asyncio.run(_measure(workdir, QUICK if quick else FULL))
