"""The log's contract (docs/architecture.md §The store): what a store answers through its
public methods alone — ``author``, ``receive``, the reader's selects, the frontier and the
heads — with no SQL of the test's own.

``StoreContract`` holds the tests, one abstract case for the interface (eventsourcing's
recorder test cases); a subclass names the store it runs them against by ``options``
(tests/node/test_store_contract.py).  Stores are made by ``Node.init`` and opened by
``Node.open`` on real files, so they are made as every node's are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import random
import shutil
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, ClassVar

import pytest
import pytest_asyncio

from node.members.membership import DEFAULT_MAX_LOGS as MAX_LOGS
from node.node import Node
from node.replica import Replica
from node.store import LogRow, Received, StoreOptions
from node.store.reader import Reader
from protocol.entry import Entry
from protocol.kinds import decode_payload, encode_payload
from protocol.signing import authenticate
from tests.node.helpers import ForeignWriter, admit, sr_payload

__all__ = ["StoreContract"]

BOUNDED_SEED = b"\x05" * 32  # a writer of many logs, granted the mesh's default max_logs
WALL = 1_790_000_000_000

Opener = Callable[[Path], AbstractAsyncContextManager[Node]]


def reader_of(node: Node) -> Reader:
    reader = node.store.reader
    assert reader is not None
    return reader


async def log_of(node: Node, writer: bytes, epoch: bytes) -> LogRow | None:
    for log in await reader_of(node).select_logs():
        if (log.writer, log.epoch) == (writer, epoch):
            return log
    return None


async def tally(node: Node) -> dict[str, int]:
    """Rows of the log's tables, by the reader's ``count``, with the marks and the feed."""
    reader = reader_of(node)
    tables = ("headers", "payloads", "logs", "pending", "forks")
    found = {t: await reader.count(t) for t in tables}
    return found | {"pos": await reader.max_pos(), "audit": await reader.max_audit_seq()}


async def held(node: Node) -> str:
    """A digest of every log's entries (header and payload) by log and seq, whatever the
    positions they were stored at."""
    reader, h = reader_of(node), hashlib.sha256()
    for log in sorted(await reader.select_logs(), key=lambda g: (g.writer, g.epoch)):
        h.update(log.writer + log.epoch)
        async for stored in reader.iter_entries(log.log_id):
            h.update(stored.raw + (stored.payload if stored.payload is not None else b"-"))
    return h.hexdigest()


def forge(entry: Entry) -> Entry:
    """The same header with one signature bit flipped: no longer authentic alone."""
    sig = entry.header.sig
    header = dataclasses.replace(entry.header, sig=bytes([sig[0] ^ 1]) + sig[1:])
    return Entry.of(header, entry.payload)


def twin_at(writer: ForeignWriter, seq: int) -> Entry:
    """Another authentic entry of ``writer``'s log at ``seq`` (a restored clone's)."""
    clone = ForeignWriter(writer.mesh, seed=writer.seed, epoch=writer.epoch, wall=writer.wall)
    clone.entries = list(writer.entries[: seq - 1])
    return clone.next(payload=sr_payload("00000000-0000-7000-8000-0000000000bb", title="other"))


def tampered(fw: ForeignWriter) -> Received:
    entry = fw.next()
    assert entry.payload is not None
    return entry.raw, entry.payload[:-1] + bytes([entry.payload[-1] ^ 1])


def trailing(fw: ForeignWriter) -> Received:
    entry = fw.next()
    return entry.raw + b"\x00", entry.payload


BAD_INPUTS: dict[str, Callable[[ForeignWriter], Received]] = {
    "payload hash": tampered,
    "another mesh": lambda _fw: ForeignWriter(b"\x99" * 16).next(),
    "not msgpack": lambda _fw: (b"\xc1\x00\xff", None),
    "trailing byte": trailing,
}


def bounded_log(mesh: bytes, i: int) -> Entry:
    """The one entry of log ``i`` of the bounded writer, opened at WALL + 10 i ms."""
    writer = ForeignWriter(mesh, seed=BOUNDED_SEED, epoch=(i + 1).to_bytes(8), wall=WALL + 10 * i)
    return writer.next("sr.put", sr_payload(f"00000000-0000-7000-8000-{i:012d}"))


class StoreContract:
    """The tests every store passes; a subclass says which store by ``options``."""

    pytestmark: ClassVar = [pytest.mark.asyncio]

    def options(self) -> StoreOptions:
        raise NotImplementedError

    # -- the store under test ------------------------------------------------------------------

    @pytest.fixture
    def opened(self, wall: Callable[[], int]) -> Opener:
        return lambda path: Node.open(path, wall=wall, options=self.options())

    @pytest_asyncio.fixture
    async def home(self, tmp_path: Path, wall: Callable[[], int], opened: Opener) -> Path:
        """A new node's data directory whose mesh admits ``ForeignWriter``'s key and the
        bounded writer's, each with the default grant (MAX_LOGS logs)."""
        await Node.init(tmp_path / "a", wall=wall)
        async with opened(tmp_path / "a") as node:
            await admit(node, ForeignWriter(b""), ForeignWriter(b"", seed=BOUNDED_SEED))
        return tmp_path / "a"

    @pytest_asyncio.fixture
    async def node(self, home: Path, opened: Opener) -> AsyncIterator[Node]:
        async with opened(home) as node:
            yield node

    @pytest_asyncio.fixture
    async def twins(self, home: Path, opened: Opener) -> AsyncIterator[tuple[Node, Node]]:
        """Two stores of one node (same mesh, same state): a clone."""
        shutil.copytree(home, home.with_name("b"))
        async with opened(home) as a, opened(home.with_name("b")) as b:
            yield a, b

    @pytest.fixture
    def writer(self, node: Node) -> ForeignWriter:
        return ForeignWriter(node.info.mesh)

    # -- author: this node's own log -----------------------------------------------------------

    @staticmethod
    def _author(node: Node, n: int) -> list[asyncio.Future[Any]]:
        def one(i: int) -> asyncio.Future[Any]:
            sr_id = f"00000000-0000-7000-8000-{i:012d}"
            data = encode_payload("sr.put", sr_payload(sr_id, principal="alice", title=f"own {i}"))
            content = (data, decode_payload("sr.put", data))
            return node.store.author(node.key, node.info.mesh, node.info.epoch, "sr.put", content)

        return [one(i) for i in range(n)]

    async def test_authored_entries_are_one_chain_in_seq_order(self, node: Node) -> None:
        authored = await asyncio.gather(*self._author(node, 12))  # queued at once: one batch
        entries = [a.entry for a in authored]
        assert [e.header.seq for e in entries] == list(range(1, 13))
        assert [e.header.prev for e in entries] == [None, *(e.id for e in entries[:-1])]
        assert authenticate(entries) == [True] * 12
        assert len({e.id for e in entries}) == 12
        positions = [a.pos for a in authored]
        assert positions == sorted(positions)
        assert [a.hlc for a in authored] == sorted(a.hlc for a in authored)

        log = await log_of(node, node.key.public, node.info.epoch)
        assert log is not None
        assert (log.head_seq, log.head_id, log.forked_at) == (12, entries[-1].id, None)
        stored = await reader_of(node).select_entries(log.log_id)
        assert [(s.pos, s.raw, s.payload) for s in stored] == [
            (a.pos, e.raw, e.payload) for a, e in zip(authored, entries, strict=True)
        ]
        assert all(s.applied for s in stored)
        assert await reader_of(node).max_pos() == positions[-1]

    async def test_authoring_goes_on_from_the_head_after_a_restart(
        self, home: Path, opened: Opener
    ) -> None:
        async with opened(home) as node:
            (first,) = await asyncio.gather(*self._author(node, 1))
        async with opened(home) as node:
            (second,) = await asyncio.gather(*self._author(node, 1))
        assert second.entry.header.seq == 2
        assert second.entry.header.prev == first.entry.id
        assert second.pos > first.pos

    # -- receive -------------------------------------------------------------------------------

    async def test_receiving_the_same_entries_again_changes_nothing(
        self, node: Node, writer: ForeignWriter
    ) -> None:
        entries = writer.run(6)
        first = await node.ingest.receive(entries, source="peer")
        assert (first.stored, first.stored_ids) == (6, [e.id for e in entries])
        before, digest = await tally(node), await held(node)
        for batch in (entries, entries[2:4], list(reversed(entries))):
            again = await node.ingest.receive(batch, source="another")
            assert (again.stored, again.duplicate, again.pending) == (0, len(batch), 0)
        assert await tally(node) == before
        assert await held(node) == digest

    async def test_entries_out_of_order_wait_and_are_released_in_seq_order(
        self, node: Node, writer: ForeignWriter
    ) -> None:
        e1, e2, e3, e4 = writer.run(4)
        await node.ingest.receive([e1], source="peer")
        before = await tally(node)
        reader = reader_of(node)

        gap = await node.ingest.receive([e4, e3], source="peer")
        assert (gap.stored, gap.pending, gap.rejected) == (0, 2, 0)
        assert await tally(node) == before | {"pending": 2}
        (row,) = await node.ingest.select_pending()
        assert (row.source, row.entries, row.logs) == ("peer", 2, 1)
        waiting = sum(len(e.raw) + len(e.payload or b"") for e in (e3, e4))
        assert row.bytes == await reader.sum_pending_bytes() == waiting

        filled = await node.ingest.receive([e2], source="peer")
        assert filled.stored_ids == [e2.id, e3.id, e4.id]
        assert await node.ingest.select_pending() == []
        assert (await reader.count("pending"), await reader.sum_pending_bytes()) == (0, 0)
        log = await log_of(node, writer.key.public, writer.epoch)
        assert log is not None
        assert (log.head_seq, log.head_id) == (4, e4.id)
        stored = await reader.select_entries(log.log_id)
        assert [s.raw for s in stored] == [e.raw for e in (e1, e2, e3, e4)]
        assert [s.pos for s in stored] == sorted(s.pos for s in stored)

    @pytest.mark.parametrize("case", list(BAD_INPUTS))
    async def test_malformed_input_is_rejected_and_nothing_is_stored(
        self, node: Node, writer: ForeignWriter, case: str
    ) -> None:
        await node.ingest.receive(writer.run(2), source="peer")
        before, digest = await tally(node), await held(node)
        report = await node.ingest.receive([BAD_INPUTS[case](writer)], source="peer")
        assert (report.rejected, report.stored, report.pending) == (1, 0, 0)
        assert await tally(node) == before | {"audit": before["audit"] + 1}
        assert await held(node) == digest
        (event,) = await reader_of(node).select_audit(gt=before["audit"])
        assert (event.event, event.detail["source"]) == ("entry_rejected", "peer")

    async def test_a_forged_entry_waits_and_is_never_stored(
        self, node: Node, writer: ForeignWriter
    ) -> None:
        forged = forge(writer.next())
        before, digest = await tally(node), await held(node)
        report = await node.ingest.receive([forged], source="peer")
        assert (report.stored, report.pending, report.rejected) == (0, 1, 0)
        assert await tally(node) == before | {"pending": 1}
        assert await held(node) == digest
        assert await log_of(node, writer.key.public, writer.epoch) is None

    async def test_a_fork_is_recorded_once_and_hides_the_log_from_its_seq(
        self, node: Node, writer: ForeignWriter
    ) -> None:
        entries = writer.run(5)
        await node.ingest.receive(entries, source="peer")
        other = twin_at(writer, 3)
        reader = reader_of(node)

        report = await node.ingest.receive([other], source="peer")
        assert (report.forks, report.stored) == (1, 0)
        assert await reader.select_forks() == [(entries[2].raw, other.raw)]
        assert (await reader.select_marks()).forks == await reader.count("forks") == 1
        log = await log_of(node, writer.key.public, writer.epoch)
        assert log is not None
        assert (log.head_seq, log.head_id, log.forked_at) == (5, entries[-1].id, 3)
        stored = await reader.select_entries(log.log_id)
        assert [(s.seq, s.applied) for s in stored] == [(i, i < 3) for i in range(1, 6)]
        events = Counter(r.event for r in await reader.select_audit(limit=1000))
        assert events["fork_detected"] == 1

        again = await node.ingest.receive([other, entries[2]], source="another")
        assert again.forks == 0
        assert len(await reader.select_forks()) == 1

    async def test_a_writers_logs_are_bounded_by_its_max_logs_in_any_order(
        self, twins: tuple[Node, Node]
    ) -> None:
        a, b = twins
        logs = [bounded_log(a.info.mesh, i) for i in range(MAX_LOGS + 2)]
        in_order = await a.ingest.receive(logs, source="peer")
        assert (in_order.stored, in_order.rejected) == (MAX_LOGS, 2)
        assert in_order.stored_ids == [e.id for e in logs[:MAX_LOGS]]
        late_first = logs[::-1]  # the late logs are held first, then displaced
        for lo in range(0, len(late_first), 16):
            await b.ingest.receive(late_first[lo : lo + 16], source="peer")

        key = ForeignWriter(b"", seed=BOUNDED_SEED).key.public
        for node in (a, b):
            frontier = (await Replica(node.store, node.info.mesh).snapshot()).frontier
            held_logs = [t.epoch for t in frontier.tips if t.writer == key]
            assert held_logs == [(i + 1).to_bytes(8) for i in range(MAX_LOGS)]
        assert await frontier_of(a) == await frontier_of(b)

    # -- the reader's selects ------------------------------------------------------------------

    async def test_select_entries_reads_a_seq_range(
        self, node: Node, writer: ForeignWriter
    ) -> None:
        entries = writer.run(10)
        await node.ingest.receive(entries, source="peer")
        log = await log_of(node, writer.key.public, writer.epoch)
        assert log is not None
        reader = reader_of(node)

        async def seqs(**bounds: int) -> list[int]:
            return [s.seq for s in await reader.select_entries(log.log_id, **bounds)]

        assert await seqs() == list(range(1, 11))
        assert await seqs(gt=3, lte=7) == [4, 5, 6, 7]
        assert await seqs(gt=3, limit=2) == [4, 5]
        assert await seqs(gt=10) == []
        assert await seqs(lte=0) == []
        assert [s.seq async for s in reader.iter_entries(log.log_id, batch=3)] == list(range(1, 11))
        for s, e in zip(await reader.select_entries(log.log_id), entries, strict=True):
            assert await reader.select_entry_id(log.log_id, s.seq) == e.id
        assert await reader.select_entry_id(log.log_id, 11) is None

    async def test_select_span_keeps_within_its_limit_and_bytes(
        self, node: Node, writer: ForeignWriter
    ) -> None:
        entries = writer.run(6)
        await node.ingest.receive(entries, source="peer")
        log = await log_of(node, writer.key.public, writer.epoch)
        assert log is not None
        cost = [len(e.raw) + len(e.payload or b"") for e in entries]
        span = reader_of(node).select_span

        whole = await span(log.log_id, gt=0, lte=6, limit=100, max_bytes=1 << 30)
        assert [(s.seq, s.id, s.raw, s.payload) for s in whole] == [
            (e.header.seq, e.id, e.raw, e.payload) for e in entries
        ]
        assert len(await span(log.log_id, gt=1, lte=6, limit=3, max_bytes=1 << 30)) == 3
        two = await span(log.log_id, gt=1, lte=6, limit=100, max_bytes=cost[1] + cost[2])
        assert [s.seq for s in two] == [2, 3]
        assert await span(log.log_id, gt=1, lte=6, limit=100, max_bytes=cost[1] - 1) == []

    async def test_the_audit_feed_reads_by_seq(self, node: Node, writer: ForeignWriter) -> None:
        await node.ingest.receive(writer.run(5), source="peer")
        await node.ingest.receive([BAD_INPUTS["another mesh"](writer)], source="hostile")
        reader = reader_of(node)
        feed = await reader.select_audit(limit=1000)
        seqs = [r.seq for r in feed]
        assert seqs == sorted(set(seqs))
        assert await reader.max_audit_seq() == seqs[-1] == await reader.count("audit")

        paged, after = [], 0
        for _ in feed:  # a page of at least one row each time, or the end
            if not (page := await reader.select_audit(gt=after, limit=2)):
                break
            assert len(page) <= 2
            paged, after = paged + page, page[-1].seq
        assert paged == feed
        assert await reader.select_audit(gt=seqs[-1]) == []
        counts = Counter(r.event for r in feed)
        assert counts["sr_synced"] == 5
        assert counts["entry_rejected"] == 1
        assert await reader.select_audit_counts(gt=0, lte=seqs[-1]) == dict(counts)
        tail = Counter(r.event for r in feed[3:])
        assert await reader.select_audit_counts(gt=seqs[2], lte=seqs[-1]) == dict(tail)

    async def test_counts_and_positions_agree_with_the_entries(
        self, node: Node, writer: ForeignWriter
    ) -> None:
        entries = writer.run(4)
        await node.ingest.receive([(e.raw, None) for e in entries[:2]], source="peer")  # bare
        await node.ingest.receive(entries[2:], source="peer")
        reader = reader_of(node)
        logs = await reader.select_logs()
        stored = [s for g in logs for s in await reader.select_entries(g.log_id)]
        assert await reader.count("logs") == len(logs)
        assert await reader.count("headers") == len(stored)
        assert await reader.count("payloads") == sum(s.payload is not None for s in stored)
        assert await reader.max_pos() == max(s.pos for s in stored)
        marks = await reader.select_marks()
        assert (marks.pos, marks.forks) == (await reader.max_pos(), 0)
        with pytest.raises(ValueError, match="not a countable table"):
            await reader.count("sqlite_master")

    async def test_select_changed_names_the_logs_that_grew(
        self, node: Node, writer: ForeignWriter
    ) -> None:
        await node.ingest.receive(writer.run(2), source="peer")
        mark = await reader_of(node).max_pos()
        assert await reader_of(node).select_changed(gt=mark) == []
        await node.ingest.receive(writer.run(3), source="peer")
        (changed,) = await reader_of(node).select_changed(gt=mark)
        assert (changed.writer, changed.epoch, changed.head_seq) == (
            writer.key.public,
            writer.epoch,
            5,
        )
        assert changed.pos == await reader_of(node).max_pos()

    # -- the frontier and the heads ------------------------------------------------------------

    async def test_the_frontier_is_every_held_logs_head(
        self, node: Node, writer: ForeignWriter
    ) -> None:
        await node.ingest.receive(writer.run(3), source="peer")
        await asyncio.gather(*self._author(node, 2))
        snap = await Replica(node.store, node.info.mesh).snapshot()
        logs = await reader_of(node).select_logs()
        assert [(t.writer, t.epoch, t.seq, t.head) for t in snap.frontier.tips] == sorted(
            (g.writer, g.epoch, g.head_seq, g.head_id) for g in logs if g.head_seq
        )
        assert snap.log_ids == {(g.writer, g.epoch): g.log_id for g in logs if g.head_seq}
        assert snap.pos == await reader_of(node).max_pos()
        for tip in snap.frontier.tips:
            log_id = snap.log_ids[tip.log]
            assert await reader_of(node).select_entry_id(log_id, tip.seq) == tip.head
            head = node.store.head_of(tip.log)
            assert head is not None
            assert (head.log_id, head.seq, head.id) == (log_id, tip.seq, tip.head)

    async def test_the_heads_are_the_same_after_a_restart(self, home: Path, opened: Opener) -> None:
        async with opened(home) as node:
            await node.ingest.receive(ForeignWriter(node.info.mesh).run(4), source="peer")
            before = await frontier_of(node)
        async with opened(home) as node:
            assert await frontier_of(node) == before

    async def test_two_stores_of_the_same_entries_hold_the_same_logs(
        self, twins: tuple[Node, Node]
    ) -> None:
        a, b = twins
        writers = [ForeignWriter(a.info.mesh), ForeignWriter(a.info.mesh, epoch=b"\x02" * 8)]
        entries = [e for w in writers for e in w.run(8)]
        shuffled = random.Random(7).sample(entries, len(entries))
        assert (await a.ingest.receive(entries, source="peer")).stored == 16
        for lo in range(0, 16, 3):  # another order, in batches
            await b.ingest.receive(shuffled[lo : lo + 3], source="peer")

        assert await frontier_of(a) == await frontier_of(b)
        assert await held(a) == await held(b)
        rows = [await tally(n) for n in (a, b)]
        assert rows[0] == rows[1]


async def frontier_of(node: Node) -> bytes:
    return (await Replica(node.store, node.info.mesh).snapshot()).frontier.digest()
