"""Forks (docs/entries.md §Forks, docs/mesh.md §Forks): two authentic entries at one
(writer, epoch, seq).

Both headers are kept as proof, the log is hidden from the fork point on (stored, not applied,
view rows withdrawn), and ``fork_detected`` is audited once per proof.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import msgpack
import pytest

from node.node import Node
from node.store.reader import AuditRow
from protocol.entry import Entry, decode_header
from protocol.signing import verify_signature
from tests.node.helpers import ForeignWriter, admit, counts, sr_payload

FORK_SEQ = 3


def episode(n: int) -> dict[str, Any]:
    return {
        "id": f"00000000-0000-7000-8000-{n:012d}",
        "vault": "team",
        "caller": "remote",
        "channel": "api",
        "episode_type": "task",
    }


def honest_log(mesh: bytes, n: int = 5) -> ForeignWriter:
    """A log whose 4th entry is an episode (so both views have rows to withdraw)."""
    writer = ForeignWriter(mesh)
    for seq in range(1, n + 1):
        if seq == 4:
            writer.next("episode.record", episode(seq))
        else:
            writer.next()
    return writer


def twin(honest: ForeignWriter, at: int = FORK_SEQ) -> ForeignWriter:
    """The same key and epoch (a restored clone), sharing the log up to ``at`` - 1, then
    writing something else at ``at``."""
    clone = ForeignWriter(honest.mesh, seed=honest.seed, epoch=honest.epoch)
    clone.entries = list(honest.entries[: at - 1])
    clone.wall = honest.entries[at - 2].header.hlc.wall if at > 1 else honest.wall
    clone.next(payload=sr_payload("00000000-0000-7000-8000-0000000000bb", title="the other"))
    return clone


def forge(entry: Entry) -> Entry:
    sig = entry.header.sig
    header = dataclasses.replace(entry.header, sig=bytes([sig[0] ^ 1]) + sig[1:])
    return Entry.of(header, entry.payload)


def signature_verifies(raw: bytes) -> bool:
    h = decode_header(raw)
    return verify_signature(h.writer, h.sig, h.signing_bytes())


def subject(entry: Entry) -> str:
    assert entry.payload is not None
    body = msgpack.unpackb(entry.payload)
    value: str = body.get("sr_id") or body["id"]
    return value


async def fork_events(node: Node) -> list[AuditRow]:
    reader = node.reader()
    return [r for r in await reader.select_audit(limit=10_000) if r.event == "fork_detected"]


async def fork_rows(node: Node) -> list[tuple[bytes, bytes, int, bytes, bytes]]:
    reader = node.reader()
    rows = [(decode_header(k), k, o) for k, o in await reader.select_forks()]
    return sorted(((h.writer, h.epoch, h.seq, k, o) for h, k, o in rows), key=lambda r: r[2])


async def applied_by_seq(node: Node, writer: ForeignWriter) -> dict[int, bool]:
    reader = node.reader()
    (log,) = [g for g in await reader.select_logs() if g.writer == writer.key.public]
    return {e.seq: e.applied for e in await reader.select_entries(log.log_id)}


async def view_subjects(node: Node) -> set[str]:
    reader = node.reader()
    srs = await reader.fetchall("SELECT sr_id FROM srs WHERE live = 1")
    episodes = await reader.fetchall("SELECT id FROM episodes")
    return {r[0] for r in srs} | {r[0] for r in episodes}


async def forked_at(node: Node, writer: ForeignWriter) -> int | None:
    reader = node.reader()
    (log,) = [g for g in await reader.select_logs() if g.writer == writer.key.public]
    return log.forked_at


async def assert_hidden_from(node: Node, honest: ForeignWriter, seq: int) -> None:
    entries = honest.entries
    applied = await applied_by_seq(node, honest)
    assert applied == {e.header.seq: e.header.seq < seq for e in entries}
    assert await view_subjects(node) == {subject(e) for e in entries if e.header.seq < seq}
    assert await forked_at(node, honest) == seq


@pytest.mark.asyncio
async def test_two_authentic_entries_at_one_position_are_a_fork(node: Node) -> None:
    honest = honest_log(node.info.mesh)
    await admit(node, honest)
    await node.receive(honest.entries, source="peer")
    assert await view_subjects(node) == {subject(e) for e in honest.entries}
    other = twin(honest).entries[-1]
    kept = honest.entries[FORK_SEQ - 1]
    assert other.header.seq == kept.header.seq
    assert other.id != kept.id
    assert signature_verifies(other.raw)

    report = await node.receive([other], source="peer")

    assert (report.forks, report.stored) == (1, 0)
    (row,) = await fork_rows(node)
    assert row == (honest.key.public, honest.epoch, FORK_SEQ, kept.raw, other.raw)
    assert signature_verifies(row[3])
    assert signature_verifies(row[4])
    (event,) = await fork_events(node)
    assert event.entry == other.id
    assert event.detail == {
        "source": "peer",
        "writer": honest.key.public,
        "epoch": honest.epoch,
        "seq": FORK_SEQ,
    }
    await assert_hidden_from(node, honest, FORK_SEQ)


@pytest.mark.asyncio
async def test_the_same_fork_proof_again_adds_nothing(node: Node) -> None:
    honest = honest_log(node.info.mesh)
    await admit(node, honest)
    await node.receive(honest.entries, source="peer")
    other = twin(honest).entries[-1]
    await node.receive([other], source="peer")
    before = await counts(node)

    for source in ("peer", "another-peer"):
        again = await node.receive([other], source=source)
        assert again.forks == 0
    # Both sides of the proof together, too.
    await node.receive([honest.entries[FORK_SEQ - 1], other], source="peer")

    assert len(await fork_events(node)) == 1
    assert len(await fork_rows(node)) == 1
    assert await counts(node) == before
    await assert_hidden_from(node, honest, FORK_SEQ)


@pytest.mark.asyncio
async def test_a_fork_inside_one_batch_is_found(node: Node) -> None:
    honest = honest_log(node.info.mesh)
    await admit(node, honest)
    other = twin(honest).entries[-1]

    report = await node.receive([*honest.entries, other], source="peer")

    assert (report.stored, report.forks) == (5, 1)
    assert len(await fork_events(node)) == 1
    await assert_hidden_from(node, honest, FORK_SEQ)


@pytest.mark.asyncio
async def test_two_candidates_for_the_next_position_in_one_batch(node: Node) -> None:
    honest = honest_log(node.info.mesh)
    await admit(node, honest)
    await node.receive(honest.entries[: FORK_SEQ - 1], source="peer")
    other = twin(honest).entries[-1]
    kept = honest.entries[FORK_SEQ - 1]

    report = await node.receive([kept, other], source="peer")

    assert (report.stored, report.forks) == (1, 1)
    (row,) = await fork_rows(node)
    assert {row[3], row[4]} == {kept.raw, other.raw}
    (applied,) = [v for s, v in (await applied_by_seq(node, honest)).items() if s == FORK_SEQ]
    assert applied is False
    assert await forked_at(node, honest) == FORK_SEQ


@pytest.mark.asyncio
async def test_a_fork_at_seq_1_hides_the_whole_log(node: Node) -> None:
    honest = honest_log(node.info.mesh)
    await admit(node, honest)
    await node.receive(honest.entries, source="peer")
    other = twin(honest, at=1).entries[-1]

    assert (await node.receive([other], source="peer")).forks == 1
    await assert_hidden_from(node, honest, 1)
    assert await view_subjects(node) == set()


@pytest.mark.asyncio
async def test_an_unauthentic_other_entry_is_not_a_fork(node: Node) -> None:
    honest = honest_log(node.info.mesh)
    await admit(node, honest)
    await node.receive(honest.entries, source="peer")
    before = await counts(node)
    other = forge(twin(honest).entries[-1])

    report = await node.receive([other], source="peer")

    assert report.forks == 0
    assert await fork_events(node) == []
    assert await fork_rows(node) == []
    assert await counts(node) == before
    assert all((await applied_by_seq(node, honest)).values())
    assert await forked_at(node, honest) is None


@pytest.mark.asyncio
async def test_an_other_entry_authentic_through_its_follower_is_a_fork(node: Node) -> None:
    honest = honest_log(node.info.mesh)
    await admit(node, honest)
    await node.receive(honest.entries, source="peer")
    clone = twin(honest)
    clone.entries[-1] = bad_sig = forge(clone.entries[-1])
    follower = clone.next()  # links to the bad-signature entry and vouches for it

    report = await node.receive([bad_sig, follower], source="peer")

    assert report.forks >= 1
    rows = await fork_rows(node)
    assert [r.detail["seq"] for r in await fork_events(node)] == [r[2] for r in rows]
    assert rows[0][2] == FORK_SEQ
    # A proof whose two headers each carry a verifying signature is kept (the follower's).
    assert any(
        r[4] == follower.raw and signature_verifies(r[3]) and signature_verifies(r[4]) for r in rows
    )
    await assert_hidden_from(node, honest, FORK_SEQ)


@pytest.mark.asyncio
async def test_entries_after_the_fork_point_stay_hidden_across_a_restart(
    node_dir: Path, wall: Any
) -> None:
    async with Node.open(node_dir, wall=wall) as node:
        honest = honest_log(node.info.mesh)
        await admit(node, honest)
        await node.receive(honest.entries, source="peer")
        await node.receive([twin(honest).entries[-1]], source="peer")
        late = honest.next()
        assert (await node.receive([late], source="peer")).stored_ids == [late.id]
        await assert_hidden_from(node, honest, FORK_SEQ)

    async with Node.open(node_dir, wall=wall) as node:
        later = honest.next()
        assert (await node.receive([later], source="peer")).stored_ids == [later.id]
        await assert_hidden_from(node, honest, FORK_SEQ)
        assert len(await fork_events(node)) == 1
        verified = await node.verify()
        assert verified.forked_logs == 1


@pytest.mark.asyncio
async def test_a_store_holding_a_fork_proof_checks_clean(node: Node, node_dir: Path) -> None:
    """``PRAGMA integrity_check`` answers ``ok`` for a healthy store with a fork proof (SQLite
    3.40 misread ``forks`` while its key's last column was declared last)."""
    honest = honest_log(node.info.mesh)
    await admit(node, honest)
    await node.receive(honest.entries, source="peer")
    assert (await node.receive([twin(honest).entries[-1]], source="peer")).forks == 1

    with sqlite3.connect(node_dir / "memlane.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
